//! The broker's internal storage queues (consumer offsets, delay levels,
//! the timer log, transactions): the one registry of their reserved ids, at
//! the top of the u32 range where topics never get one, and helpers to
//! create them, scan them, read one record and append one.

use ringmq_shards::batch::{self, BatchBuilder, BatchHeader};
use ringmq_shards::{FlushPolicy, QueueId, ReadWait, Record, Shard, StorageError};

/// Consumer offsets and the broker's own cursors.
pub const OFFSETS: QueueId = QueueId(u32::MAX - 1);
/// Number of delay levels.
pub const DELAY_LEVELS: u32 = 18;
/// The timer log: one stamped record per delayed message.
pub const TIMER_LOG: QueueId = QueueId(u32::MAX - 30);
/// Offsets of the timer log that were delivered (u64 LE values).
pub const TIMER_DONE: QueueId = QueueId(u32::MAX - 31);
/// Transactions' half messages, stamped with destination, group and store time.
pub const TX_HALF: QueueId = QueueId(u32::MAX - 32);
/// Transactions' decisions, checks and deliveries.
pub const TX_OP: QueueId = QueueId(u32::MAX - 33);

/// Shard 0's copies of the topic metadata, one record per change, so that
/// it replicates with the log to a broker group's followers.
pub const METADATA: QueueId = QueueId(u32::MAX - 34);

/// The starts of a shard's topic queues that retention or DeleteRecords
/// moved (core/queue_starts.rs), so that they replicate with the log.
pub const QUEUE_STARTS: QueueId = QueueId(u32::MAX - 35);

/// Kafka transactions in a shard's topic queues: opened, committed,
/// aborted (core/txn_marks.rs).
pub const TXN_MARKS: QueueId = QueueId(u32::MAX - 36);

/// The Kafka transaction coordinator's state, one record per change of a
/// transactional id (tx/coordinator.rs).
pub const TXN_STATE: QueueId = QueueId(u32::MAX - 37);

/// Compacted parts of queues moving here from another broker group, as
/// copied (core/part_imports.rs), so that they replicate with the log.
pub const PART_IMPORTS: QueueId = QueueId(u32::MAX - 38);

/// The storage queue of a delay level (1..=DELAY_LEVELS): `MAX - 3` down to `MAX - 20`.
pub fn delay_level(level: u32) -> QueueId {
    assert!((1..=DELAY_LEVELS).contains(&level), "delay level {level} outside 1..={DELAY_LEVELS}");
    QueueId(u32::MAX - 2 - level)
}

/// Creates the queues the shard lacks.
pub async fn ensure(storage: &Shard, queues: &[(QueueId, FlushPolicy)]) -> Result<(), StorageError> {
    let existing = storage.queues();
    let missing: Vec<_> = queues.iter().filter(|(q, _)| !existing.contains(q)).map(|&(q, p)| (q, Some(p))).collect();
    storage.create_queues(&missing).await
}

/// Appends one record of `key` and `value` to `queue` (durable as the queue's policy says).
pub async fn append_one(
    storage: &Shard,
    queue: QueueId,
    key: &[u8],
    value: &[u8],
    timestamp_ms: i64,
) -> Result<(), StorageError> {
    let mut b = BatchBuilder::new(timestamp_ms);
    b.push(&Record { key: Some(key), value: Some(value), ..Record::default() });
    storage.append(queue, &b.finish()).await.map(|_| ())
}

/// Appends keyed records (key, value; no value: a tombstone) to `queue` as
/// one batch (durable as the queue's policy says).
pub async fn append_keyed(
    storage: &Shard,
    queue: QueueId,
    records: &[(&[u8], Option<&[u8]>)],
) -> Result<(), StorageError> {
    let mut b = BatchBuilder::new(0);
    for &(key, value) in records {
        b.push(&Record { key: Some(key), value, ..Record::default() });
    }
    storage.append(queue, &b.finish()).await.map(|_| ())
}

/// Calls `each(offset, record)` for every record of `queue` from `from`.
pub async fn scan(
    storage: &Shard,
    queue: QueueId,
    from: u64,
    mut each: impl FnMut(u64, &Record<'_>),
) -> Result<(), StorageError> {
    let (start, end) = storage.offsets(queue)?;
    let mut next = from.max(start);
    while next < end {
        let read = storage.read(queue, next, 1 << 20, ReadWait::No).await?;
        for_each_record(&read.bytes, |offset, r| {
            if offset >= next {
                each(offset, r);
            }
        });
        if read.next_offset <= next {
            break;
        }
        next = read.next_offset;
    }
    Ok(())
}

/// Applies `f` to the record at `offset` of `queue`; None if there is none.
pub async fn with_record<T>(
    storage: &Shard,
    queue: QueueId,
    offset: u64,
    f: impl FnOnce(&Record<'_>) -> T,
) -> Result<Option<T>, StorageError> {
    let read = storage.read(queue, offset, 1, ReadWait::No).await?;
    let mut f = Some(f);
    let mut out = None;
    for_each_record(&read.bytes, |o, r| {
        if o == offset {
            out = f.take().map(|f| f(r));
        }
    });
    Ok(out)
}

/// Calls `each(offset, record)` for every record of the stored batches `batches`.
pub fn for_each_record(batches: &[u8], mut each: impl FnMut(u64, &Record<'_>)) {
    for b in batch::split(batches) {
        let Some(h) = BatchHeader::decode(b).filter(|h| !h.is_padding()) else { continue };
        let mut inflated = Vec::new();
        let Ok(records) = batch::records(b, &mut inflated) else { break };
        for (k, r) in records.enumerate() {
            let Ok(r) = r else { break };
            each(h.base_offset + k as u64, &r);
        }
    }
}
