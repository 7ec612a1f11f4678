//! Idempotent appends: the shard's most recent batches by what the producer
//! made (the queue, the first record's message id, the producer's CRC and the
//! record count). A batch sent again, byte for byte (a client retrying after
//! a timeout, a lost answer or a fail-over), is found here and answered with
//! where it was stored instead of being stored twice. Mirrored batches are
//! noted too, so a follower that becomes leader knows what its predecessor
//! stored. After a crash the window holds what recovery scanned (the batches
//! past the last checkpoint, whose answers may never have left); a clean
//! stop saves the window (a node that changes role restarts its shards)
//! and the next open loads it once.

use crate::batch::{BatchHeader, CheckedBatch};
use crate::error::Result;
use crate::fs;
use crate::position::{LogPos, QueueId};
use std::collections::{HashMap, VecDeque};
use std::path::Path;

/// The window a clean stop saved, in the lookup directory.
const FILE: &str = "recent-batches";
const MAGIC: u32 = 0x4252_4d52; // "RMRB"
/// queue, first id, crc, records, position, base offset.
const ENTRY_BYTES: usize = 4 + 16 + 4 + 4 + 8 + 8;

/// What identifies a producer's batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct BatchKey {
    queue: u32,
    first_id: [u8; 16],
    crc: u32,
    records: u32,
}

impl BatchKey {
    /// The key of a batch whose first record has a message id (the broker's
    /// own records carry none: they are never retried by a client).
    fn new(queue: QueueId, first_id: [u8; 16], crc: u32, records: u32) -> Option<BatchKey> {
        (first_id != [0; 16]).then_some(BatchKey { queue: queue.0, first_id, crc, records })
    }

    /// The key of a producer's batch, from what its check found (nothing decoded again).
    pub fn checked(queue: QueueId, checked: &CheckedBatch) -> Option<BatchKey> {
        BatchKey::new(queue, checked.first_id, checked.crc, checked.record_count)
    }

    /// The key of a stored batch (mirrored or recovered).
    pub fn of(queue: QueueId, batch: &[u8]) -> Option<BatchKey> {
        let header = BatchHeader::decode(batch)?;
        if header.is_padding() || header.record_count == 0 || batch.len() < header.length as usize {
            return None;
        }
        let mut inflated = Vec::new();
        let first = crate::batch::records(batch, &mut inflated).ok()?.next()?.ok()?;
        BatchKey::new(queue, first.message_id, header.crc, header.record_count)
    }
}

/// Where a batch was stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stored {
    pub position: LogPos,
    pub base_offset: u64,
    pub records: u32,
}

/// The last `capacity` batches of the shard (0: none remembered).
#[derive(Debug, Default)]
pub(crate) struct RecentBatches {
    capacity: usize,
    at: HashMap<BatchKey, Stored>,
    order: VecDeque<BatchKey>,
}

impl RecentBatches {
    pub fn new(capacity: usize) -> RecentBatches {
        RecentBatches { capacity, at: HashMap::with_capacity(capacity.min(1 << 16)), order: VecDeque::new() }
    }

    /// Where the batch of `key` was stored, if it is one of the recent ones.
    pub fn find(&self, key: &BatchKey) -> Option<Stored> {
        self.at.get(key).copied()
    }

    /// Remembers a batch just placed, forgetting the oldest one past the capacity.
    pub fn note(&mut self, key: BatchKey, stored: Stored) {
        if self.capacity == 0 {
            return;
        }
        if self.at.insert(key, stored).is_none() {
            self.order.push_back(key);
        }
        while self.order.len() > self.capacity {
            let oldest = self.order.pop_front().expect("longer than the capacity");
            self.at.remove(&oldest);
        }
        debug_assert_eq!(self.at.len(), self.order.len());
    }

    /// The window, oldest first, with a count and a CRC: what a clean stop saves.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(12 + self.order.len() * ENTRY_BYTES);
        out.extend_from_slice(&MAGIC.to_le_bytes());
        out.extend_from_slice(&(self.order.len() as u32).to_le_bytes());
        for key in &self.order {
            let stored = self.at[key];
            out.extend_from_slice(&key.queue.to_le_bytes());
            out.extend_from_slice(&key.first_id);
            out.extend_from_slice(&key.crc.to_le_bytes());
            out.extend_from_slice(&key.records.to_le_bytes());
            out.extend_from_slice(&stored.position.0.to_le_bytes());
            out.extend_from_slice(&stored.base_offset.to_le_bytes());
        }
        let crc = crc32fast::hash(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out
    }

