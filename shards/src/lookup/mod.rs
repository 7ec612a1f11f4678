//! Message lookup by id and by key (RocketMQ's IndexFile, as sorted runs):
//! every appended record adds an entry (64-bit hash of its message id, and
//! of its key if it has one; queue; offset) to an in-memory tail, in log
//! order. A checkpoint writes the tail's entries below the checkpoint
//! position as a chunk file, `lookup/<from>-<to>.lkp` (log positions),
//! grouped into buckets by the top bits of their hash (a counting sort, about
//! 256 entries a bucket); recovery rebuilds the tail from the checkpoint on,
//! like the queue index. Each chunk keeps its bucket starts in memory, so a
//! lookup reads the one bucket per chunk that may hold the hash. (Chunks of
//! the first format, sorted by hash with a sparse index of every 256th hash,
//! are still read.)
//! Retention deletes the chunks whose whole range it removed. A hash match
//! is a candidate: the caller confirms it against the stored record.

mod build;
mod chunk;
mod recent;
mod tail;

pub(crate) use chunk::dir_of;
pub(crate) use recent::{BatchKey, RecentBatches, Stored};
pub(crate) use tail::Lookup;

use crate::position::QueueId;

/// Chunks sorted by hash: header (magic, u64 count), entries, footer (the
/// first hash of every `BLOCK` entries, then the last hash).
const MAGIC_SORTED: &[u8; 8] = b"RMQLKP01";
/// Chunks grouped by bucket: header (magic, u64 count, u32 bucket bits, u32
/// zero), entries, footer (u32 start of every bucket, then the count).
const MAGIC_BUCKETED: &[u8; 8] = b"RMQLKP02";
const SORTED_HEADER_BYTES: usize = 16;
const HEADER_BYTES: usize = 24;
const ENTRY_BYTES: usize = 20;
/// Entries per block of a sorted chunk's sparse index.
const BLOCK: usize = 256;
/// Entries per bucket a chunk aims at: what a lookup reads per chunk.
const BUCKET_ENTRIES: usize = 256;

/// The lookup hash of a message id.
pub fn id_hash(id: &[u8; 16]) -> u64 {
    fnv1a(b'i', id)
}

/// The lookup hash of a message key (queues of every topic share it; the
/// caller filters by queue).
pub fn key_hash(key: &[u8]) -> u64 {
    fnv1a(b'k', key)
}

fn fnv1a(kind: u8, bytes: &[u8]) -> u64 {
    std::iter::once(&kind)
        .chain(bytes)
        .fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3))
}

/// One entry: a hash and where a record with it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Entry {
    pub hash: u64,
    pub queue: QueueId,
    pub offset: u64,
}

impl Entry {
    /// Appends the entry's `ENTRY_BYTES` file bytes: u64 hash, u32 queue, u64 offset.
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.hash.to_le_bytes());
        out.extend_from_slice(&self.queue.0.to_le_bytes());
        out.extend_from_slice(&self.offset.to_le_bytes());
    }

    /// The entry in the first `ENTRY_BYTES` of `bytes`.
    fn decode(bytes: &[u8]) -> Entry {
        Entry {
            hash: crate::batch::u64_at(bytes, 0),
            queue: QueueId(crate::batch::u32_at(bytes, 8)),
            offset: crate::batch::u64_at(bytes, 12),
        }
    }
}
