//! Subcommands of the `ringmq` binary that live in files of their own.

pub mod users;
