//! Reads: the reader over the index, the cache and the disk, and the cache.

pub(crate) mod cache;
pub(crate) mod reader;
