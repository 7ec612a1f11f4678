//! The group calls, served on the group's coordinator shard: membership
//! (join, sync, heartbeat, leave), offsets, and queue locks. Joins, syncs and
//! heartbeats park until their answer is ready or their wait ends.

use super::coordinator::ParseError;
use super::coordinator::{Admitted, Coordinator, Formed, JoinRequest, MemberBytes, Refusal, Share};
use super::member_epochs::{Beat, BeatAnswer, GroupView, MemberEpochs, Topics};
use super::queue_locks::QueueLocks;
use crate::protocol::groups::{GroupDescription, GroupListing};
use crate::protocol::messages::{self as msg, Assignment, GroupOffset, Membership, QueueLocking, QueueRef};
use crate::server::core::metadata::Metadata;
use crate::server::core::offsets::Committed;
use crate::server::core::Reason;
use crate::server::core::{Core, Failure};
use ringmq_shards::Signal;
use std::cell::RefCell;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// How often sessions and rebalance deadlines are checked.
const TICK: Duration = Duration::from_millis(50);

/// The protocol type of a consumer-protocol group's members (Kafka's consumers).
const CONSUMER_PROTOCOL: &str = "consumer";

/// A group whose members speak the other of Kafka's two group protocols.
fn mixed(group: &str) -> Failure {
    let m = format!("group {group:?} has members of the other group protocol (classic or consumer); use theirs");
    Failure(Reason::InconsistentGroupProtocol, m)
}

impl From<Refusal> for Failure {
    fn from((code, message): Refusal) -> Self {
        Failure(code, message)
    }
}

/// What a join came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JoinAnswer {
    /// The generation formed.
    Formed(Formed),
    /// A first join: join again with this member id (Kafka's MEMBER_ID_REQUIRED).
    IdRequired(String),
}

/// What a deletion of a group, or of its offsets, came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deletion {
    Deleted,
    /// The group has members (a group is deleted only when empty).
    NotEmpty,
    /// The group has neither members nor offsets here.
    NotFound,
    /// A member holds a queue of the topic whose offsets were to go.
    Subscribed,
}

/// The consumer groups one shard coordinates.
pub struct Groups {
    core: Rc<Core>,
    coordinator: RefCell<Coordinator>,
    /// Groups of Kafka's consumer protocol (broker-side assignment).
    epochs: RefCell<MemberEpochs>,
    /// A group changed: parked joins, syncs and heartbeats look again.
    changed: Signal,
    /// Queue locks of ordered consumers.
    locks: RefCell<QueueLocks>,
}

impl Groups {
    pub fn new(core: Rc<Core>) -> Rc<Groups> {
        Rc::new(Groups {
            core,
            coordinator: RefCell::default(),
            epochs: RefCell::default(),
            changed: Signal::default(),
            locks: RefCell::default(),
        })
    }

    /// Evicts members whose session ran out and ends rebalances past their
    /// deadline, every `TICK`, until the shard stops.
    pub async fn tick_loop(self: Rc<Self>) {
        while self.core.tasks().sleep(TICK).await {
            if self.coordinator.borrow_mut().tick(self.core.now_ms()) {
                self.changed.notify();
            }
            self.epochs.borrow_mut().tick(self.core.now_ms());
        }
    }

    /// Durably commits a member's offset of a queue that exists, with the
    /// metadata a Kafka client gave ("" for none).
    pub async fn commit(&self, c: &GroupOffset, metadata: &str) -> Result<(), Failure> {
        // An offset of a queue that does not exist would be stored for nothing.
        self.core.home(&c.queue)?;
        self.may_commit(&c.member, &c.queue)?;
        let committed = Committed { offset: c.offset, metadata: metadata.to_string() };
        self.core.commit_offset(&c.member.group, &c.queue.topic, c.queue.queue, committed).await?;
        self.core.trace_committed(&c.member.group, &c.member.member, &c.queue, c.offset).await;
        Ok(())
    }

    /// May `who` commit `queue`? A KIP-848 member by its epoch, a classic
    /// one by its generation and assignment.
    pub fn may_commit(&self, who: &Membership, queue: &QueueRef) -> Result<(), Failure> {
        if self.epochs.borrow().has(&who.group) {
            let partition = (queue.topic.clone(), queue.queue);
            return Ok(self.epochs.borrow().may_commit(&who.group, &who.member, who.generation, &partition)?);
        }
        Ok(self.coordinator.borrow().may_commit(who, &queue.topic, queue.queue)?)
    }

