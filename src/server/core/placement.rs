//! Cluster mode: where every topic's queues live over the broker groups, and
//! where each group's shards are reached. The control plane keeps both in
//! etcd and publishes them as a `ClusterView`; each leader's shard 0 turns
//! the view's topics into its group's metadata (queues of other groups are
//! named, not stored), and metadata answers number the shards of the whole
//! cluster: the groups' shards one after another, groups by name.

use super::context::Core;
use super::failure::Failure;
use super::failure::Reason;
use super::metadata::{ClientView, Home};
use super::topic_configs::{ConfigChange, TopicConfigs};
use super::topics::NewTopic;
use crate::protocol::coordinator_of;
use std::collections::BTreeMap;
use std::sync::Arc;
use tokio::sync::{oneshot, watch};

/// A group's retry and dead-letter topics: one queue in every broker group,
/// so that each group's send-backs land in its own queue.
const PER_GROUP_PREFIXES: [&str; 2] = ["%RETRY%", "%DLQ%"];

/// Where one queue lives: a shard of a broker group.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub struct Place {
    #[serde(alias = "group")]
    pub broker_group: String,
    pub shard: u32,
}

/// A topic as etcd stores it.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct PlacedTopic {
    pub flush: u8,
    pub queues: Vec<Place>,
    /// The configs it set for itself.
    #[serde(default, skip_serializing_if = "TopicConfigs::is_empty")]
    pub configs: TopicConfigs,
    /// The etcd revision that created it (0 until read back): a topic deleted
    /// and created again under its name is a new topic, with new storage.
    #[serde(skip)]
    pub created: i64,
    /// Its queues on their way to another broker group, by queue number.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub moves: BTreeMap<u32, Move>,
}

/// A queue on its way to another place. While it is not `frozen` its
/// place serves it and the target copies it; once frozen its place takes
/// no appends, and the switch (one compare-and-swap of the topic's key)
/// makes `to` its place and removes the move.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Move {
    pub to: Place,
    #[serde(default)]
    pub frozen: bool,
}

/// One queue's load as its leader reports it (what `cluster rebalance` evens out).
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct QueueLoad {
    /// Bytes it holds (estimated from sampled batches).
    pub bytes: u64,
    /// Bytes produced to it per second, over the last report's interval.
    pub bytes_per_sec: f64,
}

/// A shard's report: its queues' loads by "topic/queue".
pub type ShardLoad = BTreeMap<String, QueueLoad>;

/// A queue moving between broker groups, by cluster-wide shard indexes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueMoving {
    pub topic: String,
    pub queue: u32,
    pub from: u32,
    pub to: u32,
}

/// One broker group: how many shards each of its nodes runs and where its
/// leader's shard 0 listens (None while it has no leader).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupShards {
    pub broker_group: String,
    pub shards: u32,
    pub leader: Option<String>,
}

/// The cluster as etcd last said: every group (by name) and every topic.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClusterView {
    pub groups: Vec<GroupShards>,
    pub topics: BTreeMap<String, PlacedTopic>,
    /// The etcd revision this view was read at.
    pub revision: i64,
    /// The cluster's id (None until the first node made it).
    pub cluster_id: Option<String>,
}

impl ClusterView {
    /// The cluster-wide index of `place`'s shard, if its group is known.
    pub fn global(&self, place: &Place) -> Option<u32> {
        let mut base = 0;
        for g in &self.groups {
            if g.broker_group == place.broker_group {
                return (place.shard < g.shards).then_some(base + place.shard);
            }
            base += g.shards;
        }
        None
    }

    /// The place of the cluster-wide shard `index`.
    pub fn place_of(&self, mut index: u32) -> Option<Place> {
        for g in &self.groups {
            if index < g.shards {
                return Some(Place { broker_group: g.broker_group.clone(), shard: index });
            }
            index -= g.shards;
        }
        None
    }

