//! A shard's life on disk: recovery at open, retention, and the ballast that
//! keeps room on a full disk.

pub(crate) mod ballast;
pub(crate) mod recovery;
pub(crate) mod retention;
