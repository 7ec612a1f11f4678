//! Cluster mode, on a leader's shard: how far each follower holds this
//! shard's log durably, the committed end that follows from it, and the wait
//! of a produce for it (sync replication). The followers' fetches feed it;
//! the storage's commit gate keeps reads below the committed end. The log
//! is a [`ReplicatedLog`] and the time is passed in, so the cluster
//! simulator runs this same code against its model of a shard.

use super::failure::Failure;
use super::failure::Reason;
use super::metrics::Samples;
use ringmq_shards::{Shard, Signal};
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

/// How often a waiting produce rechecks the committed end (the in-sync set
/// changes on another thread).
const ISR_RECHECK: Duration = Duration::from_millis(50);

/// What replication needs of a shard's log.
pub trait ReplicatedLog {
    /// Where the log's written and durable (synced) parts end.
    fn ends(&self) -> (u64, u64);
    /// Readers see the log only up to `committed` from now on.
    fn commit_to(&self, committed: u64);
}

impl ReplicatedLog for Shard {
    fn ends(&self) -> (u64, u64) {
        let (_, written, synced) = self.log_positions();
        (written, synced)
    }

    fn commit_to(&self, committed: u64) {
        Shard::commit_to(self, Some(committed));
    }
}

/// When a produce is acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplicationMode {
    /// Once the leader and `insync_min - 1` in-sync followers hold it durably
    /// (RocketMQ SYNC_MASTER, Kafka acks=all); consumers read only that far.
    Sync,
    /// Once the leader holds it durably; followers catch up behind it
    /// (ASYNC_MASTER): a fail-over loses what they had not fetched.
    Async,
}

/// A broker group's replication settings, the same on every node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicationConfig {
    pub mode: ReplicationMode,
    /// Replicas (the leader counted) that must hold a produce durably before a sync ack.
    pub insync_min: usize,
    /// A follower whose last fetch is older than this leaves the in-sync set.
    pub lag_max: Duration,
    /// Longest a sync produce waits for its followers.
    pub ack_timeout: Duration,
}

/// A node's place in its broker group, decided by the control plane before
/// the shards start.
#[derive(Debug, Clone)]
pub struct ClusterRole {
    pub broker_group: String,
    pub node: String,
    /// The leader epoch this role belongs to.
    pub epoch: u64,
    pub replication: ReplicationConfig,
    pub lead: Lead,
    /// The group's in-sync set, shared with the control plane.
    pub isr: IsrLink,
    /// Where the cluster's topics and groups are, from the control plane.
    pub placement: super::placement::PlacementLink,
    /// The cluster's users, ACLs and quotas, from the control plane.
    pub accounts: super::accounts::AccountsLink,
}

/// A leader's shards and its control plane share the in-sync set: the
/// shards say when a follower comes into or falls out of sync on them, the
/// control plane stores the set in etcd and publishes what etcd confirmed.
#[derive(Clone)]
pub struct IsrLink {
    /// The followers etcd lists as in sync (the leader not included).
    pub confirmed: Arc<RwLock<BTreeSet<String>>>,
    pub report: InSyncReport,
    /// Set by the control plane the moment this node's role is lost.
    pub deposed: Arc<std::sync::atomic::AtomicBool>,
    /// The newest report of each shard the control plane has acted on
    /// (`FollowerReport::seq`; set after `confirmed` is).
    pub heard: Arc<RwLock<BTreeMap<usize, u64>>>,
}

/// What a leader's shard says of one of its followers.
pub type InSyncReport = Arc<dyn Fn(FollowerReport) + Send + Sync>;

/// One follower as one leader shard sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FollowerReport {
    pub shard: usize,
    /// Counts the reports (of every shard of the process: each shard's increase).
    pub seq: u64,
    pub follower: String,
    pub in_sync: bool,
    /// The leader's written end minus the follower's durable end.
    pub lag_bytes: u64,
    pub since_fetch: Duration,
}

impl std::fmt::Debug for IsrLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IsrLink").field("confirmed", &self.confirmed).finish_non_exhaustive()
    }
}

