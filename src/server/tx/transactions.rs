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
//! `tx_checks_max` unanswered checks it is rolled back (and logged).

use crate::protocol::messages::Transactional;
use crate::server::core::metrics::{Probe, Samples};
use crate::server::core::offsets::Committed;
use crate::server::core::tasks::Death;
use crate::server::core::{Core, Failure};
use crate::server::internal::marks::Marks;
use crate::server::internal::queues::{self, TX_HALF, TX_OP};
use crate::server::internal::stamp::{self, Destination, Handover};
use ringmq_shards::{FlushPolicy, QueueId, Record, Signal, StorageError};
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::rc::Rc;
use std::time::Duration;

const GROUP: &[u8] = b"%group";
const CURSOR_GROUP: &str = "%tx";
/// How often check times and timeouts are looked at.
const CHECK_TICK: Duration = Duration::from_millis(100);

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

/// A half message handed out for a check: (half offset, topic, queue, batch).
pub type HalfMessage = (u64, String, u32, Vec<u8>);

/// One shard's transactions.
pub struct Transactions {
    core: Rc<Core>,
    /// Half offsets that need nothing more (rolled back, or committed and delivered).
    finished: RefCell<Marks>,
    /// Outcomes of decided half messages still in memory (for repeated ends).
    decided: RefCell<HashMap<u64, Outcome>>,
    open: RefCell<BTreeMap<u64, Open>>,
    /// Checks waiting for a producer of the group, by group.
    checks: RefCell<HashMap<String, VecDeque<u64>>>,
    check_ready: Signal,
}

impl Probe for Transactions {
    fn collect(&self, out: &mut Samples) {
        let (open, checks) = (self.open.borrow(), self.checks.borrow());
        let committed = open.values().filter(|o| o.committed).count();
        let help = "Half messages stored and not finished: undecided, or committed and not yet delivered.";
        out.gauge("ringmq_transactions_open", help, &[("state", "undecided")], (open.len() - committed) as f64);
        out.gauge("ringmq_transactions_open", help, &[("state", "committed")], committed as f64);
        let help = "Transaction checks waiting for a producer of their group to ask for them.";
        out.gauge(
            "ringmq_transaction_checks_waiting",
            help,
            &[],
            checks.values().map(VecDeque::len).sum::<usize>() as f64,
        );
    }
}

