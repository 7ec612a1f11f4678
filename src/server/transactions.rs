//! Transactional (half) messages of one shard, RocketMQ's two-phase
//! protocol: a half message is stored durably in the half log (an internal
//! queue no consumer reads), the producer runs its local transaction and
//! ends it with commit (the message is appended to its topic) or rollback
//! (it never is). Decisions go to the op log durably before they act, so
//! each half message ends in exactly one outcome, also across crashes.
//!
//! A half message unresolved `tx_timeout` after it was stored is checked:
//! the check waits for any producer of its group polling this shard, whose
//! answer ends it; every `tx_check_interval` it is checked again, and after
//! `tx_max_checks` unanswered checks it is rolled back (and logged).

use super::handler::{self, Failure};
use super::internal_queue;
use super::offset_marks::Marks;
use super::schedule::{self, Destination, Handover};
use super::shard_server::ShardCtx;
use crate::protocol::messages::Transactional;
use crate::protocol::{ErrorCode, Writer};
use ringmq_shards::{FlushPolicy, QueueId, Record, Shard, Signal, StorageError};
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::rc::Rc;
use std::time::Duration;

/// Half messages, stamped with destination, group and store time.
pub const TX_HALF: QueueId = QueueId(u32::MAX - 32);
/// Decisions, checks and deliveries: [kind u8, half offset u64].
pub const TX_OP: QueueId = QueueId(u32::MAX - 33);
const GROUP: &[u8] = b"%group";
const CURSOR_GROUP: &str = "%tx";

/// What the op log records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum Op {
    Commit = 1,
    Rollback = 2,
    Check = 3,
    /// A committed half message was appended to its topic.
    Delivered = 4,
}

/// How a transaction ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Committed,
    RolledBack,
}

struct Open {
    group: String,
    next_check_ms: u64,
    checks: u32,
    committed: bool,
}

/// One shard's transactions.
pub struct Transactions {
    /// Half offsets that need nothing more (rolled back, or committed and delivered).
    finished: RefCell<Marks>,
    /// Outcomes of decided half messages still in memory (for repeated ends).
    decided: RefCell<HashMap<u64, Outcome>>,
    open: RefCell<BTreeMap<u64, Open>>,
    /// Checks waiting for a producer of the group, by group.
    checks: RefCell<HashMap<String, VecDeque<u64>>>,
    pub check_ready: Signal,
}

impl Transactions {
    /// Creates the internal queues if needed and rebuilds the open set.
    pub async fn open(
        storage: &Shard,
        cursor: Option<u64>,
        now_ms: u64,
        timeout: Duration,
    ) -> Result<Self, StorageError> {
        internal_queue::ensure(storage, &[(TX_HALF, FlushPolicy::Sync), (TX_OP, FlushPolicy::Sync)]).await?;
        let mut ops: HashMap<u64, (Option<Outcome>, u32, bool)> = HashMap::new();
        internal_queue::scan(storage, TX_OP, 0, |_, r| {
            let (Some(&kind), Some(half)) = (r.value.first(), r.value.get(1..9)) else { return };
            let e = ops.entry(u64::from_le_bytes(half.try_into().expect("8 bytes"))).or_default();
            match kind {
                k if k == Op::Commit as u8 => e.0 = Some(Outcome::Committed),
                k if k == Op::Rollback as u8 => e.0 = Some(Outcome::RolledBack),
                k if k == Op::Check as u8 => e.1 += 1,
                _ => e.2 = true,
            }
        })
        .await?;
        let start = storage.offsets(TX_HALF)?.0;
        let cursor = cursor.unwrap_or(start).max(start);
        let (mut finished, mut open, mut decided) = (Marks::new(cursor), BTreeMap::new(), HashMap::new());
        internal_queue::scan(storage, TX_HALF, cursor, |offset, r| {
            let (outcome, checks, delivered) = ops.get(&offset).copied().unwrap_or_default();
            if let Some(o) = outcome {
                decided.insert(offset, o);
            }
            match outcome {
                Some(Outcome::RolledBack) => finished.mark(offset),
                Some(Outcome::Committed) if delivered => finished.mark(offset),
                _ => {
                    let group = group_of(r);
                    let committed = outcome == Some(Outcome::Committed);
                    open.insert(
                        offset,
                        Open { group, next_check_ms: now_ms + timeout.as_millis() as u64, checks, committed },
                    );
                }
            }
        })
        .await?;
        tracing::info!(open = open.len(), "transactions loaded");
        Ok(Transactions {
            finished: RefCell::new(finished),
            decided: RefCell::new(decided),
            open: RefCell::new(open),
            checks: RefCell::default(),
            check_ready: Signal::default(),
        })
    }

