//! Delayed messages of one shard, due at any time up to the broker's
//! `max_delay` (a delay level is turned into its due time on arrival).
//!
//! Durable: each message is appended, stamped with due time and
//! destination, to the shard's timer log (an internal storage queue, synced
//! before the producer is answered). In memory: a timing wheel of timer-log
//! offsets (16 bytes a message, O(1) per message) and a bitmap of delivered
//! offsets above the cursor. Every 10 ms the wheel gives what fell due; those
//! are handed over concurrently, their offsets appended to the done log
//! (asynchronous flush: a crash may deliver a message twice, never lose it)
//! and the cursor, below which everything was delivered, is committed once a
//! second. At start the wheel is rebuilt from the timer log above the cursor,
//! minus the done offsets; what fell due while the broker was down is
//! delivered at the first tick.

use super::handler::{self, Failure};
use super::internal_queue;
use super::offset_marks::Marks;
use super::offsets::Offsets;
use super::schedule::{self, Destination, Handover};
use super::shard_server::ShardCtx;
use super::timing_wheel::TimingWheel;
use crate::protocol::messages::ProduceDelayed;
use crate::protocol::ErrorCode;
use ringmq_shards::{FlushPolicy, QueueId, Record, Shard, StorageError};
use std::cell::RefCell;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// The timer log: one stamped record per delayed message.
pub const TIMER_LOG: QueueId = QueueId(u32::MAX - 30);
/// Offsets of the timer log that were delivered (u64 LE values).
pub const TIMER_DONE: QueueId = QueueId(u32::MAX - 31);
const CURSOR_GROUP: &str = "%timer";
const TICK_MS: u64 = 10;

/// One shard's delayed messages.
pub struct Timer {
    wheel: RefCell<TimingWheel<u64>>,
    delivered: RefCell<Marks>,
}

impl Timer {
    /// Every timer-log offset below it was delivered.
    pub fn cursor(&self) -> u64 {
        self.delivered.borrow().cursor
    }

    /// Creates the internal queues if needed and rebuilds the pending set.
    pub async fn open(storage: &Shard, offsets: &Offsets, now_ms: u64) -> Result<Timer, StorageError> {
        internal_queue::ensure(storage, &[(TIMER_LOG, FlushPolicy::Sync), (TIMER_DONE, FlushPolicy::Async)]).await?;
        let (start, end) = storage.offsets(TIMER_LOG)?;
        let cursor = offsets.get(CURSOR_GROUP, "", 0).unwrap_or(start).clamp(start, end);
        let mut delivered = Marks::new(cursor);
        internal_queue::scan(storage, TIMER_DONE, 0, |_, r| {
            r.value.chunks_exact(8).for_each(|c| delivered.mark(u64::from_le_bytes(c.try_into().expect("8 bytes"))));
        })
        .await?;
        let mut wheel = TimingWheel::new(TICK_MS, now_ms);
        internal_queue::scan(storage, TIMER_LOG, cursor, |offset, r| {
            if !delivered.is_marked(offset) {
                wheel.insert(schedule::destination(r).due_ms, offset);
            }
        })
        .await?;
        tracing::info!(pending = wheel.len(), cursor, "delayed messages loaded");
        Ok(Timer { wheel: RefCell::new(wheel), delivered: RefCell::new(delivered) })
    }
}

