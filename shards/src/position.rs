//! Newtypes that keep the kinds of numbers apart: a queue's offsets count
//! messages, log positions count bytes of the shard's commit log, and plain
//! integers are counts (of bytes or messages) between them. A position plus
//! a byte count is a position, a position minus a position is a byte count;
//! likewise for offsets and message counts.

use std::fmt;

/// Identifies a queue inside one shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct QueueId(pub u32);

/// A message's offset in its queue. The engine's public API takes and
/// returns plain u64 offsets (the wire's); inside it, offsets are this type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Offset(pub u64);

impl Offset {
    /// The offset `count` messages before.
    pub fn back(self, count: u64) -> Offset {
        Offset(self.0 - count)
    }

    /// This offset rounded down to a multiple of `entries` (an index page or file).
    pub fn round_down(self, entries: u64) -> Offset {
        Offset(self.0 - self.0 % entries)
    }

    /// The offsets from this one up to `end`.
    pub fn upto(self, end: Offset) -> impl Iterator<Item = Offset> {
        (self.0..end.0).map(Offset)
    }
}

/// A byte position in the shard's commit log (segments are fixed-size slices of it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct LogPos(pub u64);

impl LogPos {
    /// The page boundary at or before this position.
    pub fn page_down(self) -> LogPos {
        LogPos(page_down(self.0))
    }

    /// The page boundary at or after this position.
    pub fn page_up(self) -> LogPos {
        LogPos(page_up(self.0))
    }

    /// The number of the `chunk_bytes` chunk of the log holding this position.
    pub fn chunk(self, chunk_bytes: u64) -> u64 {
        self.0 / chunk_bytes
    }

    /// True on a page boundary.
    pub fn on_page(self) -> bool {
        self.0.is_multiple_of(PAGE_BYTES)
    }
}

/// The arithmetic of a counter newtype: plus a count is the same kind,
/// minus one of its kind is a count (never negative), and it displays as
/// its number.
macro_rules! counter {
    ($name:ident, $what:literal) => {
        impl std::ops::Add<u64> for $name {
            type Output = $name;
            fn add(self, count: u64) -> $name {
                $name(self.0 + count)
            }
        }

        impl std::ops::AddAssign<u64> for $name {
            fn add_assign(&mut self, count: u64) {
                self.0 += count;
            }
        }

        impl std::ops::Sub for $name {
            type Output = u64;
            fn sub(self, earlier: $name) -> u64 {
                assert!(earlier <= self, concat!($what, " {} is past {}"), earlier, self);
                self.0 - earlier.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}", self.0)
            }
        }
    };
}

// Offset + messages, LogPos + bytes; the difference of two is that count.
counter!(Offset, "offset");
counter!(LogPos, "position");

impl fmt::Display for QueueId {
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
