//! Consumer group offsets (and the broker's own cursors), stored durably by
//! the group's coordinator shard: each commit is a record appended to an
//! internal storage queue (its value the offset, u64 little-endian, then the
//! commit's metadata string, as a Kafka client gave it; a record of 8 bytes
//! has none; no value, a tombstone, deletes it), replayed into memory at
//! start. Every few minutes
//! all current values are appended again, so retention, which deletes old
//! segments, never takes the last value of a key (a compacted topic's job
//! in Kafka).

use crate::server::internal::queues::{self, OFFSETS};
use ringmq_shards::batch::BatchBuilder;
use ringmq_shards::{QueueId, Record, Shard, StorageError};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;

type Key = (String, String, u32);

/// The broker's own cursors are stored as groups whose names start so
/// (`%timer`, `%schedule`, `%tx`): listings of consumer groups leave them out.
pub const CURSOR_PREFIX: char = '%';

/// A committed position: the offset, and the metadata the committer gave
/// with it ("" for none; Kafka clients keep checkpoints in it).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Committed {
    pub offset: u64,
    pub metadata: String,
}

impl Committed {
    /// An offset without metadata.
    pub fn at(offset: u64) -> Committed {
        Committed { offset, metadata: String::new() }
    }

    fn encode(&self) -> Vec<u8> {
        let mut value = self.offset.to_le_bytes().to_vec();
        value.extend_from_slice(self.metadata.as_bytes());
        value
    }

    fn decode(value: &[u8]) -> Option<Committed> {
        let (offset, metadata) = value.split_first_chunk::<8>()?;
        let metadata = std::str::from_utf8(metadata).ok()?.to_string();
        Some(Committed { offset: u64::from_le_bytes(*offset), metadata })
    }
}

/// Committed offsets of the queues this shard owns.
pub struct Offsets {
    committed: RefCell<HashMap<Key, Committed>>,
    /// Where in the internal queue the last two snapshots began (None: not
    /// made yet). Every value is at or after the older one: a commit whose
    /// record was stored just before a snapshot began, but not yet in memory,
    /// lies after the snapshot before it and is in the next.
    snapshots_from: Cell<[Option<u64>; 2]>,
}

impl Offsets {
    /// Creates the internal queue if needed and replays every commit in it.
    pub async fn open(storage: &Shard) -> Result<Offsets, StorageError> {
        queues::ensure(storage, &[(OFFSETS, ringmq_shards::FlushPolicy::Sync)]).await?;
        let mut committed = HashMap::new();
        queues::scan(storage, OFFSETS, 0, |_, record| {
            let Some(key) = decode_key(record.key.unwrap_or_default()) else { return };
            match record.value.map(Committed::decode) {
                Some(Some(value)) => committed.insert(key, value),
                Some(None) => None,
                None => committed.remove(&key),
            };
        })
        .await?;
        Ok(Offsets { committed: RefCell::new(committed), snapshots_from: Cell::default() })
    }

    /// Durably records `committed` as the group's position in the queue.
    pub async fn commit(
        &self,
        storage: &Shard,
        group: &str,
        topic: &str,
        queue: u32,
        committed: Committed,
    ) -> Result<(), StorageError> {
        let key = encode_key(group, topic, queue);
        queues::append_one(storage, OFFSETS, key.as_bytes(), &committed.encode(), 0).await?;
        self.committed.borrow_mut().insert((group.to_string(), topic.to_string(), queue), committed);
        Ok(())
    }

    /// Durably deletes the group's committed positions in `queues`
    /// (topic, queue): one tombstone each, in one batch.
    pub async fn delete(&self, storage: &Shard, group: &str, queues: &[(String, u32)]) -> Result<(), StorageError> {
        if queues.is_empty() {
            return Ok(());
        }
        let keys: Vec<String> = queues.iter().map(|(t, q)| encode_key(group, t, *q)).collect();
        let mut b = BatchBuilder::new(0);
        for key in &keys {
            b.push(&Record { key: Some(key.as_bytes()), value: None, ..Record::default() });
        }
        storage.append(OFFSETS, &b.finish()).await?;
        let mut committed = self.committed.borrow_mut();
        for (topic, queue) in queues {
            committed.remove(&(group.to_string(), topic.clone(), *queue));
        }
        Ok(())
    }

    /// The queues (topic, queue) the group has committed positions in.
    pub fn queues_of(&self, group: &str) -> Vec<(String, u32)> {
        let committed = self.committed.borrow();
        committed.keys().filter(|(g, _, _)| g == group).map(|(_, t, q)| (t.clone(), *q)).collect()
    }

    /// Appends every current value again (in batches), so that the newest
    /// value of each key is always in recent segments.
    pub async fn snapshot(&self, storage: &Shard) -> Result<usize, StorageError> {
        let all: Vec<(Key, Vec<u8>)> = self.committed.borrow().iter().map(|(k, v)| (k.clone(), v.encode())).collect();
        let from = storage.offsets(OFFSETS)?.1;
        for chunk in all.chunks(1000) {
            let mut b = BatchBuilder::new(0);
            let encoded: Vec<(String, &Vec<u8>)> =
                chunk.iter().map(|((g, t, q), v)| (encode_key(g, t, *q), v)).collect();
            for (key, value) in &encoded {
                b.push(&Record { key: Some(key.as_bytes()), value: Some(value), ..Record::default() });
            }
            storage.append(OFFSETS, &b.finish()).await?;
        }
        let [_, newer] = self.snapshots_from.get();
        self.snapshots_from.set([newer, Some(from)]);
        Ok(all.len())
    }

    /// The oldest record of the internal queue still needed: (queue, offset).
    pub fn needed(&self) -> (QueueId, u64) {
        (OFFSETS, self.snapshots_from.get()[0].unwrap_or(0))
    }

    /// Every consumer group's committed offset this shard stores (the
    /// broker's own cursors left out): (group, topic, queue) and offset.
    pub fn consumers(&self) -> Vec<((String, String, u32), u64)> {
        let committed = self.committed.borrow();
        let consumers = committed.iter().filter(|((group, _, _), _)| !group.starts_with(CURSOR_PREFIX));
        consumers.map(|(k, v)| (k.clone(), v.offset)).collect()
    }

    /// The group's committed position in the queue, if any.
    pub fn get(&self, group: &str, topic: &str, queue: u32) -> Option<Committed> {
        self.committed.borrow().get(&(group.to_string(), topic.to_string(), queue)).cloned()
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
                    offsets.commit(&storage, "g", "t", q, Committed::at(o)).await.unwrap();
                }
                let checkpoint = Committed { offset: 3, metadata: "checkpoint-1".into() };
                offsets.commit(&storage, "g", "t", 2, checkpoint.clone()).await.unwrap();
                assert_eq!(offsets.snapshot(&storage).await.unwrap(), 3, "one record per key");
                assert_eq!(storage.offsets(OFFSETS).unwrap().1, 7, "4 commits + 3 snapshot records");
                let replayed = Offsets::open(&storage).await.unwrap();
                let at = |q| replayed.get("g", "t", q);
                assert_eq!((at(0), at(1), at(2)), (Some(Committed::at(9)), Some(Committed::at(7)), Some(checkpoint)));
                replayed.delete(&storage, "g", &[("t".into(), 1)]).await.unwrap();
                let again = Offsets::open(&storage).await.unwrap();
                assert_eq!((again.get("g", "t", 1), again.queues_of("g").len()), (None, 2), "a tombstone deletes");
                storage.close().await.unwrap();
            })
            .unwrap()
            .join()
            .unwrap();
    }
}
