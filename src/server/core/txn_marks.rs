//! Kafka transactions in this shard's topic queues (KIP-98): which
//! producers have a transaction open in a queue and from which offset (the
//! lowest is the queue's last stable offset: read_committed readers stop
//! there), and which ended aborted (their records are dropped by
//! read_committed readers, and never reach a native one). A transaction
//! ends with a marker, a Kafka control batch written into the queue.
//!
//! Every change is a record of the internal queue `TXN_MARKS`, replayed at
//! open, so it replicates with the log and a promoted follower knows it. A
//! transaction's open record is placed in the log before its first batch
//! and its end record before its marker, in the same flush rounds, so a
//! crash never leaves a batch without its open record; a marker lost with
//! its end record kept is written again when the coordinator repeats it
//! (a second marker is harmless to readers). Every few minutes what is
//! still current is appended again (`snapshot`), so retention keeps it.

use crate::server::internal::queues::{self, TXN_MARKS};
use crate::server::internal::snapshots::Snapshots;
use ringmq_shards::batch;
use ringmq_shards::kafka::{self, KafkaBatch, Marker};
use ringmq_shards::{FlushPolicy, QueueId, Shard, Signal, StorageError};
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

/// A transaction that ended aborted in a queue: its producer and the
/// offsets from its first record (or below it) to its marker (or below it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Aborted {
    pub producer_id: i64,
    pub first: u64,
    pub last: u64,
}

#[derive(Default)]
struct QueueTxns {
    /// Producer id -> the queue's end when its transaction's first batch came.
    open: BTreeMap<i64, u64>,
    /// Ended aborted, oldest first.
    aborted: Vec<Aborted>,
    /// A marker was written: readers that skip markers look at every batch.
    marked: bool,
}

/// One change, as a record of `TXN_MARKS`. An end names the epoch its
/// marker carries: older epochs of the producer are fenced in this shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Change {
    Open { queue: u32, producer_id: i64, first: u64 },
    Committed { queue: u32, producer_id: i64, epoch: i16 },
    Aborted { queue: u32, aborted: Aborted, epoch: i16 },
}

const CHANGE_BYTES: usize = 31;

impl Change {
    fn encode(&self) -> [u8; CHANGE_BYTES] {
        let (kind, queue, producer_id, first, last, epoch) = match *self {
            Change::Open { queue, producer_id, first } => (0u8, queue, producer_id, first, 0, -1),
            Change::Committed { queue, producer_id, epoch } => (1, queue, producer_id, 0, 0, epoch),
            Change::Aborted { queue, aborted: a, epoch } => (2, queue, a.producer_id, a.first, a.last, epoch),
        };
        let mut out = [0u8; CHANGE_BYTES];
        out[0] = kind;
        out[1..5].copy_from_slice(&queue.to_le_bytes());
        out[5..13].copy_from_slice(&producer_id.to_le_bytes());
        out[13..21].copy_from_slice(&first.to_le_bytes());
        out[21..29].copy_from_slice(&last.to_le_bytes());
        out[29..31].copy_from_slice(&epoch.to_le_bytes());
        out
    }

    fn decode(b: &[u8]) -> Option<Change> {
        let b: &[u8; CHANGE_BYTES] = b.try_into().ok()?;
        let queue = u32::from_le_bytes(b[1..5].try_into().ok()?);
        let producer_id = i64::from_le_bytes(b[5..13].try_into().ok()?);
        let first = u64::from_le_bytes(b[13..21].try_into().ok()?);
        let last = u64::from_le_bytes(b[21..29].try_into().ok()?);
        let epoch = i16::from_le_bytes(b[29..31].try_into().ok()?);
        match b[0] {
            0 => Some(Change::Open { queue, producer_id, first }),
            1 => Some(Change::Committed { queue, producer_id, epoch }),
            2 => Some(Change::Aborted { queue, aborted: Aborted { producer_id, first, last }, epoch }),
            _ => None,
        }
    }
}

/// The Kafka transactions of this shard's queues.
pub struct TxnMarks {
    queues: RefCell<HashMap<u32, QueueTxns>>,
    /// Each producer's epoch in its newest marker here.
    epochs: RefCell<HashMap<i64, i16>>,
    /// Told when a transaction ends (a read_committed reader held at the
    /// last stable offset reads again).
    ended: Signal,
    snapshots: Snapshots,
}