    pub fn total_shards(&self) -> u32 {
        self.groups.iter().map(|g| g.shards).sum()
    }

    /// Every shard's client address, by cluster-wide index: shard k of a
    /// group at its leader's port + k; empty while the group has no leader.
    pub fn shard_addrs(&self) -> Vec<String> {
        let mut addrs = Vec::new();
        for g in &self.groups {
            let leader = g.leader.as_deref().and_then(|a| a.parse::<std::net::SocketAddr>().ok());
            for k in 0..g.shards {
                let addr = leader.map(|mut a| {
                    a.set_port(a.port() + k as u16);
                    a.to_string()
                });
                addrs.push(addr.unwrap_or_default());
            }
        }
        addrs
    }
}

/// Places a new topic's queues over the groups' shards, round robin from a
/// shard picked by the name (so that small topics do not all start on the
/// same one). A group's retry and dead-letter topics get one queue per group.
pub fn place(name: &str, queues: u32, groups: &[GroupShards]) -> Vec<Place> {
    let hash = super::metadata::spread_hash(name);
    if PER_GROUP_PREFIXES.iter().any(|p| name.starts_with(p)) {
        let shard_of = |g: &GroupShards| hash % g.shards.max(1);
        return groups.iter().map(|g| Place { broker_group: g.broker_group.clone(), shard: shard_of(g) }).collect();
    }
    let all: Vec<Place> = groups
        .iter()
        .flat_map(|g| (0..g.shards).map(|shard| Place { broker_group: g.broker_group.clone(), shard }))
        .collect();
    if all.is_empty() {
        return Vec::new();
    }
    let first = hash as usize % all.len();
    (0..queues as usize).map(|q| all[(first + q) % all.len()].clone()).collect()
}

/// What a leader's shard 0 asks of the control plane.
#[derive(Debug)]
pub enum PlacementAsk {
    /// Store a new topic in etcd; answered once every group that leads has applied it.
    Create {
        topic: NewTopic,
        reply: oneshot::Sender<Result<(), Failure>>,
    },
    Delete {
        name: String,
        reply: oneshot::Sender<Result<(), Failure>>,
    },
    /// Give a topic more queues in etcd.
    AddQueues {
        name: String,
        queues: u32,
        reply: oneshot::Sender<Result<(), Failure>>,
    },
    /// Change a topic's configs in etcd.
    Configure {
        name: String,
        changes: Vec<ConfigChange>,
        reply: oneshot::Sender<Result<(), Failure>>,
    },
    /// Start moving a topic's queue to `to`, or (None) cancel its move
    /// before the switch; answered once every group that leads applied it.
    Move {
        topic: String,
        queue: u32,
        to: Option<Place>,
        reply: oneshot::Sender<Result<(), Failure>>,
    },
    /// A step of a move, asked by the target's leader (`created` tells the
    /// topic's incarnation); answered once stored.
    MoveStep {
        step: MoveStep,
        topic: String,
        created: i64,
        queue: u32,
        to: Place,
        reply: oneshot::Sender<Result<(), Failure>>,
    },
    /// Kafka's preferred-leader election for a broker group.
    ElectPreferred {
        broker_group: String,
        reply: oneshot::Sender<Result<PreferredElection, Failure>>,
    },
    /// This group's metadata now holds the view of this etcd revision.
    Applied(i64),
    /// A leader's shard reports its queues' loads.
    Load {
        shard: u32,
        loads: ShardLoad,
    },
}

/// The steps of a move its target takes in etcd.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MoveStep {
    /// The copy caught up: the source stops taking appends.
    Freeze,
    /// Everything is copied and committed here: the target owns the queue.
    Switch,
    /// Frozen with a Kafka transaction open at the source (begun before the
    /// freeze took effect): the source takes appends again, so that its
    /// marker can be written, and the copy catches up once more.
    Thaw,
}

