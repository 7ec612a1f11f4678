//! Delayed messages of one shard, due at any time up to the broker's
//! `delay_max` (a delay level is turned into its due time on arrival).
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

use super::levels::level_delay;
use super::probe::SendBacks;
use super::timing_wheel::TimingWheel;
use crate::protocol::messages::ProduceDelayed;
use crate::server::core::metrics::Probe;
use crate::server::core::offsets::Committed;
use crate::server::core::tasks::Death;
use crate::server::core::{Core, Failure};
use crate::server::internal::marks::Marks;
use crate::server::internal::queues::{self, TIMER_DONE, TIMER_LOG};
use crate::server::internal::stamp::{self, Destination, Handover};
use ringmq_shards::{FlushPolicy, QueueId, Record, StorageError};
use std::cell::RefCell;
use std::rc::Rc;
use std::time::{Duration, Instant};

const CURSOR_GROUP: &str = "%timer";
const TICK: Duration = Duration::from_millis(10);
/// How often the cursor is committed (a crash delivers at most this much again).
const COMMIT_EVERY: Duration = Duration::from_secs(1);

/// One shard's delayed messages (and the delay feature's metrics).
pub struct Timer {
    core: Rc<Core>,
    wheel: RefCell<TimingWheel<u64>>,
    delivered: RefCell<Marks>,
    send_backs: SendBacks,
}

impl Timer {
    /// Creates the internal queues if needed and rebuilds the pending set.
    pub async fn open(core: &Rc<Core>) -> Result<Rc<Timer>, StorageError> {
        let storage = core.storage();
        queues::ensure(storage, &[(TIMER_LOG, FlushPolicy::Sync), (TIMER_DONE, FlushPolicy::Async)]).await?;
        let (start, end) = storage.offsets(TIMER_LOG)?;
        let cursor = core.committed_offset(CURSOR_GROUP, "", 0).unwrap_or(start).clamp(start, end);
        let mut delivered = Marks::new(cursor);
        queues::scan(storage, TIMER_DONE, 0, |_, r| {
            r.value
                .unwrap_or_default()
                .chunks_exact(8)
                .for_each(|c| delivered.mark(u64::from_le_bytes(c.try_into().expect("8 bytes"))));
        })
        .await?;
        let mut wheel = TimingWheel::new(TICK.as_millis() as u64, core.clock().now_ms());
        queues::scan(storage, TIMER_LOG, cursor, |offset, r| {
            if !delivered.is_marked(offset) {
                wheel.insert(stamp::destination(r).due_ms, offset);
            }
        })
        .await?;
        tracing::info!(pending = wheel.len(), cursor, "delayed messages loaded");
        let timer = Rc::new(Timer {
            core: core.clone(),
            wheel: RefCell::new(wheel),
            delivered: RefCell::new(delivered),
            send_backs: SendBacks::default(),
        });
        core.probes().register(&(timer.clone() as Rc<dyn Probe>));
        Ok(timer)
    }

    /// Starts delivering what falls due (once the shard serves).
    pub fn start(self: &Rc<Self>) {
        self.core.tasks().spawn("timer", Death::Fatal, self.clone().deliver_loop());
    }

    pub fn core(&self) -> &Core {
        &self.core
    }

    /// Messages waiting in the timing wheel.
    pub fn pending(&self) -> usize {
        self.wheel.borrow().len()
    }

    /// Send-backs counted per consumer group.
    pub fn send_backs(&self) -> &SendBacks {
        &self.send_backs
    }

    /// The timer log's cursor (every offset below it was delivered): what
    /// the timer needs kept from retention.
    pub fn cursor(&self) -> (QueueId, u64) {
        (TIMER_LOG, self.delivered.borrow().cursor)
    }

    /// ProduceDelayed on the queue's owner: stores the batch's records for
    /// their due time; returns it and the record count.
    pub async fn produce_delayed(&self, p: &ProduceDelayed<'_>) -> Result<(u64, u32), Failure> {
        let due_ms = self.due_time(p.delay_level, p.deliver_at_ms)?;
        let mut inflated = Vec::new();
        let records = self.core.records_of(p.batch, &mut inflated)?;
        self.put(&p.queue.topic, p.queue.queue, due_ms, &records).await?;
        Ok((due_ms, records.len() as u32))
    }

