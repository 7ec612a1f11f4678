//! The commit log: its segments, the group-commit rounds, the flusher that
//! writes them, the rounds on their way to the disk, the segment preallocator, the pool of retired segments it
//! recycles, and the completion yield.

pub(crate) mod commit_log;
pub(crate) mod completion_yield;
pub(crate) mod flusher;
pub(crate) mod in_flight;
pub(crate) mod pool;
pub(crate) mod preallocator;
pub(crate) mod round;
pub(crate) mod segment;

pub use commit_log::Appended;
pub(crate) use commit_log::{Blocked, Log};