impl MoveStep {
    pub fn name(self) -> &'static str {
        match self {
            MoveStep::Freeze => "freeze",
            MoveStep::Switch => "switch",
            MoveStep::Thaw => "thaw",
        }
    }
}

/// What a moving queue's copy does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CopyStep {
    /// Read on from where the copy ends.
    Read,
    /// Caught up with what the source committed: ask the freeze.
    Freeze,
    /// Copied to the frozen end: once committed here, switch.
    Switch,
    /// Frozen with a Kafka transaction open at the source: ask the thaw.
    Thaw,
}

/// The copy's next step, having copied up to `next` from a read that ended
/// at `read_end` (what the source had committed), the source's end final
/// at `frozen_end` once the freeze took effect there, `open_txn` while a
/// Kafka transaction is open in it; `froze`: the freeze was asked already.
/// A queue switches with no transaction open: its marker could not reach
/// the new owner from the transaction's coordinator.
pub fn copy_step(next: u64, read_end: u64, frozen_end: Option<u64>, open_txn: bool, froze: bool) -> CopyStep {
    match frozen_end {
        Some(_) if open_txn => CopyStep::Thaw,
        Some(end) if next >= end => CopyStep::Switch,
        Some(_) => CopyStep::Read,
        None if !froze && !open_txn && next >= read_end => CopyStep::Freeze,
        None => CopyStep::Read,
    }
}

/// What a preferred-leader election did to a broker group, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PreferredElection {
    /// Its preferred node leads already, or it has none: nothing to do.
    NotNeeded(String),
    /// Its preferred node cannot lead now.
    Unavailable(String),
    /// Its leader was asked to hand the lead to its preferred node.
    Requested(String),
}

/// The shards' side of the placement: the view the control plane publishes
/// and the way to ask it for changes.
#[derive(Clone)]
pub struct PlacementLink {
    pub view: watch::Receiver<ClusterView>,
    pub ask: Arc<dyn Fn(PlacementAsk) + Send + Sync>,
}

impl std::fmt::Debug for PlacementLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PlacementLink").field("view", &*self.view.borrow()).finish_non_exhaustive()
    }
}

impl PlacementLink {
    /// Creates a topic through etcd.
    pub async fn create(&self, topic: NewTopic) -> Result<(), Failure> {
        self.change(|reply| PlacementAsk::Create { topic, reply }).await
    }

    /// Deletes a topic through etcd.
    pub async fn delete(&self, name: &str) -> Result<(), Failure> {
        self.change(|reply| PlacementAsk::Delete { name: name.to_string(), reply }).await
    }

    /// Changes a topic's configs through etcd.
    pub async fn configure(&self, name: &str, changes: Vec<ConfigChange>) -> Result<(), Failure> {
        self.change(|reply| PlacementAsk::Configure { name: name.to_string(), changes, reply }).await
    }

    /// Gives a topic more queues through etcd.
    pub async fn add_queues(&self, name: &str, queues: u32) -> Result<(), Failure> {
        self.change(|reply| PlacementAsk::AddQueues { name: name.to_string(), queues, reply }).await
    }

    /// Starts moving a topic's queue to `to`, or (None) cancels its move.
    pub async fn move_queue(&self, topic: &str, queue: u32, to: Option<Place>) -> Result<(), Failure> {
        self.change(|reply| PlacementAsk::Move { topic: topic.to_string(), queue, to, reply }).await
    }

    /// Takes a step of a move this group is the target of.
    pub async fn move_step(
        &self,
        step: MoveStep,
        topic: &str,
        created: i64,
        queue: u32,
        to: Place,
    ) -> Result<(), Failure> {
        let topic = topic.to_string();
        self.change(|reply| PlacementAsk::MoveStep { step, topic, created, queue, to, reply }).await
    }

    /// Reports a shard's queue loads (stored by the control plane while this node leads).
    pub fn report_load(&self, shard: u32, loads: ShardLoad) {
        (self.ask)(PlacementAsk::Load { shard, loads });
    }