    /// The groups this shard coordinates: those with members, and those
    /// with committed offsets only (Empty); never the broker's own cursors.
    pub fn list(&self) -> Vec<GroupListing> {
        let mut groups = self.coordinator.borrow().list();
        for (group, members) in self.epochs.borrow().list() {
            groups.push(GroupListing { group, state: "Stable".into(), members: members as u32 });
        }
        for ((group, _, _), _) in self.core.offsets().consumers() {
            if !groups.iter().any(|g| g.group == group) {
                groups.push(GroupListing { group, state: "Empty".into(), members: 0 });
            }
        }
        groups.sort_by(|a, b| a.group.cmp(&b.group));
        groups
    }

    /// The protocol type a group's members speak ("" for one with offsets only).
    pub fn protocol_type(&self, group: &str) -> String {
        if self.epochs.borrow().has(group) {
            return CONSUMER_PROTOCOL.to_string();
        }
        self.coordinator.borrow().protocol_type(group).unwrap_or_default().to_string()
    }

    /// Whether the group's members speak Kafka's consumer protocol (KIP-848).
    pub fn is_consumer_protocol(&self, group: &str) -> bool {
        self.epochs.borrow().has(group)
    }

    /// A group's members with their metadata and assignment bytes.
    pub fn member_bytes(&self, group: &str) -> Vec<MemberBytes> {
        self.coordinator.borrow().member_bytes(group)
    }

    /// Deletes a group without members: its committed offsets (durably)
    /// and what the coordinator kept of it.
    pub async fn delete(&self, group: &str) -> Result<Deletion, Failure> {
        if self.coordinator.borrow().has_members(group) || self.epochs.borrow().has(group) {
            return Ok(Deletion::NotEmpty);
        }
        if !self.known(group) {
            return Ok(Deletion::NotFound);
        }
        let queues = self.core.offsets().queues_of(group);
        self.core.offsets().delete(self.core.storage(), group, &queues).await?;
        self.coordinator.borrow_mut().forget(group);
        Ok(Deletion::Deleted)
    }

    /// Deletes a group's committed offsets of `queues` of `topic`, unless a
    /// member of the group holds a queue of the topic.
    pub async fn delete_offsets(&self, group: &str, topic: &str, queues: &[u32]) -> Result<Deletion, Failure> {
        if self.coordinator.borrow().consumes(group, topic) {
            return Ok(Deletion::Subscribed);
        }
        if !self.known(group) {
            return Ok(Deletion::NotFound);
        }
        let queues: Vec<(String, u32)> = queues.iter().map(|q| (topic.to_string(), *q)).collect();
        self.core.offsets().delete(self.core.storage(), group, &queues).await?;
        Ok(Deletion::Deleted)
    }

    /// True if this shard knows the group: the coordinator keeps it, or it has committed offsets.
    fn known(&self, group: &str) -> bool {
        self.coordinator.borrow().protocol_type(group).is_some() || !self.core.offsets().queues_of(group).is_empty()
    }

    /// A group's state, members and committed offsets (an unknown group: Empty, with none).
    pub fn describe(&self, group: &str) -> GroupDescription {
        let described = self.coordinator.borrow().describe(group);
        let mut d = described.unwrap_or_else(|| GroupDescription {
            group: group.to_string(),
            state: "Empty".into(),
            ..GroupDescription::default()
        });
        let offsets = self.core.offsets().consumers().into_iter().filter(|((g, _, _), _)| g == group);
        d.offsets = offsets.map(|((_, topic, queue), offset)| (topic, queue, offset)).collect();
        d.offsets.sort();
        d
    }

    /// The group's committed offset of the queue (`NO_OFFSET` if none).
    pub fn committed(&self, group: &str, q: &QueueRef) -> u64 {
        self.core.committed_offset(group, &q.topic, q.queue).unwrap_or(msg::NO_OFFSET)
    }

    /// The group's committed position in the queue, with its metadata.
    pub fn committed_with_metadata(&self, group: &str, q: &QueueRef) -> Option<Committed> {
        self.core.committed(group, &q.topic, q.queue)
    }

    /// Refuses a member that speaks for a static instance another member
    /// now holds (FencedInstance); None names no instance.
    pub fn check_instance(&self, group: &str, instance: Option<&str>, member: &str) -> Result<(), Failure> {
        match instance {
            Some(instance) => Ok(self.coordinator.borrow().check_instance(group, instance, member)?),
            None => Ok(()),
        }
    }

