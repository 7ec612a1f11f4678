//! Subcommands of the `ringmq` binary that live in files of their own.

pub mod acls;
pub mod groups;
pub mod quotas;
pub mod renamed;
pub mod settings;
pub mod top;
pub mod topics;
pub mod trace;
pub mod users;