impl IsrLink {
    /// The followers etcd lists as in sync now.
    pub fn confirmed(&self) -> BTreeSet<String> {
        self.confirmed.read().expect("no thread panics holding it").clone()
    }

    /// The newest report of `shard` the control plane has acted on (0: none).
    pub fn heard(&self, shard: usize) -> u64 {
        self.heard.read().expect("no thread panics holding it").get(&shard).copied().unwrap_or(0)
    }
}

/// Who leads the group in the role's epoch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lead {
    /// This node: clients produce here; the other members follow (each is
    /// known once it fetches).
    Leader,
    /// Another node: this one mirrors its shards from `addr` (shard 0's;
    /// shard k at port + k), each shard's log first cut back to `cuts[k]`.
    Follower { leader: String, addr: std::net::SocketAddr, cuts: Vec<Option<u64>> },
}

/// The leader's view of one shard's followers.
pub struct Replication {
    config: ReplicationConfig,
    group: String,
    epoch: u64,
    shard: usize,
    isr: IsrLink,
    started: Instant,
    /// By name (ordered: reports go out in the same order every run).
    followers: RefCell<BTreeMap<String, Progress>>,
    committed: std::cell::Cell<u64>,
    /// The log's durable end when this epoch began: the log up to there may
    /// end in what an earlier epoch wrote and no in-sync follower holds...
    inherited_end: u64,
    /// ...until every member of the set held it (`settle`); a follower
    /// joins the set only holding it.
    settled: std::cell::Cell<bool>,
    /// The committed end moved.
    advanced: Signal,
}

/// Reports sent so far by every leader shard of this process: a shard's
/// reports count up across its roles and epochs, so what the control plane
/// heard of an earlier one never passes for a later one's.
static REPORTS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// One follower's progress on this shard.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    /// Everything before this is durable on the follower.
    pub durable_end: u64,
    pub last_fetch: Instant,
    /// The leader's written end when the follower last fetched...
    pub fetch_end: u64,
    /// ...and the last time a fetch showed it held everything up to the
    /// previous one's: a follower that fetches but does not keep up (its log
    /// diverged, its disk is slow) falls out of sync as one that stopped does.
    pub caught_up: Instant,
    /// It reached the committed end since it last fell behind: it counts
    /// toward the committed end (a follower still catching up would hold every ack back).
    pub in_sync: bool,
    /// The newest report that said it is in sync: until the control plane
    /// has acted on it, etcd may come to list it, so it counts.
    pub said_in_sync: Option<u64>,
}

impl Progress {
    fn new(durable_end: u64, at: Instant) -> Progress {
        Progress { durable_end, last_fetch: at, fetch_end: 0, caught_up: at, in_sync: false, said_in_sync: None }
    }
}

impl Replication {
    /// Shard `shard` of the leader of `role`'s group and epoch. Nothing
    /// counts as committed until the followers etcd lists hold it: the log's
    /// tail may hold what an earlier epoch's leader wrote and never got onto
    /// every in-sync follower, and an ack for it (a retried batch is
    /// recognised and acknowledged where it lies) must wait until they do,
    /// or the next election may pick one that lacks it.
    pub fn new(role: &ClusterRole, shard: usize, log: &impl ReplicatedLog, now: Instant) -> Self {
        let (_, inherited_end) = log.ends();
        Replication {
            config: role.replication.clone(),
            group: role.broker_group.clone(),
            epoch: role.epoch,
            shard,
            isr: role.isr.clone(),
            started: now,
            followers: RefCell::default(),
            committed: std::cell::Cell::new(0),
            inherited_end,
            settled: std::cell::Cell::new(false),
            advanced: Signal::default(),
        }
    }

    pub fn group(&self) -> &str {
        &self.group
    }

    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    pub fn committed(&self) -> u64 {
        self.committed.get()
    }

    /// True once the control plane says this node no longer leads (its
    /// lease lapsed or a later epoch began): it must not take or serve anything.
    /// The replicas a sync produce is held on before its ack (the leader
    /// and the followers etcd lists in sync); None under async acks.
    pub fn in_sync_for_acks(&self) -> Option<usize> {
        (self.config.mode == ReplicationMode::Sync).then(|| self.isr.confirmed().len() + 1)
    }

