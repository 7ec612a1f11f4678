//! Kafka's transaction coordinator (KIP-98, with KIP-360's epoch bumps),
//! for the transactional ids that hash to this shard (as consumer groups
//! do). Each transactional id has a producer id and an epoch, bumped by
//! every InitProducerId so that an older producer with the id is fenced,
//! and a transaction: the partitions and consumer groups it touched, its
//! state and when it began.
//!
//! Every change of a transactional id is a record of the internal queue
//! `TXN_STATE` (its key the id, its value the state as JSON), stored and
//! replicated before the request is answered, and replayed at start: a
//! transaction that was ending when the shard stopped (PrepareCommit,
//! PrepareAbort) has its markers written again, and an open one is aborted
//! at its timeout like any other. Ending a transaction writes its marker
//! into every partition it touched (through the core, on each partition's
//! owner: a marker is one durable write there) and ends its pending offsets
//! at each group's coordinator; a marker that cannot be written yet is
//! tried again until it is (a deleted topic needs none).
//!
//! This is a different protocol from the native half messages
//! (`transactions.rs`): those hold one message aside until the producer
//! decides, these write in place and mark the outcome; they share the core's
//! durable internal queues and nothing else.

use crate::protocol::messages::QueueRef;
use crate::server::core::tasks::Death;
use crate::server::core::{Core, Failure, Reason};
use crate::server::internal::queues::{self, TXN_STATE};
use crate::server::internal::snapshots::Snapshots;
use ringmq_shards::kafka::Marker;
use ringmq_shards::{FlushPolicy, QueueId, StorageError};
use serde::{Deserialize, Serialize};
use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap};
use std::rc::Rc;
use std::time::Duration;

/// How often open transactions are checked against their timeouts.
const TIMEOUT_TICK: Duration = Duration::from_secs(1);
/// How often every transactional id's state is appended again (as offsets are).
const SNAPSHOT_EVERY: Duration = Duration::from_secs(600);
/// The pause before a marker that could not be written is tried again.
const MARKER_RETRY: Duration = Duration::from_millis(200);

/// A transaction's state, as Kafka names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TxnState {
    Empty,
    Ongoing,
    PrepareCommit,
    PrepareAbort,
    CompleteCommit,
    CompleteAbort,
}

impl TxnState {
    /// Kafka's name (DescribeTransactions, ListTransactions).
    pub fn name(self) -> &'static str {
        match self {
            TxnState::Empty => "Empty",
            TxnState::Ongoing => "Ongoing",
            TxnState::PrepareCommit => "PrepareCommit",
            TxnState::PrepareAbort => "PrepareAbort",
            TxnState::CompleteCommit => "CompleteCommit",
            TxnState::CompleteAbort => "CompleteAbort",
        }
    }

    fn ending(self) -> bool {
        matches!(self, TxnState::PrepareCommit | TxnState::PrepareAbort)
    }
}

/// A transactional id's producer and its current (or last) transaction.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Txn {
    pub producer_id: i64,
    pub epoch: i16,
    pub timeout_ms: u64,
    pub state: TxnState,
    /// (topic, partition) written in the transaction.
    pub partitions: BTreeSet<(String, u32)>,
    /// Consumer groups whose offsets it commits.
    pub groups: BTreeSet<String>,
    /// Wall-clock ms the transaction began (its first partition or group).
    pub started_ms: u64,
    /// Grows with every change stored: replay keeps the newest, whatever
    /// order the records were placed in (an outcome is stored in the background).
    pub version: u64,
}

impl Txn {
    /// The producer's id and epoch must be the transactional id's.
    fn check(&self, producer_id: i64, epoch: i16) -> Result<(), Failure> {
        if producer_id != self.producer_id {
            let m = format!("producer id {producer_id} is not this transactional id's ({})", self.producer_id);
            return Err(Failure(Reason::InvalidProducerIdMapping, m));
        }
        if epoch != self.epoch {
            let m = format!(
                "producer epoch {epoch} is not the transactional id's ({}): another producer with the id fenced it",
                self.epoch
            );
            return Err(Failure(Reason::ProducerFenced, m));
        }
        Ok(())
    }
}

/// What a transaction adds: partitions (AddPartitionsToTxn) or a group (AddOffsetsToTxn).
pub enum Addition {
    Partitions(Vec<(String, u32)>),
    Group(String),
}

/// The coordinator of this shard's transactional ids.
pub struct Coordinator {
    core: Rc<Core>,
    txns: RefCell<HashMap<String, Txn>>,
    snapshots: Snapshots,
}