    /// Every half offset below it is finished.
    pub fn cursor(&self) -> u64 {
        self.finished.borrow().cursor
    }

    /// Checks waiting for `group`, handed out (each goes to one producer).
    pub fn take_checks(&self, group: &str) -> Vec<u64> {
        self.checks.borrow_mut().get_mut(group).map(|q| q.drain(..).collect()).unwrap_or_default()
    }
}

fn group_of(r: &Record<'_>) -> String {
    r.headers.get(GROUP).map(|v| String::from_utf8_lossy(v).into_owned()).unwrap_or_default()
}

/// Stores a half message of `group` for `topic`/`queue`; returns its half offset.
pub async fn store_half(
    ctx: &ShardCtx,
    group: &str,
    topic: &str,
    queue: u32,
    record: &Record<'_>,
) -> Result<u64, StorageError> {
    let now = ctx.clock.now_ms();
    let batch = schedule::stamped(record, now, Destination { due_ms: now, topic, queue }, &[(GROUP, group.as_bytes())]);
    let half = ctx.storage.append(TX_HALF, &batch).await?.base_offset;
    let next_check_ms = now + ctx.config.tx_timeout.as_millis() as u64;
    ctx.transactions
        .open
        .borrow_mut()
        .insert(half, Open { group: group.to_string(), next_check_ms, checks: 0, committed: false });
    Ok(half)
}

/// Ends a transaction; ending it again with the same decision answers the
/// same outcome, and a different one is refused. None: no such half message.
pub async fn end(ctx: &Rc<ShardCtx>, half: u64, commit: bool) -> Result<Option<Outcome>, StorageError> {
    let wanted = if commit { Outcome::Committed } else { Outcome::RolledBack };
    let tx = &ctx.transactions;
    if let Some(&o) = tx.decided.borrow().get(&half) {
        return Ok(Some(o));
    }
    if !tx.open.borrow().contains_key(&half) {
        return Ok(None);
    }
    record_op(ctx, if commit { Op::Commit } else { Op::Rollback }, half).await?;
    tx.decided.borrow_mut().insert(half, wanted);
    if commit {
        if let Some(o) = tx.open.borrow_mut().get_mut(&half) {
            o.committed = true;
        }
        deliver(ctx, half).await?;
    } else {
        finish(ctx, half);
    }
    Ok(Some(wanted))
}

/// Appends a committed half message to its topic, then records that.
async fn deliver(ctx: &Rc<ShardCtx>, half: u64) -> Result<(), StorageError> {
    let handover =
        internal_queue::with_record(&ctx.storage, TX_HALF, half, |r| Handover::of(r, ctx.clock.now_ms())).await?;
    if let Some(h) = handover {
        h.run(ctx).await;
    }
    record_op(ctx, Op::Delivered, half).await?;
    finish(ctx, half);
    Ok(())
}

fn finish(ctx: &ShardCtx, half: u64) {
    ctx.transactions.open.borrow_mut().remove(&half);
    ctx.transactions.finished.borrow_mut().mark(half);
}

async fn record_op(ctx: &ShardCtx, op: Op, half: u64) -> Result<(), StorageError> {
    let mut value = vec![op as u8];
    value.extend_from_slice(&half.to_le_bytes());
    internal_queue::append_one(&ctx.storage, TX_OP, &[], &value, ctx.clock.now_ms() as i64).await
}

/// A half message handed out for a check: (half offset, topic, queue, batch).
pub type HalfMessage = (u64, String, u32, Vec<u8>);

/// The offsets cursor of the transactions (every half below it is finished).
pub fn cursor(ctx_offsets: &super::offsets::Offsets) -> Option<u64> {
    ctx_offsets.get(CURSOR_GROUP, "", 0)
}

/// Checks, times out and redelivers, every 100 ms, until the shard stops.
pub fn spawn(ctx: &Rc<ShardCtx>) -> glommio::task::JoinHandle<()> {
    glommio::spawn_local(check_loop(ctx.clone())).detach()
}

async fn check_loop(ctx: Rc<ShardCtx>) {
    let mut committed_cursor = ctx.transactions.finished.borrow().cursor;
    // Committed before a crash but not yet in their topic: deliver now.
    let pending: Vec<u64> =
        ctx.transactions.open.borrow().iter().filter(|(_, o)| o.committed).map(|(h, _)| *h).collect();
    for half in pending {
        if let Err(error) = deliver(&ctx, half).await {
            tracing::error!(shard = ctx.id, half, %error, "delivering a committed half message failed");
        }
    }
    loop {
        glommio::timer::sleep(Duration::from_millis(100)).await;
        if let Err(error) = check_due(&ctx).await {
            tracing::error!(shard = ctx.id, %error, "transaction checks failed");
        }
        let cursor = ctx.transactions.finished.borrow().cursor;
        if cursor != committed_cursor {
            ctx.transactions.decided.borrow_mut().retain(|half, _| *half >= cursor);
            match ctx.offsets.commit(&ctx.storage, CURSOR_GROUP, "", 0, cursor).await {
                Ok(()) => committed_cursor = cursor,
                Err(error) => tracing::error!(shard = ctx.id, %error, "committing the transaction cursor failed"),
            }
        }
    }
}