    /// Asks `broker_group`'s leader to hand the lead to its preferred node.
    pub async fn elect_preferred(&self, broker_group: &str) -> Result<PreferredElection, Failure> {
        let (reply, answer) = oneshot::channel();
        (self.ask)(PlacementAsk::ElectPreferred { broker_group: broker_group.to_string(), reply });
        answer.await.unwrap_or_else(|_| Err(Failure::cluster_unavailable("the control plane stopped")))
    }

    /// Asks the control plane for a topic change and waits for its answer.
    async fn change(
        &self,
        ask: impl FnOnce(oneshot::Sender<Result<(), Failure>>) -> PlacementAsk,
    ) -> Result<(), Failure> {
        let (reply, answer) = oneshot::channel();
        (self.ask)(ask(reply));
        answer.await.unwrap_or_else(|_| Err(Failure::cluster_unavailable("the control plane stopped")))
    }
}

impl Core {
    /// How this node reaches the cluster's placement (cluster mode only).
    pub fn placement(&self) -> Option<&PlacementLink> {
        self.config().cluster.as_ref().map(|c| &c.placement)
    }

    /// This node's broker group ("" on a single node).
    pub(super) fn group(&self) -> &str {
        self.config().cluster.as_ref().map_or("", |c| c.broker_group.as_str())
    }

    /// The cluster's id: a single node's own, a cluster's as etcd last
    /// said (None until its first node made it).
    pub fn cluster_id(&self) -> Option<String> {
        match self.placement() {
            Some(link) => link.view.borrow().cluster_id.clone(),
            None => self.cluster_id.clone(),
        }
    }

    /// Every shard's address, by its index (cluster-wide in a cluster), as
    /// `describe` gives them, without describing any topic.
    pub fn shard_addrs(&self) -> Vec<String> {
        match self.placement() {
            Some(link) => link.view.borrow().shard_addrs(),
            None => self.addrs().to_vec(),
        }
    }

    /// The named topics (all if none named) as clients see them: in a
    /// cluster, every queue on a shard numbered cluster-wide.
    pub fn describe(&self, names: &[String]) -> ClientView {
        let metadata = self.metadata();
        let Some(link) = self.placement() else {
            let shard_of = |h: &Home| if let Home::Here(slot) = h { slot.shard } else { u32::MAX };
            return metadata.describe(self.addrs().to_vec(), shard_of, names);
        };
        let view = link.view.borrow();
        let shard_of = |h: &Home| {
            let place = match h {
                Home::Here(slot) | Home::Leaving { slot, .. } => {
                    &Place { broker_group: self.group().to_string(), shard: slot.shard }
                }
                Home::Group(place) | Home::Arriving { from: place, .. } => place,
            };
            view.global(place).unwrap_or(u32::MAX)
        };
        metadata.describe(view.shard_addrs(), shard_of, names)
    }

    /// Every queue moving between broker groups now, as etcd last said:
    /// its topic and number, and the cluster-wide shards it moves from and
    /// to (empty on a single node).
    pub fn moving_queues(&self) -> Vec<QueueMoving> {
        let Some(link) = self.placement() else { return Vec::new() };
        let view = link.view.borrow();
        let mut moving = Vec::new();
        for (name, topic) in &view.topics {
            for (queue, m) in &topic.moves {
                let from = topic.queues.get(*queue as usize).and_then(|p| view.global(p));
                if let (Some(from), Some(to)) = (from, view.global(&m.to)) {
                    moving.push(QueueMoving { topic: name.clone(), queue: *queue, from, to });
                }
            }
        }
        moving
    }

    /// The place of the cluster-wide shard `index` (None on a single node or past the last).
    pub fn place_of_shard(&self, index: u32) -> Option<Place> {
        self.placement()?.view.borrow().place_of(index)
    }

