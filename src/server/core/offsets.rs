//! Consumer group offsets (and the broker's own cursors), stored durably by
//! the group's coordinator shard: each commit is a record appended to an
//! internal storage queue (its value the offset, u64 little-endian, then the
//! commit's metadata string, as a Kafka client gave it; a record of 8 bytes
//! has none; no value, a tombstone, deletes it), replayed into memory at
//! start. Offsets a Kafka transaction commits (TxnOffsetCommit) are pending
//! under the producer's id until its transaction ends: its commit marker
//! makes them the group's, an abort drops them. Every few minutes all
//! current values are appended again, so retention, which deletes old
//! segments, never takes the last value of a key (a compacted topic's job
//! in Kafka).

use crate::server::internal::queues::{self, OFFSETS};
use crate::server::internal::snapshots::Snapshots;
use ringmq_shards::{QueueId, Shard, StorageError};
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};

type Key = (String, String, u32);

/// A transaction's pending offsets: (producer id, group) -> (topic, queue) -> position.
type Pending = HashMap<(i64, String), BTreeMap<(String, u32), Committed>>;

/// A pending offset's key starts with this byte (a group's never does: its
/// name is a client's string, and the broker's cursors start with '%').
const PENDING_MARK: char = '\u{1}';

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
    pending: RefCell<Pending>,
    snapshots: Snapshots,
}

impl Offsets {
    /// Creates the internal queue if needed and replays every commit in it.
    pub async fn open(storage: &Shard) -> Result<Offsets, StorageError> {
        queues::ensure(storage, &[(OFFSETS, ringmq_shards::FlushPolicy::Sync)]).await?;
        let (mut committed, mut pending) = (HashMap::new(), Pending::new());
        queues::scan(storage, OFFSETS, 0, |_, record| {
            let key = record.key.unwrap_or_default();
            let value = record.value.map(Committed::decode);
            if let Some(((producer, group), (topic, queue))) = decode_pending_key(key) {
                let offsets = pending.entry((producer, group)).or_default();
                match value {
                    Some(Some(value)) => offsets.insert((topic, queue), value),
                    Some(None) => None,
                    None => offsets.remove(&(topic, queue)),
                };
                return;
            }
            let Some(key) = decode_key(key) else { return };
            match value {
                Some(Some(value)) => committed.insert(key, value),
                Some(None) => None,
                None => committed.remove(&key),
            };
        })
        .await?;
        // Transactions that ended leave only tombstones.
        pending.retain(|_, offsets| !offsets.is_empty());
        Ok(Offsets {
            committed: RefCell::new(committed),
            pending: RefCell::new(pending),
            snapshots: Snapshots::new(OFFSETS),
        })
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
        let tombstones: Vec<(&[u8], Option<&[u8]>)> = keys.iter().map(|k| (k.as_bytes(), None)).collect();
        queues::append_keyed(storage, OFFSETS, &tombstones).await?;
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

    /// Durably records offsets a Kafka transaction of `producer` commits for
    /// `group`, pending until it ends (`end_pending`).
    pub async fn commit_pending(
        &self,
        storage: &Shard,
        producer: i64,
        group: &str,
        offsets: &[(String, u32, Committed)],
    ) -> Result<(), StorageError> {
        if offsets.is_empty() {
            return Ok(());
        }
        let keys: Vec<String> = offsets.iter().map(|(t, q, _)| encode_pending_key(producer, group, t, *q)).collect();
        let values: Vec<Vec<u8>> = offsets.iter().map(|(_, _, c)| c.encode()).collect();
        let records: Vec<(&[u8], Option<&[u8]>)> =
            keys.iter().zip(&values).map(|(k, v)| (k.as_bytes(), Some(&v[..]))).collect();
        queues::append_keyed(storage, OFFSETS, &records).await?;
        let mut pending = self.pending.borrow_mut();
        let mine = pending.entry((producer, group.to_string())).or_default();
        for (topic, queue, committed) in offsets {
            mine.insert((topic.clone(), *queue), committed.clone());
        }
        Ok(())
    }

    /// Ends `producer`'s transaction for `group`: on commit its pending
    /// offsets become the group's, on abort they are dropped (durably, in
    /// one batch: the commits and the pending records' tombstones). Returns
    /// how many there were; none is not an error (a marker written again).
    pub async fn end_pending(
        &self,
        storage: &Shard,
        producer: i64,
        group: &str,
        commit: bool,
    ) -> Result<usize, StorageError> {
        let key = (producer, group.to_string());
        let Some(offsets) = self.pending.borrow().get(&key).cloned() else { return Ok(0) };
        let mut records: Vec<(String, Option<Vec<u8>>)> = Vec::new();
        for ((topic, queue), committed) in &offsets {
            if commit {
                records.push((encode_key(group, topic, *queue), Some(committed.encode())));
            }
            records.push((encode_pending_key(producer, group, topic, *queue), None));
        }
        let records: Vec<(&[u8], Option<&[u8]>)> = records.iter().map(|(k, v)| (k.as_bytes(), v.as_deref())).collect();
        queues::append_keyed(storage, OFFSETS, &records).await?;
        self.pending.borrow_mut().remove(&key);
        if commit {
            let mut committed = self.committed.borrow_mut();
            for ((topic, queue), value) in &offsets {
                committed.insert((group.to_string(), topic.clone(), *queue), value.clone());
            }
        }
        Ok(offsets.len())
    }

    /// Whether a transaction holds offsets of the group's queue pending.
    pub fn is_pending(&self, group: &str, topic: &str, queue: u32) -> bool {
        let key = (topic.to_string(), queue);
        self.pending.borrow().iter().any(|((_, g), offsets)| g == group && offsets.contains_key(&key))
    }

    /// Appends every current value again (pending ones too), so that the
    /// newest value of each key is always in recent segments. Returns how many.
    pub async fn snapshot(&self, storage: &Shard) -> Result<usize, StorageError> {
        let mut all: Vec<(Vec<u8>, Vec<u8>)> = self
            .committed
            .borrow()
            .iter()
            .map(|((g, t, q), v)| (encode_key(g, t, *q).into_bytes(), v.encode()))
            .collect();
        for ((producer, group), offsets) in self.pending.borrow().iter() {
            for ((topic, queue), v) in offsets {
                all.push((encode_pending_key(*producer, group, topic, *queue).into_bytes(), v.encode()));
            }
        }
        self.snapshots.take(storage, &all).await?;
        Ok(all.len())
    }

    /// The oldest record of the internal queue still needed: (queue, offset).
    pub fn needed(&self) -> (QueueId, u64) {
        self.snapshots.needed()
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

fn encode_pending_key(producer: i64, group: &str, topic: &str, queue: u32) -> String {
    format!("{PENDING_MARK}{producer}\0{}", encode_key(group, topic, queue))
}

/// A pending offset's key: ((producer, group), (topic, queue)).
fn decode_pending_key(key: &[u8]) -> Option<((i64, String), (String, u32))> {
    let text = std::str::from_utf8(key).ok()?.strip_prefix(PENDING_MARK)?;
    let (producer, rest) = text.split_once('\0')?;
    let (group, topic, queue) = decode_key(rest.as_bytes())?;
    Some(((producer.parse().ok()?, group), (topic, queue)))
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