impl Coordinator {
    /// Creates the internal queue if needed and replays it.
    pub async fn open(core: &Rc<Core>) -> Result<Rc<Coordinator>, StorageError> {
        let storage = core.storage();
        queues::ensure(storage, &[(TXN_STATE, FlushPolicy::Sync)]).await?;
        let mut txns: HashMap<String, Txn> = HashMap::new();
        queues::scan(storage, TXN_STATE, 0, |_, r| {
            let Some(id) = r.key.and_then(|k| std::str::from_utf8(k).ok()) else { return };
            match r.value.map(serde_json::from_slice::<Txn>) {
                Some(Ok(txn)) => match txns.get(id) {
                    Some(newer) if newer.version > txn.version => None,
                    _ => txns.insert(id.to_string(), txn),
                },
                Some(Err(error)) => {
                    tracing::warn!(%error, id, "a transaction state record does not parse; skipped");
                    None
                }
                None => txns.remove(id),
            };
        })
        .await?;
        Ok(Rc::new(Coordinator { core: core.clone(), txns: RefCell::new(txns), snapshots: Snapshots::new(TXN_STATE) }))
    }

    /// Finishes the transactions that were ending, and starts the task that
    /// aborts timed-out transactions and snapshots the state.
    pub fn start(self: &Rc<Self>) {
        let ending: Vec<String> =
            self.txns.borrow().iter().filter(|(_, t)| t.state.ending()).map(|(id, _)| id.clone()).collect();
        for id in ending {
            let me = self.clone();
            self.core.tasks().spawn("transaction markers", Death::Logged, async move {
                if let Err(error) = me.complete(&id).await {
                    tracing::warn!(id, %error, "finishing a transaction after a restart failed");
                }
            });
        }
        let me = self.clone();
        self.core.tasks().spawn("transaction timeouts", Death::Logged, async move { me.tick_loop().await });
    }

    /// A copy of a transactional id's state.
    pub fn describe(&self, id: &str) -> Option<Txn> {
        self.txns.borrow().get(id).cloned()
    }

    /// Every transactional id of this shard with its state.
    pub fn list(&self) -> Vec<(String, Txn)> {
        let mut all: Vec<_> = self.txns.borrow().iter().map(|(id, t)| (id.clone(), t.clone())).collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all
    }

    /// The oldest record of `TXN_STATE` still needed: (queue, offset).
    pub fn needed(&self) -> (QueueId, u64) {
        self.snapshots.needed()
    }

    /// InitProducerId with a transactional id: the id's producer with its
    /// epoch bumped (a new producer id at epoch 0 the first time, or when
    /// the epoch would overflow), fencing every older producer of the id. An
    /// open transaction is aborted first; an ending one is waited for by
    /// the client (CONCURRENT_TRANSACTIONS). `given`: the producer id and
    /// epoch a producer re-initializing itself names (KIP-360).
    pub async fn init(
        &self,
        id: &str,
        timeout_ms: i32,
        given: Option<(i64, i16)>,
        new_id: impl Fn() -> i64,
    ) -> Result<(i64, i16), Failure> {
        let max = self.core.config().transaction_timeout_max.as_millis() as u64;
        if timeout_ms <= 0 || timeout_ms as u64 > max {
            let m = format!("transaction timeout {timeout_ms} ms is outside 1..={max} (--transaction-timeout-ms-max)");
            return Err(Failure(Reason::InvalidTransactionTimeout, m));
        }
        let current = self.describe(id);
        if let (Some(t), Some((producer_id, epoch))) = (&current, given) {
            // A producer that re-initializes names its own id; an older epoch was fenced.
            if producer_id != t.producer_id || epoch < t.epoch {
                t.check(producer_id, epoch)?;
            }
        }
        let mut next = match current {
            None => fresh(new_id(), timeout_ms as u64),
            Some(t) if t.state.ending() => return Err(concurrent(id)),
            Some(t) if t.state == TxnState::Ongoing => {
                self.abort_fenced(id).await?;
                self.describe(id).expect("just aborted")
            }
            Some(t) => t,
        };
        if next.epoch >= i16::MAX - 1 {
            next = fresh(new_id(), timeout_ms as u64);
        } else if self.txns.borrow().contains_key(id) {
            next.epoch += 1;
        }
        next.timeout_ms = timeout_ms as u64;
        next.state = TxnState::Empty;
        next.partitions.clear();
        next.groups.clear();
        self.store(id, next.clone()).await?;
        Ok((next.producer_id, next.epoch))
    }