    pub fn deposed(&self) -> bool {
        self.isr.deposed.load(std::sync::atomic::Ordering::Acquire)
    }

    /// A follower of this group and epoch fetched from `durable_end`: notes
    /// it and moves the committed end (and the storage's commit gate) if it can.
    pub fn fetched(&self, log: &impl ReplicatedLog, follower: &str, durable_end: u64, now: Instant) {
        let (written_end, _) = log.ends();
        {
            let mut followers = self.followers.borrow_mut();
            let p = followers.entry(follower.to_string()).or_insert(Progress::new(durable_end, now));
            let caught_up = if durable_end >= p.fetch_end { now } else { p.caught_up };
            let in_sync = if p.in_sync {
                now.duration_since(caught_up) <= self.config.lag_max
            } else {
                durable_end >= self.committed.get().max(self.inherited_end) && durable_end >= p.fetch_end
            };
            let changed = in_sync != p.in_sync;
            let durable_end = durable_end.max(p.durable_end);
            let said_in_sync = p.said_in_sync;
            *p = Progress { durable_end, last_fetch: now, fetch_end: written_end, caught_up, in_sync, said_in_sync };
            if changed {
                tracing::info!(group = %self.group, shard = self.shard, follower, in_sync, durable_end, "follower's in-sync state changed");
                self.report(log, follower, p, now);
            }
        }
        self.advance(log, now);
    }

    /// Tells the control plane how `follower` does; one said to be in sync
    /// counts until the control plane has acted on it.
    fn report(&self, log: &impl ReplicatedLog, follower: &str, p: &mut Progress, now: Instant) {
        let (written_end, _) = log.ends();
        let seq = REPORTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        if p.in_sync {
            p.said_in_sync = Some(seq);
        }
        (self.isr.report)(FollowerReport {
            shard: self.shard,
            seq,
            follower: follower.to_string(),
            in_sync: p.in_sync,
            lag_bytes: written_end.saturating_sub(p.durable_end),
            since_fetch: now.duration_since(p.last_fetch),
        });
    }

    /// Followers that did not keep up (stopped fetching, or fetch without
    /// catching up) for `lag_max` fall out of sync here,
    /// and so do members of the stored in-sync set that never fetched in this
    /// epoch; then every follower's state is reported again, so the control
    /// plane's view heals after anything it missed (called periodically).
    pub fn expire(&self, log: &impl ReplicatedLog, now: Instant) {
        let mut fell = Vec::new();
        {
            let mut followers = self.followers.borrow_mut();
            for (name, p) in followers.iter_mut() {
                if p.in_sync && now.duration_since(p.caught_up) > self.config.lag_max {
                    p.in_sync = false;
                    fell.push((name.clone(), p.durable_end));
                }
            }
            if now.duration_since(self.started) > self.config.lag_max {
                let silent: Vec<String> =
                    self.isr.confirmed().into_iter().filter(|n| !followers.contains_key(n)).collect();
                for name in silent {
                    followers.insert(name.clone(), Progress::new(0, self.started));
                    fell.push((name, 0));
                }
            }
        }
        for (name, durable_end) in fell {
            tracing::info!(group = %self.group, shard = self.shard, follower = %name, durable_end, "follower fell out of sync");
        }
        for (name, p) in self.followers.borrow_mut().iter_mut() {
            self.report(log, name, p, now);
        }
        self.advance(log, now);
    }

    /// The committed end: what the leader and the followers etcd lists as in
    /// sync hold durably, as long as they make at least `insync_min` replicas.
    /// A listed follower counts until etcd drops it, even while it lags: so
    /// everything committed is on every node that may be elected.
    fn advance(&self, log: &impl ReplicatedLog, now: Instant) {
        if self.isr.confirmed().len() + 1 < self.config.insync_min {
            return;
        }
        let committed = self.held_by_the_set(log);
        if committed > self.committed.get() {
            self.committed.set(committed);
            if self.config.mode == ReplicationMode::Sync {
                log.commit_to(committed);
            }
            self.left_behind(log, committed, now);
            self.advanced.notify();
        }
    }

