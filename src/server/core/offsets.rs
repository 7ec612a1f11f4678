//! Consumer group offsets (and the broker's own cursors), stored durably by
//! the group's coordinator shard: each commit is a record appended to an
//! internal storage queue, replayed into memory at start. Every few minutes
//! all current values are appended again, so retention, which deletes old
//! segments, never takes the last value of a key (a compacted topic's job
//! in Kafka).

use crate::server::internal::queues::{self, OFFSETS};
use ringmq_shards::batch::BatchBuilder;
use ringmq_shards::{Record, Shard, StorageError};
use std::cell::RefCell;
use std::collections::HashMap;

type Key = (String, String, u32);

/// The broker's own cursors are stored as groups whose names start so
/// (`%timer`, `%schedule`, `%tx`): listings of consumer groups leave them out.
pub const CURSOR_PREFIX: char = '%';

/// Committed offsets of the queues this shard owns.
pub struct Offsets {
    committed: RefCell<HashMap<Key, u64>>,
}

impl Offsets {
    /// Creates the internal queue if needed and replays every commit in it.
    pub async fn open(storage: &Shard) -> Result<Offsets, StorageError> {
        queues::ensure(storage, &[(OFFSETS, ringmq_shards::FlushPolicy::Sync)]).await?;
        let mut committed = HashMap::new();
        queues::scan(storage, OFFSETS, 0, |_, record| {
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
        let key = encode_key(group, topic, queue);
        queues::append_one(storage, OFFSETS, key.as_bytes(), &offset.to_le_bytes(), 0).await?;
        self.committed.borrow_mut().insert((group.to_string(), topic.to_string(), queue), offset);
        Ok(())
    }

    /// Appends every current value again (in batches), so that the newest
    /// value of each key is always in recent segments.
    pub async fn snapshot(&self, storage: &Shard) -> Result<usize, StorageError> {
        let all: Vec<(Key, u64)> = self.committed.borrow().iter().map(|(k, v)| (k.clone(), *v)).collect();
        for chunk in all.chunks(1000) {
            let mut b = BatchBuilder::new(0);
            let encoded: Vec<(String, [u8; 8])> =
                chunk.iter().map(|((g, t, q), v)| (encode_key(g, t, *q), v.to_le_bytes())).collect();
            for (key, value) in &encoded {
                b.push(&Record { key: key.as_bytes(), value, ..Record::default() });
            }
            storage.append(OFFSETS, &b.finish()).await?;
        }
        Ok(all.len())
    }

    /// Every consumer group's committed offset this shard stores (the
    /// broker's own cursors left out): (group, topic, queue) and offset.
    pub fn consumers(&self) -> Vec<((String, String, u32), u64)> {
        let committed = self.committed.borrow();
        let consumers = committed.iter().filter(|((group, _, _), _)| !group.starts_with(CURSOR_PREFIX));
        consumers.map(|(k, v)| (k.clone(), *v)).collect()
    }

    /// The group's committed offset of the queue, if any.
    pub fn get(&self, group: &str, topic: &str, queue: u32) -> Option<u64> {
        self.committed.borrow().get(&(group.to_string(), topic.to_string(), queue)).copied()
    }
}

fn encode_key(group: &str, topic: &str, queue: u32) -> String {
    format!("{group}\0{topic}\0{queue}")
}

fn decode_key(key: &[u8]) -> Option<Key> {
    let text = std::str::from_utf8(key).ok()?;
    let mut parts = text.split('\0');
    let (group, topic, queue) = (parts.next()?, parts.next()?, parts.next()?.parse().ok()?);
    Some((group.to_string(), topic.to_string(), queue))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringmq_shards::ShardConfig;

    #[test]
    fn a_snapshot_repeats_every_current_value_and_replays_to_the_same_offsets() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().to_path_buf();
        glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
            .spawn(move || async move {
                let storage = Shard::open(ShardConfig::small(&p)).await.unwrap();
                let offsets = Offsets::open(&storage).await.unwrap();
                for (q, o) in [(0, 5), (1, 7), (0, 9)] {
                    offsets.commit(&storage, "g", "t", q, o).await.unwrap();
                }
                assert_eq!(offsets.snapshot(&storage).await.unwrap(), 2, "one record per key");
                assert_eq!(storage.offsets(OFFSETS).unwrap().1, 5, "3 commits + 2 snapshot records");
                let replayed = Offsets::open(&storage).await.unwrap();
                assert_eq!((replayed.get("g", "t", 0), replayed.get("g", "t", 1)), (Some(9), Some(7)));
                storage.close().await.unwrap();
            })
            .unwrap()
            .join()
            .unwrap();
    }
}