    /// This node's shard that coordinates consumer group `group`: one shard
    /// of the whole cluster does (NotLeader when it is another broker group's).
    pub fn coordinator(&self, group: &str) -> Result<usize, Failure> {
        let Some(link) = self.placement() else { return Ok(coordinator_of(group, self.shards())) };
        let view = link.view.borrow();
        let at = coordinator_of(group, view.total_shards() as usize) as u32;
        match view.place_of(at) {
            Some(place) if place.broker_group == self.group() => Ok(place.shard as usize),
            Some(place) => Err(Failure(
                Reason::NotLeader,
                format!(
                    "consumer group {group:?} is coordinated by broker group {:?}; refresh metadata",
                    place.broker_group
                ),
            )),
            None => Err(Failure(Reason::NotLeader, "no broker group is known yet; refresh metadata".into())),
        }
    }

    /// The first queue of `topic` this broker group holds (a group's retry
    /// and dead-letter topics hold one in every group).
    pub fn home_queue(&self, topic: &str) -> Result<u32, Failure> {
        let metadata = self.metadata();
        let t = metadata.topics.get(topic).ok_or_else(|| Failure::unknown_topic(topic))?;
        let here = t.queues.iter().position(|h| matches!(h, Home::Here(_)));
        here.map(|q| q as u32).ok_or_else(|| {
            Failure(Reason::NotLeader, format!("topic {topic:?} has no queue in broker group {:?}", self.group()))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn groups() -> Vec<GroupShards> {
        let g = |name: &str, shards, leader: Option<&str>| GroupShards {
            broker_group: name.into(),
            shards,
            leader: leader.map(str::to_string),
        };
        vec![g("a", 2, Some("127.0.0.1:9000")), g("b", 1, None)]
    }

    #[test]
    fn queues_spread_over_every_groups_shards() {
        let placed = place("orders", 6, &groups());
        assert_eq!(placed.len(), 6);
        for shard in [("a", 0), ("a", 1), ("b", 0)] {
            let n = placed.iter().filter(|p| (p.broker_group.as_str(), p.shard) == shard).count();
            assert_eq!(n, 2, "{shard:?} holds a third of the queues: {placed:?}");
        }
        let retry = place("%RETRY%billing", 1, &groups());
        assert_eq!(retry.iter().map(|p| p.broker_group.as_str()).collect::<Vec<_>>(), ["a", "b"], "one per group");
        assert!(place("x", 3, &[]).is_empty());
    }

    #[test]
    fn a_copy_freezes_once_caught_up_without_a_transaction_and_switches_at_the_frozen_end() {
        use CopyStep::*;
        assert_eq!(copy_step(5, 9, None, false, false), Read, "behind");
        assert_eq!(copy_step(9, 9, None, false, false), Freeze, "caught up");
        assert_eq!(copy_step(9, 9, None, true, false), Read, "a transaction is open: not yet");
        assert_eq!(copy_step(9, 12, None, false, true), Read, "asked, not in effect yet");
        assert_eq!(copy_step(10, 9, Some(12), false, true), Read, "the tail to copy");
        assert_eq!(copy_step(12, 12, Some(12), false, true), Switch);
        assert_eq!(copy_step(12, 12, Some(12), true, true), Thaw, "frozen with a transaction open");
    }

    #[test]
    fn cluster_wide_shards_are_the_groups_shards_in_turn() {
        let view = ClusterView { groups: groups(), ..ClusterView::default() };
        assert_eq!(view.total_shards(), 3);
        assert_eq!(view.global(&Place { broker_group: "b".into(), shard: 0 }), Some(2));
        assert_eq!(view.global(&Place { broker_group: "b".into(), shard: 1 }), None);
        assert_eq!(view.global(&Place { broker_group: "c".into(), shard: 0 }), None);
        assert_eq!(view.place_of(1), Some(Place { broker_group: "a".into(), shard: 1 }));
        assert_eq!(view.place_of(3), None);
        assert_eq!(view.shard_addrs(), ["127.0.0.1:9000", "127.0.0.1:9001", ""]);
    }
}