    /// Adds partitions or a group to the producer's transaction (beginning
    /// one if none is open): stored before it answers.
    pub async fn add(&self, id: &str, producer_id: i64, epoch: i16, addition: Addition) -> Result<(), Failure> {
        let mut t = self.current(id, producer_id, epoch)?;
        match t.state {
            TxnState::PrepareCommit | TxnState::PrepareAbort => return Err(concurrent(id)),
            TxnState::Ongoing => {}
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort => {
                t.state = TxnState::Ongoing;
                t.partitions.clear();
                t.groups.clear();
                t.started_ms = self.core.clock().now_ms();
            }
        }
        let before = (t.partitions.len(), t.groups.len());
        match addition {
            Addition::Partitions(partitions) => t.partitions.extend(partitions),
            Addition::Group(group) => {
                t.groups.insert(group);
            }
        }
        if before == (t.partitions.len(), t.groups.len()) && self.describe(id).as_ref() == Some(&t) {
            return Ok(());
        }
        self.store(id, t).await
    }

    /// Whether the producer's open transaction holds each partition (the
    /// verify-only form of AddPartitionsToTxn v4+).
    pub fn holds(&self, id: &str, producer_id: i64, epoch: i16, partition: &(String, u32)) -> Result<bool, Failure> {
        let t = self.current(id, producer_id, epoch)?;
        Ok(t.state == TxnState::Ongoing && t.partitions.contains(partition))
    }

    /// EndTxn: commits or aborts the producer's transaction: the decision
    /// stored, every marker written, then the outcome stored. Repeating the
    /// same end is answered as done; the other end of an ended transaction,
    /// or an end without a transaction, is INVALID_TXN_STATE.
    pub async fn end(&self, id: &str, producer_id: i64, epoch: i16, commit: bool) -> Result<(), Failure> {
        let mut t = self.current(id, producer_id, epoch)?;
        let (prepare, complete) = match commit {
            true => (TxnState::PrepareCommit, TxnState::CompleteCommit),
            false => (TxnState::PrepareAbort, TxnState::CompleteAbort),
        };
        match t.state {
            TxnState::Ongoing => {}
            s if s == complete => return Ok(()),
            s if s == prepare => return Err(concurrent(id)),
            s => {
                let verb = if commit { "commit" } else { "abort" };
                let m = format!("transactional id {id:?} cannot {verb}: its transaction is {}", s.name());
                return Err(Failure(Reason::InvalidTxnState, m));
            }
        }
        t.state = prepare;
        self.store(id, t).await?;
        self.complete(id).await
    }

    /// The id's state, if the producer's id and epoch are its own.
    fn current(&self, id: &str, producer_id: i64, epoch: i16) -> Result<Txn, Failure> {
        let Some(t) = self.describe(id) else {
            let m = format!("transactional id {id:?} is unknown: InitProducerId first");
            return Err(Failure(Reason::InvalidProducerIdMapping, m));
        };
        t.check(producer_id, epoch)?;
        Ok(t)
    }

    /// Aborts an open transaction with the epoch bumped, so that its
    /// producer is fenced (at its timeout, or when another producer with
    /// the same id initializes).
    async fn abort_fenced(&self, id: &str) -> Result<(), Failure> {
        let Some(mut t) = self.describe(id).filter(|t| t.state == TxnState::Ongoing) else { return Ok(()) };
        t.epoch = t.epoch.saturating_add(1);
        t.state = TxnState::PrepareAbort;
        self.store(id, t).await?;
        self.complete(id).await
    }

    /// Writes the markers of an ending transaction and stores its outcome.
    async fn complete(&self, id: &str) -> Result<(), Failure> {
        let Some(t) = self.describe(id).filter(|t| t.state.ending()) else { return Ok(()) };
        let commit = t.state == TxnState::PrepareCommit;
        let marker = Marker { producer_id: t.producer_id, producer_epoch: t.epoch, commit, coordinator_epoch: 0 };
        let partitions = t.partitions.iter().map(|(topic, queue)| self.mark(topic, *queue, marker));
        let groups = t.groups.iter().map(|g| self.end_offsets(g, t.producer_id, commit));
        let (written, ended) = futures_util::future::join(
            futures_util::future::join_all(partitions),
            futures_util::future::join_all(groups),
        )
        .await;
        if written.into_iter().chain(ended).any(|done| !done) {
            return Err(Failure(
                Reason::ShuttingDown,
                "the shard is stopping; the transaction ends when it is back".into(),
            ));
        }
        // The outcome's record needs no wait: were it lost, the decision's
        // would have the markers written again, which readers take twice.
        let state = if commit { TxnState::CompleteCommit } else { TxnState::CompleteAbort };
        let value = self.remember(id, Txn { state, ..t });
        let core = self.core.clone();
        let id = id.to_string();
        glommio::spawn_local(async move {
            if let Err(error) = queues::append_one(core.storage(), TXN_STATE, id.as_bytes(), &value, 0).await {
                tracing::warn!(id, %error, "storing a transaction's outcome failed; it is ended again after a restart");
            }
        })
        .detach();
        Ok(())
    }