impl Transactions {
    /// Creates the internal queues if needed and rebuilds the open set.
    pub async fn open(core: &Rc<Core>) -> Result<Rc<Self>, StorageError> {
        let (storage, now_ms, timeout) = (core.storage(), core.clock().now_ms(), core.config().tx_timeout);
        queues::ensure(storage, &[(TX_HALF, FlushPolicy::Sync), (TX_OP, FlushPolicy::Sync)]).await?;
        let mut ops: HashMap<u64, (Option<Outcome>, u32, bool)> = HashMap::new();
        queues::scan(storage, TX_OP, 0, |_, r| {
            let value = r.value.unwrap_or_default();
            let (Some(&kind), Some(half)) = (value.first(), value.get(1..9)) else { return };
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
        let cursor = core.committed_offset(CURSOR_GROUP, "", 0).unwrap_or(start).max(start);
        let (mut finished, mut open, mut decided) = (Marks::new(cursor), BTreeMap::new(), HashMap::new());
        queues::scan(storage, TX_HALF, cursor, |offset, r| {
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
        let transactions = Rc::new(Transactions {
            core: core.clone(),
            finished: RefCell::new(finished),
            decided: RefCell::new(decided),
            open: RefCell::new(open),
            checks: RefCell::default(),
            check_ready: Signal::default(),
        });
        core.probes().register(&(transactions.clone() as Rc<dyn Probe>));
        Ok(transactions)
    }

    /// Starts checking, timing out and redelivering (once the shard serves).
    pub fn start(self: &Rc<Self>) {
        self.core.tasks().spawn("transaction checks", Death::Fatal, self.clone().check_loop());
    }

    /// The half log's cursor (every half offset below it is finished): what
    /// transactions need kept from retention.
    pub fn cursor(&self) -> (QueueId, u64) {
        (TX_HALF, self.finished.borrow().cursor)
    }

    /// Stores a transaction's half message (exactly one record); returns its half offset.
    pub async fn produce_half(&self, t: &Transactional<'_>) -> Result<u64, Failure> {
        let mut inflated = Vec::new();
        let records = self.core.records_of(t.batch, &mut inflated)?;
        let [record] = records.as_slice() else {
            let m = format!("a half message batch holds exactly one message, not {}", records.len());
            return Err(Failure::invalid(m));
        };
        if t.group.is_empty() {
            return Err(Failure::invalid("a half message needs its producer group"));
        }
        Ok(self.store_half(&t.group, &t.queue.topic, t.queue.queue, record).await?)
    }

    /// EndTransaction: the outcome's wire code (1 committed, 2 rolled back).
    pub async fn end_requested(&self, half: u64, commit: bool) -> Result<u8, Failure> {
        let outcome = self
            .end(half, commit)
            .await?
            .ok_or_else(|| Failure::invalid(format!("no transaction at half offset {half} on this shard")))?;
        Ok(if outcome == Outcome::Committed { 1 } else { 2 })
    }

    /// PollChecks: parks until checks for the group wait (or the wait ends)
    /// and hands them out, each to one producer.
    pub async fn poll_checks(&self, group: &str, wait: Duration) -> Result<Vec<HalfMessage>, Failure> {
        let mut halves = self.take_checks(group);
        if halves.is_empty() && !wait.is_zero() && self.check_ready.wait_for(wait).await {
            halves = self.take_checks(group);
        }
        Ok(self.check_messages(&halves).await?)
    }

    /// Checks waiting for `group`, handed out (each goes to one producer).
    fn take_checks(&self, group: &str) -> Vec<u64> {
        self.checks.borrow_mut().get_mut(group).map(|q| q.drain(..).collect()).unwrap_or_default()
    }

    /// Stores a half message of `group` for `topic`/`queue`; returns its half offset.
    async fn store_half(&self, group: &str, topic: &str, queue: u32, record: &Record<'_>) -> Result<u64, StorageError> {
        let now = self.core.clock().now_ms();
        let to = Destination { due_ms: now, topic, queue };
        let batch = stamp::stamped(record, now, to, &[(GROUP, group.as_bytes())]);
        let half = self.core.storage().append(TX_HALF, &batch).await?.base_offset;
        let next_check_ms = now + self.core.config().tx_timeout.as_millis() as u64;
        let open = Open { group: group.to_string(), next_check_ms, checks: 0, committed: false };
        self.open.borrow_mut().insert(half, open);
        Ok(half)
    }

    /// Ends a transaction; ending it again with the same decision answers the
    /// same outcome, and a different one is refused. None: no such half message.
    async fn end(&self, half: u64, commit: bool) -> Result<Option<Outcome>, StorageError> {
        let wanted = if commit { Outcome::Committed } else { Outcome::RolledBack };
        if let Some(&o) = self.decided.borrow().get(&half) {
            return Ok(Some(o));
        }
        if !self.open.borrow().contains_key(&half) {
            return Ok(None);
        }
        self.record_op(if commit { Op::Commit } else { Op::Rollback }, half).await?;
        self.decided.borrow_mut().insert(half, wanted);
        if commit {
            if let Some(o) = self.open.borrow_mut().get_mut(&half) {
                o.committed = true;
            }
            self.deliver(half).await?;
        } else {
            self.finish(half);
        }
        Ok(Some(wanted))
    }

    /// Appends a committed half message to its topic, then records that.
    async fn deliver(&self, half: u64) -> Result<(), StorageError> {
        let now = self.core.clock().now_ms();
        let handover = queues::with_record(self.core.storage(), TX_HALF, half, |r| Handover::of(r, now)).await?;
        if let Some(h) = handover {
            self.core.append_until_stored(&h.to, &h.batch).await;
        }
        self.record_op(Op::Delivered, half).await?;
        self.finish(half);
        Ok(())
    }

    fn finish(&self, half: u64) {
        self.open.borrow_mut().remove(&half);
        self.finished.borrow_mut().mark(half);
    }

    async fn record_op(&self, op: Op, half: u64) -> Result<(), StorageError> {
        let mut value = vec![op as u8];
        value.extend_from_slice(&half.to_le_bytes());
        queues::append_one(self.core.storage(), TX_OP, &[], &value, self.core.clock().now_ms() as i64).await
    }

    async fn check_loop(self: Rc<Self>) {
        let shard = self.core.id();
        let mut committed_cursor = self.finished.borrow().cursor;
        // Committed before a crash but not yet in their topic: deliver now.
        let pending: Vec<u64> = self.open.borrow().iter().filter(|(_, o)| o.committed).map(|(h, _)| *h).collect();
        for half in pending {
            if let Err(error) = self.deliver(half).await {
                tracing::error!(shard, half, %error, "delivering a committed half message failed");
            }
        }
        while self.core.tasks().sleep(CHECK_TICK).await {
            if let Err(error) = self.check_due().await {
                tracing::error!(shard, %error, "transaction checks failed");
            }
            let cursor = self.finished.borrow().cursor;
            if cursor != committed_cursor {
                self.decided.borrow_mut().retain(|half, _| *half >= cursor);
                match self.core.commit_offset(CURSOR_GROUP, "", 0, Committed::at(cursor)).await {
                    Ok(()) => committed_cursor = cursor,
                    Err(error) => tracing::error!(shard, %error, "committing the transaction cursor failed"),
                }
            }
        }
    }

    /// Queues a check for every open half message whose check time came, and
    /// rolls back those out of checks.
    async fn check_due(&self) -> Result<(), StorageError> {
        let now = self.core.clock().now_ms();
        let config = self.core.config();
        let (max, every) = (config.tx_checks_max, config.tx_check_interval.as_millis() as u64);
        let due: Vec<(u64, String, u32)> = self
            .open
            .borrow()
            .iter()
            .filter(|(_, o)| !o.committed && o.next_check_ms <= now)
            .map(|(h, o)| (*h, o.group.clone(), o.checks))
            .collect();
        let mut queued = false;
        for (half, group, checks) in due {
            if checks >= max {
                let shard = self.core.id();
                tracing::warn!(shard, half, %group, checks, "transaction rolled back: no answer to its checks");
                self.end(half, false).await?;
                continue;
            }
            self.record_op(Op::Check, half).await?;
            if let Some(o) = self.open.borrow_mut().get_mut(&half) {
                o.checks += 1;
                o.next_check_ms = now + every;
            }
            let mut checks = self.checks.borrow_mut();
            let waiting = checks.entry(group).or_default();
            if !waiting.contains(&half) {
                waiting.push_back(half);
                queued = true;
            }
        }
        if queued {
            self.check_ready.notify();
        }
        Ok(())
    }

    /// The half messages of checks handed to a producer: (half offset, topic,
    /// queue, the message as a batch stamped with the half offset).
    async fn check_messages(&self, halves: &[u64]) -> Result<Vec<HalfMessage>, StorageError> {
        let mut out = Vec::new();
        let still_open: HashSet<u64> = self.open.borrow().keys().copied().collect();
        for &half in halves.iter().filter(|h| still_open.contains(h)) {
            let found = queues::with_record(self.core.storage(), TX_HALF, half, |r| {
                let h = Handover::of(r, stamp::destination(r).due_ms);
                (h.to, h.batch)
            })
            .await?;
            if let Some((to, mut batch)) = found {
                ringmq_shards::batch::stamp(&mut batch, half, TX_HALF.0);
                out.push((half, to.topic, to.queue, batch));
            }
        }
        Ok(out)
    }
}

fn group_of(r: &Record<'_>) -> String {
    r.headers.get(GROUP).map(|v| String::from_utf8_lossy(v).into_owned()).unwrap_or_default()
}
