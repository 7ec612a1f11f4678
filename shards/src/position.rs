//! Newtypes that keep the two kinds of numbers apart: a queue's offsets count
//! messages, log positions count bytes of the shard's commit log.

use std::fmt;

/// Identifies a queue inside one shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct QueueId(pub u32);

/// A byte position in the shard's commit log (segments are fixed-size slices of it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct LogPos(pub u64);

impl fmt::Display for QueueId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl fmt::Display for LogPos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Direct I/O page size: every write and read is aligned to it.
pub const PAGE_BYTES: u64 = 4096;

/// Rounds `v` down to a page boundary.
pub fn page_down(v: u64) -> u64 {
    v & !(PAGE_BYTES - 1)
}

/// Rounds `v` up to a page boundary.
pub fn page_up(v: u64) -> u64 {
    (v + PAGE_BYTES - 1) & !(PAGE_BYTES - 1)
}