    /// Writes one marker (`until_done`). A partition that no longer exists needs none.
    async fn mark(&self, topic: &str, queue: u32, marker: Marker) -> bool {
        let q = QueueRef { topic: topic.to_string(), queue };
        let what = format!("the transaction marker of {topic:?} queue {queue}");
        self.until_done(&what, || async {
            match self.core.end_txn(&q, marker).await {
                Err(Failure(Reason::UnknownTopic | Reason::UnknownQueue, _)) => Ok(()),
                written => written,
            }
        })
        .await
    }

    /// Ends a group's pending offsets (`until_done`).
    async fn end_offsets(&self, group: &str, producer_id: i64, commit: bool) -> bool {
        let what = format!("the transaction's offsets of group {group:?}");
        self.until_done(&what, || self.core.end_txn_offsets(group, producer_id, commit)).await
    }

    /// Runs `step` until it succeeds (true) or the shard stops (false),
    /// `MARKER_RETRY` apart.
    async fn until_done<F: std::future::Future<Output = Result<(), Failure>>>(
        &self,
        what: &str,
        step: impl Fn() -> F,
    ) -> bool {
        loop {
            match step().await {
                Ok(()) => return true,
                Err(error) => {
                    tracing::warn!(what, %error, "ending a transaction failed; retrying");
                    if !self.core.tasks().sleep(MARKER_RETRY).await {
                        return false;
                    }
                }
            }
        }
    }

    /// Stores a transactional id's new state (memory first, so that
    /// concurrent requests see it) and waits until it is replicated.
    async fn store(&self, id: &str, t: Txn) -> Result<(), Failure> {
        let value = self.remember(id, t);
        queues::append_one(self.core.storage(), TXN_STATE, id.as_bytes(), &value, 0).await?;
        self.core.replicated_all().await
    }

    /// Makes `t` the id's state, one version past the current one: its record to store.
    fn remember(&self, id: &str, mut t: Txn) -> Vec<u8> {
        let mut txns = self.txns.borrow_mut();
        t.version = txns.get(id).map_or(0, |current| current.version) + 1;
        let value = serde_json::to_vec(&t).expect("a transaction state serializes");
        txns.insert(id.to_string(), t);
        value
    }

    /// Aborts transactions open past their timeout; snapshots the state.
    async fn tick_loop(self: Rc<Self>) {
        let mut since_snapshot = Duration::ZERO;
        while self.core.tasks().sleep(TIMEOUT_TICK).await {
            let now = self.core.clock().now_ms();
            let expired: Vec<String> = self
                .txns
                .borrow()
                .iter()
                .filter(|(_, t)| t.state == TxnState::Ongoing && now.saturating_sub(t.started_ms) > t.timeout_ms)
                .map(|(id, _)| id.clone())
                .collect();
            for id in expired {
                tracing::info!(id, "a transaction passed its timeout: aborting it and fencing its producer");
                if let Err(error) = self.abort_fenced(&id).await {
                    tracing::warn!(id, %error, "aborting a timed-out transaction failed; will retry");
                }
            }
            since_snapshot += TIMEOUT_TICK;
            if since_snapshot >= SNAPSHOT_EVERY {
                since_snapshot = Duration::ZERO;
                if let Err(error) = self.snapshot().await {
                    tracing::error!(%error, "snapshotting transaction states failed");
                }
            }
        }
    }

    async fn snapshot(&self) -> Result<(), StorageError> {
        let all: Vec<(Vec<u8>, Vec<u8>)> = self
            .txns
            .borrow()
            .iter()
            .map(|(id, t)| (id.as_bytes().to_vec(), serde_json::to_vec(t).expect("a transaction state serializes")))
            .collect();
        self.snapshots.take(self.core.storage(), &all).await
    }
}

/// A new transactional id's producer at epoch 0 (nothing stored yet).
fn fresh(producer_id: i64, timeout_ms: u64) -> Txn {
    Txn {
        producer_id,
        epoch: 0,
        timeout_ms,
        state: TxnState::Empty,
        partitions: BTreeSet::new(),
        groups: BTreeSet::new(),
        started_ms: 0,
        version: 0,
    }
}

fn concurrent(id: &str) -> Failure {
    let m = format!("transactional id {id:?} is ending a transaction; retry");
    Failure(Reason::ConcurrentTransactions, m)
}