    /// Notes the saved entries of batches before `end` (a log cut back
    /// since holds other batches past it); a damaged file restores nothing.
    fn restore(&mut self, bytes: &[u8], end: LogPos) -> usize {
        let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
        let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
        if bytes.len() < 12 || u32_at(0) != MAGIC {
            return 0;
        }
        let count = u32_at(4) as usize;
        let body = 8 + count * ENTRY_BYTES;
        if bytes.len() < body + 4 || crc32fast::hash(&bytes[..body]) != u32_at(body) {
            return 0;
        }
        let mut restored = 0;
        for at in (8..body).step_by(ENTRY_BYTES) {
            let first_id = bytes[at + 4..at + 20].try_into().expect("16 bytes");
            let key = BatchKey { queue: u32_at(at), first_id, crc: u32_at(at + 20), records: u32_at(at + 24) };
            let stored =
                Stored { position: LogPos(u64_at(at + 28)), base_offset: u64_at(at + 36), records: key.records };
            if stored.position < end && self.capacity > 0 {
                self.note(key, stored);
                restored += 1;
            }
        }
        restored
    }

    /// Saves an encoded window in `dir` (a clean stop).
    pub async fn save(bytes: Vec<u8>, dir: &Path) -> Result<()> {
        fs::write_atomic(dir, FILE, &bytes).await
    }

    /// Loads the window a clean stop saved in `dir`, for a log that ends at
    /// `end`, and removes the file: after a later crash the log may differ.
    pub async fn load(&mut self, dir: &Path, end: LogPos) -> Result<usize> {
        let path = dir.join(FILE);
        let Some(bytes) = fs::read_small(&path).await? else { return Ok(0) };
        let restored = self.restore(&bytes, end);
        fs::remove_files("removing the saved recent batches", vec![path]).await?;
        Ok(restored)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::BatchBuilder;
    use crate::record::Record;

    fn batch(id: u8, value: &[u8]) -> Vec<u8> {
        let mut b = BatchBuilder::new(0);
        b.push(&Record { message_id: [id; 16], value: Some(value), ..Record::default() });
        b.finish()
    }

    /// The key of `batch(id, value)` in `queue`, as a producer's append sees it.
    fn key(queue: QueueId, id: u8, value: &[u8]) -> BatchKey {
        let bytes = batch(id, value);
        let checked = crate::batch::check(&bytes, crate::ShardConfig::new("").limits()).unwrap();
        let key = BatchKey::checked(queue, &checked).unwrap();
        assert_eq!(BatchKey::of(queue, &bytes), Some(key), "a stored batch has the key its check gave");
        key
    }

    #[test]
    fn the_same_batch_is_found_until_it_is_one_of_the_oldest_past_the_capacity() {
        let mut recent = RecentBatches::new(2);
        let (q, other) = (QueueId(1), QueueId(2));
        let at = |p| Stored { position: LogPos(p), base_offset: p, records: 1 };
        recent.note(key(q, 1, b"a"), at(0));
        assert_eq!(recent.find(&key(q, 1, b"a")), Some(at(0)), "sent again: found");
        assert_eq!(recent.find(&key(other, 1, b"a")), None, "another queue's batch");
        assert_eq!(recent.find(&key(q, 1, b"b")), None, "the same id with other bytes is another batch");
        recent.note(key(q, 2, b"a"), at(1));
        recent.note(key(q, 3, b"a"), at(2));
        assert_eq!(recent.find(&key(q, 1, b"a")), None, "forgotten past the capacity");
        assert_eq!(recent.find(&key(q, 3, b"a")), Some(at(2)));
        let mut none = RecentBatches::new(0);
        none.note(key(q, 1, b"a"), at(0));
        assert_eq!(none.find(&key(q, 1, b"a")), None, "a window of 0 remembers nothing");
        let internal = batch(0, b"internal");
        let checked = crate::batch::check(&internal, crate::ShardConfig::new("").limits()).unwrap();
        assert_eq!(BatchKey::checked(q, &checked), None, "records without an id are not remembered");
        assert_eq!(BatchKey::of(q, &internal), None);
    }

    #[test]
    fn a_saved_window_restores_what_lies_before_the_log_end() {
        let mut recent = RecentBatches::new(8);
        let at = |p| Stored { position: LogPos(p), base_offset: p / 100, records: 1 };
        for i in 0..4u8 {
            recent.note(key(QueueId(1), i + 1, b"v"), at(u64::from(i) * 100));
        }
        let mut bytes = recent.encode();
        bytes.resize(bytes.len() + 100, 0); // padded to a page on disk
        let mut back = RecentBatches::new(8);
        assert_eq!(back.restore(&bytes, LogPos(250)), 3, "the batch at 300 is past a cut at 250");
        assert_eq!(back.find(&key(QueueId(1), 3, b"v")), Some(at(200)));
        assert_eq!(back.find(&key(QueueId(1), 4, b"v")), None);
        bytes[9] ^= 1;
        assert_eq!(RecentBatches::new(8).restore(&bytes, LogPos(250)), 0, "a damaged file restores nothing");
        assert_eq!(RecentBatches::new(8).restore(&[1, 2, 3], LogPos(250)), 0);
    }
}