    /// When a delayed message is due: after its level's delay, or at its time
    /// (at once if that has passed), at most `delay_max` ahead.
    fn due_time(&self, level: u32, at_ms: u64) -> Result<u64, Failure> {
        let now = self.core.clock().now_ms();
        let due = match level {
            0 => at_ms.max(now),
            l => now + level_delay(self.core.config(), l)?.as_millis() as u64,
        };
        let max = self.core.config().delay_max.as_millis() as u64;
        if due > now + max {
            return Err(Failure::invalid(format!(
                "delivery {} ms ahead exceeds the broker's delay_max of {max} ms",
                due - now
            )));
        }
        Ok(due)
    }

    /// Durably stores `records` (one append) for delivery to `topic`/`queue` at `due_ms`.
    async fn put(&self, topic: &str, queue: u32, due_ms: u64, records: &[Record<'_>]) -> Result<(), StorageError> {
        let now = self.core.clock().now_ms();
        let batch = stamp::stamped_all(records, now, Destination { due_ms, topic, queue }, &[]);
        let appended = self.core.storage().append(TIMER_LOG, &batch).await?;
        let mut wheel = self.wheel.borrow_mut();
        (0..u64::from(appended.record_count)).for_each(|k| wheel.insert(due_ms, appended.base_offset + k));
        Ok(())
    }

    /// Delivers what falls due, every tick, until the shard stops.
    async fn deliver_loop(self: Rc<Self>) {
        let mut last_commit = Instant::now();
        let mut committed = self.delivered.borrow().cursor;
        while self.core.tasks().sleep(TICK).await {
            let due = self.wheel.borrow_mut().advance(self.core.clock().now_ms());
            if !due.is_empty() {
                // Read in due order, then hand over concurrently, started in due
                // order: a queue receives its messages in due order.
                let mut handovers = Vec::with_capacity(due.len());
                for &(_, offset) in &due {
                    if let Some(h) = self.load(offset).await {
                        let core = self.core.clone();
                        handovers
                            .push(glommio::spawn_local(async move { core.append_until_stored(&h.to, &h.batch).await }));
                    }
                }
                for h in handovers {
                    h.await;
                }
                self.record_done(due.iter().map(|(_, o)| *o)).await;
            }
            let cursor = self.delivered.borrow().cursor;
            if cursor != committed && last_commit.elapsed() >= COMMIT_EVERY {
                if let Err(error) = self.core.commit_offset(CURSOR_GROUP, "", 0, Committed::at(cursor)).await {
                    tracing::error!(shard = self.core.id(), %error, "committing the timer cursor failed");
                }
                committed = cursor;
                last_commit = Instant::now();
            }
        }
    }

    /// Reads the timer record at `offset`, ready to hand over (None if it is gone).
    async fn load(&self, offset: u64) -> Option<Handover> {
        let (core, shard) = (&self.core, self.core.id());
        loop {
            let now = core.clock().now_ms();
            match queues::with_record(core.storage(), TIMER_LOG, offset, |r| Handover::of(r, now)).await {
                Ok(None) => {
                    tracing::error!(shard, offset, "timer record missing; skipped");
                    return None;
                }
                Ok(found) => return found,
                Err(StorageError::OffsetOutOfRange { .. }) => {
                    tracing::error!(shard, offset, "timer record removed by retention before it was due");
                    return None;
                }
                Err(error) => {
                    tracing::warn!(shard, offset, %error, "reading a timer record failed; retrying");
                    glommio::timer::sleep(Duration::from_millis(200)).await;
                }
            }
        }
    }

    /// Marks offsets delivered, in memory and (asynchronously flushed) in the done log.
    async fn record_done(&self, offsets: impl Iterator<Item = u64>) {
        let mut value = Vec::new();
        for o in offsets {
            self.delivered.borrow_mut().mark(o);
            value.extend_from_slice(&o.to_le_bytes());
        }
        let now = self.core.clock().now_ms() as i64;
        if let Err(error) = queues::append_one(self.core.storage(), TIMER_DONE, &[], &value, now).await {
            tracing::error!(shard = self.core.id(), %error, "recording delivered timers failed (they may be delivered again)");
        }
    }
}