/// Queues a check for every open half message whose check time came, and
/// rolls back those out of checks.
async fn check_due(ctx: &Rc<ShardCtx>) -> Result<(), StorageError> {
    let now = ctx.clock.now_ms();
    let (max, every) = (ctx.config.tx_max_checks, ctx.config.tx_check_interval.as_millis() as u64);
    let due: Vec<(u64, String, u32)> = ctx
        .transactions
        .open
        .borrow()
        .iter()
        .filter(|(_, o)| !o.committed && o.next_check_ms <= now)
        .map(|(h, o)| (*h, o.group.clone(), o.checks))
        .collect();
    let mut queued = false;
    for (half, group, checks) in due {
        if checks >= max {
            tracing::warn!(shard = ctx.id, half, %group, checks, "transaction rolled back: no answer to its checks");
            end(ctx, half, false).await?;
            continue;
        }
        record_op(ctx, Op::Check, half).await?;
        if let Some(o) = ctx.transactions.open.borrow_mut().get_mut(&half) {
            o.checks += 1;
            o.next_check_ms = now + every;
        }
        let mut checks = ctx.transactions.checks.borrow_mut();
        let waiting = checks.entry(group).or_default();
        if !waiting.contains(&half) {
            waiting.push_back(half);
            queued = true;
        }
    }
    if queued {
        ctx.transactions.check_ready.notify();
    }
    Ok(())
}

/// The half messages of checks handed to a producer: (half offset, topic,
/// queue, the message as a batch stamped with the half offset).
pub async fn check_messages(ctx: &ShardCtx, halves: &[u64]) -> Result<Vec<HalfMessage>, StorageError> {
    let mut out = Vec::new();
    let still_open: HashSet<u64> = ctx.transactions.open.borrow().keys().copied().collect();
    for &half in halves.iter().filter(|h| still_open.contains(h)) {
        let found = internal_queue::with_record(&ctx.storage, TX_HALF, half, |r| {
            let h = Handover::of(r, schedule::destination(r).due_ms);
            (h.topic, h.queue, h.batch)
        })
        .await?;
        if let Some((topic, queue, mut batch)) = found {
            ringmq_shards::batch::stamp(&mut batch, half, TX_HALF.0);
            out.push((half, topic, queue, batch));
        }
    }
    Ok(out)
}

/// Stores a transaction's half message (exactly one record).
pub async fn produce_half(ctx: &ShardCtx, t: &Transactional<'_>) -> Result<u64, Failure> {
    let records = handler::checked_records(ctx, t.batch)?;
    let [record] = records.as_slice() else {
        let m = format!("a half message batch holds exactly one message, not {}", records.len());
        return Err(Failure(ErrorCode::InvalidRequest, m));
    };
    if t.group.is_empty() {
        return Err(Failure(ErrorCode::InvalidRequest, "a half message needs its producer group".into()));
    }
    Ok(store_half(ctx, &t.group, &t.queue.topic, t.queue.queue, record).await?)
}

/// EndTransaction: the outcome's wire code (1 committed, 2 rolled back).
pub async fn end_requested(ctx: &Rc<ShardCtx>, half: u64, commit: bool) -> Result<u8, Failure> {
    let outcome = end(ctx, half, commit).await?.ok_or_else(|| {
        Failure(ErrorCode::InvalidRequest, format!("no transaction at half offset {half} on this shard"))
    })?;
    Ok(if outcome == Outcome::Committed { 1 } else { 2 })
}

/// PollChecks: parks until checks for the group wait (or the wait ends) and hands them out.
pub async fn poll_checks(ctx: &ShardCtx, group: &str, wait: Duration, w: &mut Writer) -> Result<(), Failure> {
    let tx = &ctx.transactions;
    let mut halves = tx.take_checks(group);
    if halves.is_empty() && !wait.is_zero() && tx.check_ready.wait_for(wait).await {
        halves = tx.take_checks(group);
    }
    let found = check_messages(ctx, &halves).await?;
    w.u32(found.len() as u32);
    for (half, topic, queue, batch) in &found {
        w.u64(*half).string(topic).u32(*queue).bytes(batch);
    }
    Ok(())
}