impl TxnMarks {
    /// Creates the internal queue if needed and replays it.
    pub async fn open(storage: &Shard) -> Result<TxnMarks, StorageError> {
        queues::ensure(storage, &[(TXN_MARKS, FlushPolicy::Sync)]).await?;
        let marks = TxnMarks {
            queues: RefCell::default(),
            epochs: RefCell::default(),
            ended: Signal::default(),
            snapshots: Snapshots::new(TXN_MARKS),
        };
        queues::scan(storage, TXN_MARKS, 0, |_, r| {
            if let Some(change) = r.value.and_then(Change::decode) {
                marks.apply(change);
            }
        })
        .await?;
        Ok(marks)
    }

    fn apply(&self, change: Change) {
        let mut queues = self.queues.borrow_mut();
        match change {
            Change::Open { queue, producer_id, first } => {
                queues.entry(queue).or_default().open.entry(producer_id).or_insert(first);
            }
            Change::Committed { queue, producer_id, epoch } => {
                self.note_epoch(producer_id, epoch);
                let q = queues.entry(queue).or_default();
                q.open.remove(&producer_id);
                q.marked = true;
            }
            Change::Aborted { queue, aborted, epoch } => {
                self.note_epoch(aborted.producer_id, epoch);
                let q = queues.entry(queue).or_default();
                q.marked = true;
                q.open.remove(&aborted.producer_id);
                if !q.aborted.contains(&aborted) {
                    q.aborted.push(aborted);
                }
            }
        }
    }

    fn note_epoch(&self, producer_id: i64, epoch: i16) {
        if producer_id < 0 {
            return;
        }
        let mut epochs = self.epochs.borrow_mut();
        let e = epochs.entry(producer_id).or_insert(epoch);
        *e = (*e).max(epoch);
    }

    /// The epoch of the producer's newest marker in this shard: a
    /// transactional batch of an older epoch comes from a fenced producer.
    pub fn fenced_below(&self, producer_id: i64) -> Option<i16> {
        self.epochs.borrow().get(&producer_id).copied()
    }

    /// Whether the producer has a transaction open in the queue.
    pub fn is_open(&self, queue: QueueId, producer_id: i64) -> bool {
        self.queues.borrow().get(&queue.0).is_some_and(|q| q.open.contains_key(&producer_id))
    }

    /// Notes a transactional batch of `producer_id` about to be appended to
    /// `queue`: the first of its transaction there opens it (from the
    /// queue's end now). Call it before the batch's append and await both
    /// together: its record is placed first, so the two share a flush round.
    pub async fn begin(&self, storage: &Shard, queue: QueueId, producer_id: i64) -> Result<(), StorageError> {
        if self.is_open(queue, producer_id) {
            return Ok(());
        }
        let first = storage.offsets(queue)?.1;
        let change = Change::Open { queue: queue.0, producer_id, first };
        self.apply(change);
        queues::append_one(storage, TXN_MARKS, &[], &change.encode(), 0).await
    }

    /// Notes a batch copied into `queue` at its own offset (a queue moving
    /// here): a transactional batch opens its producer's transaction, a
    /// marker ends it, as they did where it was copied from. Call it before
    /// the batch's append: a crash between leaves a note the copy's retry
    /// makes again, harmlessly.
    pub async fn note_copied(&self, storage: &Shard, queue: QueueId, stored: &[u8]) -> Result<(), StorageError> {
        let Some(kafka) = batch::kafka_bytes(stored).and_then(|k| KafkaBatch::stored(k).ok()) else { return Ok(()) };
        if !kafka.is_transactional() {
            return Ok(());
        }
        let base = batch::BatchHeader::decode(stored).map_or(0, |h| h.base_offset);
        let producer_id = kafka.producer_id();
        let change = match kafka.marker() {
            None if self.is_open(queue, producer_id) => return Ok(()),
            None => Change::Open { queue: queue.0, producer_id, first: base },
            Some(marker) if marker.commit => {
                Change::Committed { queue: queue.0, producer_id, epoch: marker.producer_epoch }
            }
            Some(marker) => {
                let first = self.queues.borrow().get(&queue.0).and_then(|q| q.open.get(&producer_id).copied());
                let aborted = Aborted { producer_id, first: first.unwrap_or(base), last: base };
                Change::Aborted { queue: queue.0, aborted, epoch: marker.producer_epoch }
            }
        };
        queues::append_one(storage, TXN_MARKS, &[], &change.encode(), 0).await?;
        self.apply(change);
        if kafka.is_control() {
            self.ended.notify();
        }
        Ok(())
    }