    /// Followers in sync that the committed end passed without them are out
    /// of sync until they catch up again. The end passes one only once it
    /// no longer counts: not listed, and the control plane acted on its
    /// report without adding it (it was not registered then). Kept in sync,
    /// the next periodic report would say so again and the control plane
    /// could list a node lacking acknowledged writes, electable.
    fn left_behind(&self, log: &impl ReplicatedLog, committed: u64, now: Instant) {
        for (name, p) in self.followers.borrow_mut().iter_mut() {
            if p.in_sync && p.durable_end < committed {
                p.in_sync = false;
                tracing::info!(group = %self.group, shard = self.shard, follower = %name, durable_end = p.durable_end, committed, "the committed end passed a follower: out of sync");
                self.report(log, name, p, now);
            }
        }
    }

    /// What the leader holds durably and every follower that may be in the
    /// set does: those the control plane publishes (what etcd lists, and the
    /// members of a write whose outcome it does not know), and those this
    /// shard said are in sync in a report the control plane has not acted
    /// on yet, which may add them (Kafka's "maximal ISR", KIP-841).
    /// Counting only the listed ones let the committed end pass a follower
    /// while its joining was on the way: listed, it lacked acknowledged
    /// messages, and could be elected.
    fn held_by_the_set(&self, log: &impl ReplicatedLog) -> u64 {
        let (_, leader_durable) = log.ends();
        let followers = self.followers.borrow();
        let durable = |name: &String| followers.get(name).map_or(0, |p| p.durable_end);
        let heard = self.isr.heard(self.shard);
        let joining = followers.values().filter(|p| p.said_in_sync.is_some_and(|seq| seq > heard));
        let joining = joining.map(|p| p.durable_end);
        self.isr.confirmed().iter().map(durable).chain(joining).fold(leader_durable, u64::min)
    }

    /// Replication lag per follower, the in-sync set's size and the epoch.
    pub fn collect(&self, log: &impl ReplicatedLog, out: &mut Samples) {
        let (written_end, _) = log.ends();
        let group = self.group.as_str();
        for (name, p) in self.followers.borrow().iter() {
            let labels = [("broker_group", group), ("follower", name.as_str())];
            let lag = written_end.saturating_sub(p.durable_end) as f64;
            out.gauge(
                "ringmq_replication_lag_bytes",
                "Bytes a follower's durable log is behind this leader shard's written end.",
                &labels,
                lag,
            );
            let in_sync = f64::from(u8::from(p.in_sync));
            out.gauge(
                "ringmq_replication_follower_in_sync",
                "1 while the follower is in sync on this shard.",
                &labels,
                in_sync,
            );
        }
        let isr = (self.isr.confirmed().len() + 1) as f64;
        out.gauge(
            "ringmq_replication_isr_size",
            "Replicas in the group's in-sync set as etcd lists it (the leader included).",
            &[("broker_group", group)],
            isr,
        );
        out.gauge(
            "ringmq_replication_leader_epoch",
            "The epoch this node leads its group in.",
            &[("broker_group", group)],
            self.epoch as f64,
        );
        let committed = self.committed.get() as f64;
        out.gauge(
            "ringmq_replication_committed_position",
            "The log position below which this shard's log is on enough replicas.",
            &[("broker_group", group)],
            committed,
        );
    }

