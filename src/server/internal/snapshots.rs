//! Snapshots of a keyed internal queue (consumer offsets, Kafka transaction
//! state): every current value appended again now and then, so that
//! retention, which deletes whole old segments, never takes the newest
//! record of a key. What the queue still needs starts where the older of the
//! last two snapshots began: a change stored just before a snapshot began,
//! but not yet in memory when it was taken, lies after the snapshot before
//! it and is in the next.

use super::queues;
use ringmq_shards::{QueueId, Shard, StorageError};
use std::cell::Cell;

/// Records per batch of a snapshot.
const PER_BATCH: usize = 1000;

/// Where the last two snapshots of one queue began.
pub struct Snapshots {
    queue: QueueId,
    from: Cell<[Option<u64>; 2]>,
}

impl Snapshots {
    pub fn new(queue: QueueId) -> Snapshots {
        Snapshots { queue, from: Cell::default() }
    }

    /// Appends every (key, value) in batches and notes where they began.
    pub async fn take(&self, storage: &Shard, current: &[(Vec<u8>, Vec<u8>)]) -> Result<(), StorageError> {
        let from = storage.offsets(self.queue)?.1;
        for chunk in current.chunks(PER_BATCH) {
            let records: Vec<(&[u8], Option<&[u8]>)> = chunk.iter().map(|(k, v)| (&k[..], Some(&v[..]))).collect();
            queues::append_keyed(storage, self.queue, &records).await?;
        }
        let [_, newer] = self.from.get();
        self.from.set([newer, Some(from)]);
        Ok(())
    }

    /// The oldest record of the queue still needed: (queue, offset).
    pub fn needed(&self) -> (QueueId, u64) {
        (self.queue, self.from.get()[0].unwrap_or(0))
    }
}
