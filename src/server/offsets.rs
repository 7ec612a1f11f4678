//! Consumer group offsets, stored durably by the shard that owns the queue:
//! each commit is a record appended to an internal storage queue of that
//! shard, replayed into memory at start.

use super::internal_queue;
use ringmq_shards::batch::BatchBuilder;
use ringmq_shards::{QueueId, Record, Shard, StorageError};
use std::cell::RefCell;
use std::collections::HashMap;

/// The storage queue that holds a shard's offset commits.
pub const OFFSETS_QUEUE: QueueId = QueueId(u32::MAX - 1);

type Key = (String, String, u32);

/// Committed offsets of the queues this shard owns.
pub struct Offsets {
    committed: RefCell<HashMap<Key, u64>>,
}

impl Offsets {
    /// Creates the internal queue if needed and replays every commit in it.
    pub async fn open(storage: &Shard) -> Result<Offsets, StorageError> {
        internal_queue::ensure(storage, &[(OFFSETS_QUEUE, ringmq_shards::FlushPolicy::Sync)]).await?;
        let mut committed = HashMap::new();
        internal_queue::scan(storage, OFFSETS_QUEUE, 0, |_, record| {
            if let (Some(key), Ok(value)) = (decode_key(record.key), <[u8; 8]>::try_from(record.value)) {
                committed.insert(key, u64::from_le_bytes(value));
            }
        })
        .await?;
        Ok(Offsets { committed: RefCell::new(committed) })
    }

    /// Durably records `offset` as the group's position in the queue.
    pub async fn commit(
        &self,
        storage: &Shard,
        group: &str,
        topic: &str,
        queue: u32,
        offset: u64,
    ) -> Result<(), StorageError> {
        let key = format!("{group}\0{topic}\0{queue}");
        let value = offset.to_le_bytes();
        let mut b = BatchBuilder::new(0);
        b.push(&Record { key: key.as_bytes(), value: &value, ..Record::default() });
        storage.append(OFFSETS_QUEUE, &b.finish()).await?;
        self.committed.borrow_mut().insert((group.to_string(), topic.to_string(), queue), offset);
        Ok(())
    }

    /// The group's committed offset of the queue, if any.
    pub fn get(&self, group: &str, topic: &str, queue: u32) -> Option<u64> {
        self.committed.borrow().get(&(group.to_string(), topic.to_string(), queue)).copied()
    }
}

fn decode_key(key: &[u8]) -> Option<Key> {
    let text = std::str::from_utf8(key).ok()?;
    let mut parts = text.split('\0');
    let (group, topic, queue) = (parts.next()?, parts.next()?, parts.next()?.parse().ok()?);
    Some((group.to_string(), topic.to_string(), queue))
}
