//! Helpers for the broker's internal storage queues (offsets, delay levels,
//! the timer log, transactions): create them, scan them, read one record,
//! and keep retention from deleting what they still need.

use super::shard_server::ShardCtx;
use super::{schedule, timer, transactions};
use ringmq_shards::batch::{self, BatchBuilder, BatchHeader};
use ringmq_shards::record::RecordIter;
use ringmq_shards::{FlushPolicy, QueueId, ReadWait, Record, Shard, StorageError};
use std::rc::Rc;
use std::time::Duration;

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
    b.push(&Record { key, value, ..Record::default() });
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

fn for_each_record(batches: &[u8], mut each: impl FnMut(u64, &Record<'_>)) {
    for b in batch::split(batches) {
        let Some(h) = BatchHeader::decode(b).filter(|h| !h.is_padding()) else { continue };
        for (k, r) in RecordIter::new(&b[batch::HEADER_BYTES..]).enumerate() {
            let Ok(r) = r else { break };
            each(h.base_offset + k as u64, &r);
        }
    }
}

/// Once a second, sets the shard's retention floor at the oldest record the
/// internal queues still need: the first undelivered timer, the first
/// unfinished transaction and each delay level's first undelivered retry.
pub fn spawn_retention_floor(ctx: &Rc<ShardCtx>) -> glommio::task::JoinHandle<()> {
    let ctx = ctx.clone();
    glommio::spawn_local(async move {
        loop {
            glommio::timer::sleep(Duration::from_secs(1)).await;
            match retention_floor(&ctx).await {
                Ok(floor) => ctx.storage.keep_from(floor),
                Err(error) => tracing::warn!(shard = ctx.id, %error, "computing the retention floor failed"),
            }
        }
    })
    .detach()
}

async fn retention_floor(ctx: &ShardCtx) -> Result<u64, StorageError> {
    let mut needed = vec![(timer::TIMER_LOG, ctx.timer.cursor()), (transactions::TX_HALF, ctx.transactions.cursor())];
    needed.extend((1..=schedule::LEVELS).map(|l| (schedule::level_queue(l), schedule::cursor(&ctx.offsets, l))));
    let mut floor = u64::MAX;
    for (queue, cursor) in needed {
        let (start, end) = ctx.storage.offsets(queue)?;
        if cursor < end {
            floor = floor.min(ctx.storage.entry(queue, cursor.max(start)).await?.position.0);
        }
    }
    Ok(floor)
}