    /// A heartbeat of Kafka's consumer protocol: the member's epoch and,
    /// when it changed, its partitions. A group is of one protocol at a time.
    pub fn consumer_heartbeat(&self, beat: &Beat) -> Result<BeatAnswer, Failure> {
        if self.coordinator.borrow().has_members(&beat.group) {
            return Err(mixed(&beat.group));
        }
        let metadata = self.core.metadata();
        Ok(self.epochs.borrow_mut().heartbeat(beat, &*metadata, self.core.now_ms())?)
    }

    /// A consumer-protocol group's epoch and members (None: not one with members).
    pub fn consumer_group(&self, group: &str) -> Option<GroupView> {
        self.epochs.borrow().describe(group)
    }

    /// Joins (or rejoins) a member; answers once the generation formed, or
    /// at once with the id a first join must come back with.
    pub async fn join(&self, group: &str, req: JoinRequest) -> Result<JoinAnswer, Failure> {
        if self.epochs.borrow().has(group) {
            return Err(mixed(group));
        }
        // At most group_wait_max: the edges check or clamp it with the request's other limits.
        let limit = Duration::from_millis(u64::from(req.rebalance_timeout_ms));
        let member = match self.coordinator.borrow_mut().join(group, req, self.core.now_ms())? {
            Admitted::Member(member) => member,
            Admitted::IdRequired(id) => return Ok(JoinAnswer::IdRequired(id)),
        };
        self.changed.notify();
        // The deadline evicts missing members on the shard's tick: allow for it.
        self.park(limit + Duration::from_secs(1), || self.coordinator.borrow().joined(group, &member))
            .await
            .map(JoinAnswer::Formed)
    }

    /// Takes the leader's assignment (a follower brings none), each member's
    /// bytes read by `parse`; answers the member's own share once the
    /// leader's arrived.
    pub async fn sync(
        &self,
        who: &Membership,
        assignments: &[(String, Vec<u8>)],
        parse: impl Fn(&[u8]) -> Result<Assignment, ParseError>,
    ) -> Result<Share, Failure> {
        self.coordinator.borrow_mut().sync(who, assignments, parse, self.core.now_ms())?;
        self.changed.notify();
        let limit = self.core.config().group_wait_max;
        self.park(limit, || self.coordinator.borrow().synced(who)).await
    }

    /// Keeps a member's session; parked until the member must rejoin or
    /// `wait` passes, so a rebalance reaches every member at once.
    pub async fn heartbeat(&self, who: &Membership, wait: Duration) -> Result<(), Failure> {
        self.coordinator.borrow_mut().heartbeat(who, self.core.now_ms())?;
        let deadline = Instant::now() + wait;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || !self.changed.wait_for(left).await {
                return Ok(());
            }
            self.coordinator.borrow().standing(who)?;
        }
    }

    pub fn leave(&self, who: &Membership) -> Result<(), Failure> {
        self.coordinator.borrow_mut().leave(who, self.core.now_ms())?;
        self.changed.notify();
        Ok(())
    }

    /// Takes or renews the holder's lease on each queue; whether each is held.
    pub fn lock(&self, l: &QueueLocking) -> Vec<bool> {
        let (mut locks, now) = (self.locks.borrow_mut(), self.core.clock().now_ms());
        l.queues
            .iter()
            .map(|q| locks.lock(&l.group, &l.holder, &q.topic, q.queue, u64::from(l.lease_ms), now))
            .collect()
    }

    pub fn unlock(&self, l: &QueueLocking) {
        let mut locks = self.locks.borrow_mut();
        l.queues.iter().for_each(|q| locks.unlock(&l.group, &l.holder, &q.topic, q.queue));
    }

    /// Waits until `ready` has an answer (or refuses), at most `limit`;
    /// after that the member is told to rejoin.
    async fn park<T>(&self, limit: Duration, ready: impl Fn() -> Result<Option<T>, Refusal>) -> Result<T, Failure> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(answer) = ready()? {
                return Ok(answer);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || !self.changed.wait_for(left).await {
                if let Some(answer) = ready()? {
                    return Ok(answer);
                }
                return Err(Failure(Reason::RebalanceInProgress, format!("no answer within {limit:?}; rejoin")));
            }
        }
    }
}

impl Topics for Metadata {
    fn partitions(&self, topic: &str) -> Option<u32> {
        self.topics.get(topic).map(|t| t.queues.len() as u32)
    }

    fn names(&self) -> Vec<String> {
        self.topics.keys().cloned().collect()
    }
}
