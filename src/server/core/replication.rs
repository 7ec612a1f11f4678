//! Cluster mode, on a leader's shard: how far each follower holds this
//! shard's log durably, the committed end that follows from it, and the wait
//! of a produce for it (sync replication). The followers' fetches feed it;
//! the storage's commit gate keeps reads below the committed end.

use super::failure::Failure;
use crate::protocol::ErrorCode;
use ringmq_shards::{Shard, Signal};
use std::cell::RefCell;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// When a produce is acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplicationMode {
    /// Once the leader and `min_insync - 1` in-sync followers hold it durably
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
    pub min_insync: usize,
    /// A follower whose last fetch is older than this leaves the in-sync set.
    pub lag_max: Duration,
    /// Longest a sync produce waits for its followers.
    pub ack_timeout: Duration,
}

/// A node's place in its broker group, decided by the control plane before
/// the shards start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterRole {
    pub group: String,
    pub node: String,
    /// The leader epoch this role belongs to.
    pub epoch: u64,
    pub replication: ReplicationConfig,
    pub lead: Lead,
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
    followers: RefCell<HashMap<String, Progress>>,
    committed: std::cell::Cell<u64>,
    /// The committed end moved.
    advanced: Signal,
}

/// One follower's progress on this shard.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    /// Everything before this is durable on the follower.
    pub durable_end: u64,
    pub last_fetch: Instant,
    /// It reached the committed end since it last fell behind: it counts
    /// toward the committed end (a follower still catching up would hold every ack back).
    pub in_sync: bool,
}

impl Replication {
    /// Leads `group` in `epoch`; the log up to `committed` counts as committed.
    pub fn new(config: ReplicationConfig, group: String, epoch: u64, committed: u64) -> Self {
        Replication {
            config,
            group,
            epoch,
            followers: RefCell::default(),
            committed: std::cell::Cell::new(committed),
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

    /// A follower of this group and epoch fetched from `durable_end`: notes
    /// it and moves the committed end (and the storage's commit gate) if it can.
    pub fn fetched(&self, storage: &Shard, follower: &str, durable_end: u64) {
        let now = Instant::now();
        {
            let mut followers = self.followers.borrow_mut();
            let start = Progress { durable_end, last_fetch: now, in_sync: false };
            let p = followers.entry(follower.to_string()).or_insert(start);
            let lapsed = now.duration_since(p.last_fetch) > self.config.lag_max;
            let in_sync = (p.in_sync && !lapsed) || durable_end >= self.committed.get();
            if in_sync != p.in_sync {
                tracing::info!(group = %self.group, follower, in_sync, durable_end, "follower's in-sync state changed");
            }
            *p = Progress { durable_end: durable_end.max(p.durable_end), last_fetch: now, in_sync };
        }
        self.advance(storage, now);
    }

    /// The committed end: what the leader and its in-sync followers hold
    /// durably, as long as at least `min_insync` replicas are in sync.
    fn advance(&self, storage: &Shard, now: Instant) {
        let (_, _, leader_durable) = storage.log_positions();
        let followers = self.followers.borrow();
        let in_sync: Vec<u64> = followers
            .values()
            .filter(|p| p.in_sync && now.duration_since(p.last_fetch) <= self.config.lag_max)
            .map(|p| p.durable_end)
            .collect();
        if in_sync.len() + 1 < self.config.min_insync {
            return;
        }
        let committed = in_sync.into_iter().fold(leader_durable, u64::min);
        if committed > self.committed.get() {
            self.committed.set(committed);
            if self.config.mode == ReplicationMode::Sync {
                storage.commit_to(Some(committed));
            }
            self.advanced.notify();
        }
    }

    /// Waits until the log up to `end` is committed (sync mode; async
    /// returns at once). Fails after `ack_timeout` with NotEnoughReplicas:
    /// the batch is stored on the leader, and replicated once followers return.
    pub async fn wait_committed(&self, storage: &Shard, end: u64) -> Result<(), Failure> {
        if self.config.mode == ReplicationMode::Async {
            return Ok(());
        }
        let deadline = Instant::now() + self.config.ack_timeout;
        loop {
            self.advance(storage, Instant::now());
            if self.committed.get() >= end {
                return Ok(());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                let m = format!(
                    "the batch is stored on the leader but fewer than {} replicas of broker group {:?} hold it after {:?}; \
                     its outcome is unknown until followers catch up (a retry may store it twice)",
                    self.config.min_insync, self.group, self.config.ack_timeout
                );
                return Err(Failure(ErrorCode::NotEnoughReplicas, m));
            }
            // A follower's fetch moves the committed end; recheck at least every lag_max for expiries.
            self.advanced.wait_for(left.min(self.config.lag_max)).await;
        }
    }
}