    /// Ends `marker.producer_id`'s transaction in `queue`: its end record
    /// and its marker appended, then (once both are durable) the queue's
    /// last stable offset moves past it. Written whether or not the
    /// transaction is open here (the coordinator may repeat a marker after a
    /// crash, or name a queue the producer never wrote). Returns the
    /// marker's offset and the log end the caller waits replication for.
    pub async fn end(
        &self,
        storage: &Shard,
        queue: QueueId,
        marker: Marker,
        now_ms: i64,
    ) -> Result<(u64, u64), StorageError> {
        let end = storage.offsets(queue)?.1;
        let first = self.queues.borrow().get(&queue.0).and_then(|q| q.open.get(&marker.producer_id).copied());
        let epoch = marker.producer_epoch;
        let change = match marker.commit {
            true => Change::Committed { queue: queue.0, producer_id: marker.producer_id, epoch },
            false => {
                let aborted = Aborted { producer_id: marker.producer_id, first: first.unwrap_or(end), last: end };
                Change::Aborted { queue: queue.0, aborted, epoch }
            }
        };
        let mut control = Vec::new();
        kafka::encode_control(&mut control, 0, now_ms, marker);
        let parsed = KafkaBatch::parse(&control).expect("a marker the broker encoded parses");
        let wrapped = batch::wrap_kafka(&parsed, [0; 16]);
        let encoded = change.encode();
        let (noted, appended) = futures_util::future::join(
            queues::append_one(storage, TXN_MARKS, &[], &encoded, 0),
            storage.append(queue, &wrapped),
        )
        .await;
        noted?;
        let appended = appended?;
        self.apply(change);
        self.ended.notify();
        Ok((appended.base_offset, appended.position.0 + wrapped.len() as u64))
    }

    /// Waits until a transaction of this shard ends, or `limit` passes.
    pub async fn wait_ended(&self, limit: Duration) {
        self.ended.wait_for(limit).await;
    }

    /// The queue's last stable offset: the first offset of its oldest open
    /// transaction, or `end` when none is open.
    pub fn last_stable(&self, queue: QueueId, end: u64) -> u64 {
        let queues = self.queues.borrow();
        let oldest = queues.get(&queue.0).and_then(|q| q.open.values().min().copied());
        oldest.map_or(end, |first| first.min(end))
    }

    /// Whether the queue holds a marker or an open transaction (its reads
    /// need the committed view).
    pub fn touched(&self, queue: QueueId) -> bool {
        self.queues.borrow().get(&queue.0).is_some_and(|q| q.marked || !q.open.is_empty())
    }

    /// The aborted transactions whose records may lie in [from, to), oldest first.
    pub fn aborted_between(&self, queue: QueueId, from: u64, to: u64) -> Vec<Aborted> {
        let queues = self.queues.borrow();
        let Some(q) = queues.get(&queue.0) else { return Vec::new() };
        q.aborted.iter().filter(|a| a.last >= from && a.first < to).copied().collect()
    }

    /// The producers with a transaction open in the queue, with its first offset.
    pub fn open_in(&self, queue: QueueId) -> Vec<(i64, u64)> {
        let queues = self.queues.borrow();
        queues.get(&queue.0).map_or_else(Vec::new, |q| q.open.iter().map(|(p, f)| (*p, *f)).collect())
    }