    /// Waits up to `wait` until every node that may be elected holds the
    /// log this leader inherited (sync mode; async reads what the leader
    /// holds). False if one does not yet: readers must not see that log,
    /// for if this leader died now a follower that lacks it could be
    /// elected, and what they read would be gone. (Not the committed end: a
    /// set smaller than `insync_min` takes no produce but still serves what
    /// it holds.)
    pub async fn settle(&self, log: &impl ReplicatedLog, wait: Duration) -> bool {
        if self.config.mode == ReplicationMode::Async || self.settled.get() {
            return true;
        }
        let deadline = Instant::now() + wait;
        loop {
            if self.held_by_the_set(log) >= self.inherited_end {
                self.settled.set(true);
                return true;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || self.deposed() {
                return false;
            }
            self.advanced.wait_for(left.min(ISR_RECHECK)).await;
        }
    }

    /// Waits until the log up to `end` is committed (sync mode; async
    /// returns at once). Fails after `ack_timeout` with NotEnoughReplicas:
    /// the batch is stored on the leader, and replicated once followers return.
    pub async fn wait_committed(&self, log: &impl ReplicatedLog, end: u64) -> Result<(), Failure> {
        if self.config.mode == ReplicationMode::Async {
            return Ok(());
        }
        let deadline = Instant::now() + self.config.ack_timeout;
        loop {
            self.advance(log, Instant::now());
            if self.committed.get() >= end {
                return Ok(());
            }
            if self.deposed() {
                let m = "this node stopped leading before the batch was replicated; it is stored here, its outcome \
                         unknown (a retry on the new leader is recognised if the batch got there)";
                return Err(Failure(Reason::NotLeader, m.into()));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                let m = format!(
                    "the batch is stored on the leader but fewer than {} replicas of broker group {:?} hold it after {:?}; \
                     its outcome is unknown until followers catch up (a retry may store it twice)",
                    self.config.insync_min, self.group, self.config.ack_timeout
                );
                return Err(Failure(Reason::NotEnoughReplicas, m));
            }
            // A follower's fetch moves the committed end; so may a change of the in-sync set.
            self.advanced.wait_for(left.min(ISR_RECHECK)).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::sync::Mutex;

    /// A log whose written end is durable at once.
    struct Log(Cell<u64>);

    impl ReplicatedLog for Log {
        fn ends(&self) -> (u64, u64) {
            (self.0.get(), self.0.get())
        }

        fn commit_to(&self, _: u64) {}
    }

    /// A leader's role with one replica needed, whose in-sync reports land in `reports`.
    fn role(isr: IsrLink) -> ClusterRole {
        let (_, view) = tokio::sync::watch::channel(Default::default());
        let accounts =
            crate::server::core::accounts::Accounts::new(Default::default(), Default::default(), Default::default());
        ClusterRole {
            broker_group: "g".into(),
            node: "a".into(),
            epoch: 1,
            replication: ReplicationConfig {
                mode: ReplicationMode::Sync,
                insync_min: 1,
                lag_max: Duration::from_secs(10),
                ack_timeout: Duration::from_secs(1),
            },
            lead: Lead::Leader,
            isr,
            placement: crate::server::core::placement::PlacementLink { view, ask: Arc::new(|_| {}) },
            accounts: crate::server::core::accounts::AccountsLink { shared: Arc::new(accounts), ask: Arc::new(|_| {}) },
        }
    }

    #[test]
    fn a_follower_the_committed_end_passed_unlisted_is_reported_out_of_sync_until_it_catches_up() {
        let reports: Arc<Mutex<Vec<FollowerReport>>> = Arc::default();
        let sink = reports.clone();
        let isr = IsrLink {
            confirmed: Arc::default(),
            report: Arc::new(move |r| sink.lock().unwrap().push(r)),
            deposed: Arc::default(),
            heard: Arc::default(),
        };
        let log = Log(Cell::new(10));
        let now = Instant::now();
        let r = Replication::new(&role(isr.clone()), 0, &log, now);
        r.fetched(&log, "b", 10, now);
        r.fetched(&log, "c", 10, now);
        assert_eq!(r.committed(), 10, "both said in sync and hold the log");
        // The control plane acts on both reports but lists only c (b's
        // registration had lapsed when it handled b's).
        let newest = reports.lock().unwrap().iter().map(|r| r.seq).max().unwrap();
        isr.heard.write().unwrap().insert(0, newest);
        isr.confirmed.write().unwrap().insert("c".to_string());
        log.0.set(20);
        r.fetched(&log, "c", 20, now);
        assert_eq!(r.committed(), 20, "b neither listed nor joining: the end passes it");
        r.expire(&log, now);
        let last_of_b = |reports: &[FollowerReport]| reports.iter().rev().find(|r| r.follower == "b").unwrap().in_sync;
        assert!(!last_of_b(&reports.lock().unwrap()), "b lacks 10..20 and must not be listed on a later report");
        r.fetched(&log, "b", 20, now);
        assert!(last_of_b(&reports.lock().unwrap()), "b holds the committed end again: in sync");
    }
}