/// Durably stores `records` (one append) for delivery to `topic`/`queue` at `due_ms`.
pub async fn put(
    ctx: &ShardCtx,
    topic: &str,
    queue: u32,
    due_ms: u64,
    records: &[Record<'_>],
) -> Result<(), StorageError> {
    let batch = schedule::stamped_all(records, ctx.clock.now_ms(), Destination { due_ms, topic, queue }, &[]);
    let appended = ctx.storage.append(TIMER_LOG, &batch).await?;
    let mut wheel = ctx.timer.wheel.borrow_mut();
    (0..u64::from(appended.record_count)).for_each(|k| wheel.insert(due_ms, appended.base_offset + k));
    Ok(())
}

/// Delivers what falls due, every tick, until the shard stops.
pub fn spawn(ctx: &Rc<ShardCtx>) -> glommio::task::JoinHandle<()> {
    glommio::spawn_local(deliver_loop(ctx.clone())).detach()
}

async fn deliver_loop(ctx: Rc<ShardCtx>) {
    let mut last_commit = Instant::now();
    let mut committed = ctx.timer.delivered.borrow().cursor;
    loop {
        glommio::timer::sleep(Duration::from_millis(TICK_MS)).await;
        let due = ctx.timer.wheel.borrow_mut().advance(ctx.clock.now_ms());
        if !due.is_empty() {
            // Read in due order, then hand over concurrently, started in due
            // order: a queue receives its messages in due order.
            let mut handovers = Vec::with_capacity(due.len());
            for &(_, offset) in &due {
                if let Some(h) = load(&ctx, offset).await {
                    let ctx = ctx.clone();
                    handovers.push(glommio::spawn_local(async move { h.run(&ctx).await }));
                }
            }
            for h in handovers {
                h.await;
            }
            record_done(&ctx, due.iter().map(|(_, o)| *o)).await;
        }
        let cursor = ctx.timer.delivered.borrow().cursor;
        if cursor != committed && last_commit.elapsed() >= Duration::from_secs(1) {
            if let Err(error) = ctx.offsets.commit(&ctx.storage, CURSOR_GROUP, "", 0, cursor).await {
                tracing::error!(shard = ctx.id, %error, "committing the timer cursor failed");
            }
            committed = cursor;
            last_commit = Instant::now();
        }
    }
}

/// Reads the timer record at `offset`, ready to hand over (None if it is gone).
async fn load(ctx: &ShardCtx, offset: u64) -> Option<Handover> {
    loop {
        match internal_queue::with_record(&ctx.storage, TIMER_LOG, offset, |r| Handover::of(r, ctx.clock.now_ms()))
            .await
        {
            Ok(None) => {
                tracing::error!(shard = ctx.id, offset, "timer record missing; skipped");
                return None;
            }
            Ok(found) => return found,
            Err(StorageError::OffsetOutOfRange { .. }) => {
                tracing::error!(shard = ctx.id, offset, "timer record removed by retention before it was due");
                return None;
            }
            Err(error) => {
                tracing::warn!(shard = ctx.id, offset, %error, "reading a timer record failed; retrying");
                glommio::timer::sleep(Duration::from_millis(200)).await;
            }
        }
    }
}

/// Marks offsets delivered, in memory and (asynchronously flushed) in the done log.
async fn record_done(ctx: &ShardCtx, offsets: impl Iterator<Item = u64>) {
    let mut value = Vec::new();
    for o in offsets {
        ctx.timer.delivered.borrow_mut().mark(o);
        value.extend_from_slice(&o.to_le_bytes());
    }
    if let Err(error) =
        internal_queue::append_one(&ctx.storage, TIMER_DONE, &[], &value, ctx.clock.now_ms() as i64).await
    {
        tracing::error!(shard = ctx.id, %error, "recording delivered timers failed (they may be delivered again)");
    }
}

/// ProduceDelayed on the queue's owner: stores the batch's records for
/// their due time; returns it and the record count.
pub async fn produce_delayed(ctx: &ShardCtx, p: &ProduceDelayed<'_>) -> Result<(u64, u32), Failure> {
    let due_ms = due_time(ctx, p.delay_level, p.deliver_at_ms)?;
    let records = handler::checked_records(ctx, p.batch)?;
    put(ctx, &p.queue.topic, p.queue.queue, due_ms, &records).await?;
    Ok((due_ms, records.len() as u32))
}

/// When a delayed message is due: after its level's delay, or at its time
/// (at once if that has passed), at most `max_delay` ahead.
fn due_time(ctx: &ShardCtx, level: u32, at_ms: u64) -> Result<u64, Failure> {
    let now = ctx.clock.now_ms();
    let due = match level {
        0 => at_ms.max(now),
        l => now + schedule::level_delay(&ctx.config, l)?.as_millis() as u64,
    };
    let max = ctx.config.max_delay.as_millis() as u64;
    if due > now + max {
        let m = format!("delivery {} ms ahead exceeds the broker's max_delay of {max} ms", due - now);
        return Err(Failure(ErrorCode::InvalidRequest, m));
    }
    Ok(due)
}