    /// Appends what is still current again: open transactions, and aborted
    /// ones whose records a queue may still hold (`starts`: each queue's
    /// start; those below it are forgotten).
    pub async fn snapshot(&self, storage: &Shard, starts: &HashMap<u32, u64>) -> Result<(), StorageError> {
        let mut current = Vec::new();
        {
            let mut queues = self.queues.borrow_mut();
            queues.retain(|queue, q| starts.contains_key(queue) || !q.open.is_empty());
            for (&queue, q) in queues.iter_mut() {
                let start = starts.get(&queue).copied().unwrap_or(0);
                q.aborted.retain(|a| a.last >= start);
                for (&producer_id, &first) in &q.open {
                    current.push(Change::Open { queue, producer_id, first });
                }
                if q.marked {
                    // No producer's: it keeps the queue marked.
                    current.push(Change::Committed { queue, producer_id: -1, epoch: -1 });
                }
                // The epoch goes with an aborted one; a committed one's is kept below.
                let epoch = |a: &Aborted| self.epochs.borrow().get(&a.producer_id).copied().unwrap_or(-1);
                current.extend(q.aborted.iter().map(|&aborted| Change::Aborted {
                    queue,
                    aborted,
                    epoch: epoch(&aborted),
                }));
            }
        }
        // Every producer's newest epoch, as a commit with nothing open (queue u32::MAX holds none).
        for (&producer_id, &epoch) in self.epochs.borrow().iter() {
            current.push(Change::Committed { queue: u32::MAX, producer_id, epoch });
        }
        let records: Vec<(Vec<u8>, Vec<u8>)> = current.iter().map(|c| (Vec::new(), c.encode().to_vec())).collect();
        self.snapshots.take(storage, &records).await
    }

    /// The oldest record of `TXN_MARKS` still needed: (queue, offset).
    pub fn needed(&self) -> (QueueId, u64) {
        self.snapshots.needed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringmq_shards::batch::BatchBuilder;
    use ringmq_shards::{Record, ShardConfig};

    fn marker(producer_id: i64, commit: bool) -> Marker {
        Marker { producer_id, producer_epoch: 0, commit, coordinator_epoch: 0 }
    }

    #[test]
    fn changes_round_trip() {
        let a = Aborted { producer_id: -5, first: 7, last: u64::MAX };
        for c in [
            Change::Open { queue: 3, producer_id: 9, first: 11 },
            Change::Committed { queue: u32::MAX, producer_id: i64::MAX, epoch: 7 },
            Change::Aborted { queue: 0, aborted: a, epoch: -1 },
        ] {
            assert_eq!(Change::decode(&c.encode()), Some(c));
        }
        assert_eq!(Change::decode(&[7; CHANGE_BYTES]), None, "an unknown kind");
    }

    #[test]
    fn open_transactions_hold_the_last_stable_offset_and_aborted_ones_are_replayed() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().to_path_buf();
        glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
            .spawn(move || async move {
                let storage = Shard::open(ShardConfig::small(&p)).await.unwrap();
                let q = QueueId(4);
                storage.create_queues(&[(q, None)]).await.unwrap();
                let one = || {
                    let mut b = BatchBuilder::new(0);
                    b.push(&Record { value: Some(b"v"), ..Record::default() });
                    b.finish()
                };
                let marks = TxnMarks::open(&storage).await.unwrap();
                storage.append(q, &one()).await.unwrap();
                let (a, b) = futures_util::future::join(marks.begin(&storage, q, 70), storage.append(q, &one())).await;
                a.unwrap();
                b.unwrap();
                marks.begin(&storage, q, 80).await.unwrap();
                storage.append(q, &one()).await.unwrap();
                assert_eq!(marks.last_stable(q, 3), 1, "the oldest open transaction starts at 1");
                let (marker_at, _) = marks.end(&storage, q, marker(70, false), 5).await.unwrap();
                assert_eq!(marker_at, 3);
                assert_eq!(marks.last_stable(q, 4), 2, "producer 80's is still open");
                assert_eq!(marks.aborted_between(q, 0, 4), [Aborted { producer_id: 70, first: 1, last: 3 }]);
                assert_eq!(marks.aborted_between(q, 4, 9), []);
                marks.end(&storage, q, marker(80, true), 5).await.unwrap();
                assert_eq!(marks.last_stable(q, 5), 5);
                let replayed = TxnMarks::open(&storage).await.unwrap();
                assert_eq!((replayed.last_stable(q, 5), replayed.aborted_between(q, 0, 5).len()), (5, 1));
                marks.snapshot(&storage, &HashMap::from([(q.0, 4)])).await.unwrap();
                assert!(marks.aborted_between(q, 0, 9).is_empty(), "below the queue's start: forgotten");
                storage.close().await.unwrap();
            })
            .unwrap()
            .join()
            .unwrap();
    }
}
