//! Groups of Kafka's consumer protocol (KIP-848), pure state: the broker
//! assigns. Each member heartbeats its subscription (and, when it changed,
//! the partitions it owns); the group keeps an epoch that moves whenever
//! its target assignment changes (a member joins, leaves, changes its
//! subscription, or a subscribed topic gains partitions). The target is
//! computed here, sticky: a member keeps what it holds up to an even share,
//! the rest goes to the least loaded member subscribed to its topic.
//!
//! A member reaches its target incrementally, as the protocol asks: first
//! it is told to give up what is no longer its (its epoch unchanged); once
//! it says it owns nothing outside its target, its epoch becomes the
//! group's and it gets the partitions of its target that no other member
//! still holds, the rest as they are given up. A partition is never held by
//! two members at once. Commits are checked against the member's epoch, or
//! against the epoch the member holds the partition since (KIP-1251).
//!
//! A member subscribes by topic names, by a regular expression (Kafka's
//! RE2J syntax, which the `regex` crate shares: a topic is subscribed when
//! its whole name matches, re-evaluated at every heartbeat so new topics
//! join), or both. A static member (`group.instance.id`) that leaves with
//! epoch -2 keeps its partitions until its session runs out; its next
//! incarnation joins with the same instance id and takes them over, epoch
//! and all, with no rebalance. An instance id held by a member that has not
//! left is refused (UNRELEASED_INSTANCE_ID), as Kafka does.

use super::coordinator::Refusal;
use crate::server::core::Reason;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// A topic's partition.
pub type Partition = (String, u32);

/// The epoch of a heartbeat that leaves the group.
const LEAVE: i32 = -1;
/// The epoch of a static member's heartbeat that leaves until it restarts.
const STATIC_LEAVE: i32 = -2;
/// Largest compiled size of a subscription's regular expression.
const REGEX_BYTES_MAX: usize = 1 << 20;

/// The topics an assignment is computed over.
pub trait Topics {
    /// A topic's partition count (None: no such topic).
    fn partitions(&self, topic: &str) -> Option<u32>;
    /// Every topic's name (asked only when a member subscribes by regex).
    fn names(&self) -> Vec<String>;
}

/// A subscription by regular expression.
#[derive(Debug, Clone)]
pub struct TopicRegex {
    source: String,
    whole_name: regex::Regex,
}

impl TopicRegex {
    /// Compiles `source` (its compiled size bounded by `REGEX_BYTES_MAX`);
    /// the reason it is not a regular expression otherwise.
    pub fn new(source: &str) -> Result<TopicRegex, String> {
        let whole_name = regex::RegexBuilder::new(&format!("^(?:{source})$"))
            .size_limit(REGEX_BYTES_MAX)
            .build()
            .map_err(|e| e.to_string())?;
        Ok(TopicRegex { source: source.to_string(), whole_name })
    }

    /// The expression as the member sent it.
    pub fn source(&self) -> &str {
        &self.source
    }

    fn matches(&self, topic: &str) -> bool {
        self.whole_name.is_match(topic)
    }
}

/// One heartbeat, in the broker's terms.
#[derive(Debug, Clone, Default)]
pub struct Beat {
    pub group: String,
    /// Empty on a first heartbeat of a client that lets the broker choose.
    pub member: String,
    /// 0: join; -1: leave; -2: a static member leaves until it restarts;
    /// otherwise the epoch the member is at.
    pub epoch: i32,
    /// Topic names; None: unchanged since the last heartbeat.
    pub subscribed: Option<Vec<String>>,
    /// None: unchanged; Some(None): no regex; Some(Some(r)): topics matching r too.
    pub regex: Option<Option<TopicRegex>>,
    /// A static member's `group.instance.id`.
    pub instance: Option<String>,
    /// The partitions the member owns now (None: unchanged).
    pub owned: Option<Vec<Partition>>,
    pub session_timeout_ms: u64,
    pub client_id: String,
    pub client_host: String,
}

/// A heartbeat's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BeatAnswer {
    pub member: String,
    /// -1 after a leave.
    pub epoch: i32,
    /// The member's partitions, when they changed (or on a join).
    pub assignment: Option<Vec<Partition>>,
}

/// A member as described.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberView {
    pub member: String,
    pub instance: Option<String>,
    pub epoch: u32,
    pub client_id: String,
    pub client_host: String,
    pub subscribed: Vec<String>,
    pub regex: Option<String>,
    pub assigned: Vec<Partition>,
    pub target: Vec<Partition>,
}

/// A group as described: its epoch, its target's epoch and its members.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupView {
    pub epoch: u32,
    pub members: Vec<MemberView>,
}

#[derive(Debug, Clone, Default)]
struct Member {
    epoch: u32,
    subscribed: Vec<String>,
    regex: Option<TopicRegex>,
    instance: Option<String>,
    /// A static member that left until it restarts: its partitions wait for it.
    departed: bool,
    /// What the member was last told it holds, each with the member epoch
    /// it was given at (KIP-1251: commits at that epoch or later stand).
    assigned: BTreeMap<Partition, u32>,
    /// What it said it owns (what it was told until it says otherwise).
    owned: BTreeSet<Partition>,
    last_seen_ms: u64,
    session_timeout_ms: u64,
    client_id: String,
    client_host: String,
}

#[derive(Debug, Clone, Default)]
struct Group {
    epoch: u32,
    members: BTreeMap<String, Member>,
    target: HashMap<String, BTreeSet<Partition>>,
}

/// Every consumer-protocol group one shard coordinates.
#[derive(Debug, Default)]
pub struct MemberEpochs {
    groups: HashMap<String, Group>,
    next_member: u64,
}

impl MemberEpochs {
    /// Whether `group` is a consumer-protocol group with members.
    pub fn has(&self, group: &str) -> bool {
        self.groups.get(group).is_some_and(|g| !g.members.is_empty())
    }

    /// Serves one heartbeat, assigning the partitions of `topics`.
    pub fn heartbeat(&mut self, beat: &Beat, topics: &impl Topics, now_ms: u64) -> Result<BeatAnswer, Refusal> {
        if beat.epoch == LEAVE || beat.epoch == STATIC_LEAVE {
            return self.leave(&beat.group, &beat.member, beat.epoch == STATIC_LEAVE, now_ms);
        }
        let group = self.groups.entry(beat.group.clone()).or_default();
        let member_id = if beat.epoch == 0 {
            let id = match beat.member.is_empty() {
                true => {
                    self.next_member += 1;
                    format!("{}-{}", beat.client_id, self.next_member)
                }
                false => beat.member.clone(),
            };
            let regex = beat.regex.clone().flatten();
            if beat.subscribed.is_none() && regex.is_none() {
                let why = "a joining member names the topics it subscribes to, or a regex of them";
                return Err((Reason::InvalidRequest, why.to_string()));
            }
            let subscribed = beat.subscribed.clone().unwrap_or_default();
            let instance = beat.instance.clone();
            let restarted = match &instance {
                Some(instance) => group.take_over(&beat.group, instance, &id)?,
                None => None,
            };
            // A rejoin gives up what it held (the client dropped it on being
            // fenced); a static member's next incarnation keeps it.
            let kept = restarted.unwrap_or_default();
            let member = Member { subscribed, regex, instance, departed: false, ..kept };
            group.members.insert(id.clone(), member);
            id
        } else {
            let m = group.members.get_mut(&beat.member).filter(|m| !m.departed);
            let m = m.ok_or_else(|| unknown(&beat.group, &beat.member))?;
            if beat.epoch as u32 != m.epoch {
                let why = format!("member {} is at epoch {}, not {}: rejoin", beat.member, m.epoch, beat.epoch);
                return Err((Reason::FencedMemberEpoch, why));
            }
            if let Some(subscribed) = &beat.subscribed {
                m.subscribed = subscribed.clone();
            }
            if let Some(regex) = &beat.regex {
                m.regex = regex.clone();
            }
            beat.member.clone()
        };
        let m = group.members.get_mut(&member_id).expect("joined or checked above");
        m.last_seen_ms = now_ms;
        m.session_timeout_ms = beat.session_timeout_ms;
        m.client_id = beat.client_id.clone();
        m.client_host = beat.client_host.clone();
        if let Some(owned) = &beat.owned {
            m.owned = owned.iter().cloned().collect();
        }
        group.retarget(topics);
        let changed = group.reconcile(&member_id);
        let m = &group.members[&member_id];
        let assignment = (changed || beat.epoch == 0).then(|| m.assigned.keys().cloned().collect());
        Ok(BeatAnswer { member: member_id, epoch: m.epoch as i32, assignment })
    }

    fn leave(&mut self, group: &str, member: &str, restarts: bool, now_ms: u64) -> Result<BeatAnswer, Refusal> {
        let g = self.groups.get_mut(group).ok_or_else(|| unknown(group, member))?;
        let m = g.members.get_mut(member).ok_or_else(|| unknown(group, member))?;
        if restarts && m.instance.is_some() {
            // Its partitions wait for its next incarnation, within its session.
            m.departed = true;
            m.last_seen_ms = now_ms;
            return Ok(BeatAnswer { member: member.to_string(), epoch: STATIC_LEAVE, assignment: None });
        }
        g.members.remove(member);
        g.target.remove(member);
        g.epoch += 1;
        Ok(BeatAnswer { member: member.to_string(), epoch: LEAVE, assignment: None })
    }

    /// Removes members whose session ran out; true if any went.
    pub fn tick(&mut self, now_ms: u64) -> bool {
        let mut changed = false;
        for g in self.groups.values_mut() {
            let before = g.members.len();
            g.members.retain(|_, m| now_ms.saturating_sub(m.last_seen_ms) <= m.session_timeout_ms);
            if g.members.len() != before {
                g.target.retain(|id, _| g.members.contains_key(id));
                g.epoch += 1;
                changed = true;
            }
        }
        self.groups.retain(|_, g| !g.members.is_empty());
        changed
    }

    /// May `member` at `epoch` commit `partition`? At its current epoch, as
    /// Kafka checks: the epoch fences a member that lost its partitions. At
    /// an older epoch only a partition it still holds since that epoch or
    /// before (KIP-1251): a commit sent while a heartbeat moved its epoch on
    /// stands, one for a partition it gave up does not.
    pub fn may_commit(&self, group: &str, member: &str, epoch: u32, partition: &Partition) -> Result<(), Refusal> {
        let g = self.groups.get(group).ok_or_else(|| unknown(group, member))?;
        let m = g.members.get(member).ok_or_else(|| unknown(group, member))?;
        let held_since = m.assigned.get(partition).is_some_and(|since| *since <= epoch);
        if epoch == m.epoch || (epoch < m.epoch && held_since) {
            return Ok(());
        }
        let why =
            format!("member {member} is at epoch {}, not {epoch}, and does not hold {partition:?} since", m.epoch);
        Err((Reason::StaleMemberEpoch, why))
    }

    /// A group's epoch and members, if it has any.
    pub fn describe(&self, group: &str) -> Option<GroupView> {
        let g = self.groups.get(group).filter(|g| !g.members.is_empty())?;
        let members = g
            .members
            .iter()
            .map(|(id, m)| MemberView {
                member: id.clone(),
                instance: m.instance.clone(),
                epoch: m.epoch,
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                subscribed: m.subscribed.clone(),
                regex: m.regex.as_ref().map(|r| r.source().to_string()),
                assigned: m.assigned.keys().cloned().collect(),
                target: g.target.get(id).map(|t| t.iter().cloned().collect()).unwrap_or_default(),
            })
            .collect();
        Some(GroupView { epoch: g.epoch, members })
    }

    /// The groups with members: name and member count.
    pub fn list(&self) -> Vec<(String, usize)> {
        self.groups.iter().filter(|(_, g)| !g.members.is_empty()).map(|(n, g)| (n.clone(), g.members.len())).collect()
    }
}

impl Member {
    /// The topics it subscribes to: its names, and those of `names` its regex matches.
    fn topics(&self, names: &[String]) -> BTreeSet<String> {
        let matched = self.regex.iter().flat_map(|r| names.iter().filter(|n| r.matches(n)));
        self.subscribed.iter().chain(matched).cloned().collect()
    }
}

impl Group {
    /// Removes the member that holds static `instance` for `joining` to take
    /// over, if it left to restart; refused while it has not left.
    fn take_over(&mut self, group: &str, instance: &str, joining: &str) -> Result<Option<Member>, Refusal> {
        let held = self.members.iter().find(|(_, m)| m.instance.as_deref() == Some(instance));
        let Some((holder, m)) = held.map(|(id, m)| (id.clone(), m)) else { return Ok(None) };
        if holder == joining {
            return Ok(None);
        }
        if !m.departed {
            let why = format!(
                "group {group:?}: instance {instance:?} is held by member {holder:?}, which has not left; stop it \
                 first or wait for its session to run out"
            );
            return Err((Reason::UnreleasedInstance, why));
        }
        if let Some(target) = self.target.remove(&holder) {
            self.target.insert(joining.to_string(), target);
        }
        Ok(self.members.remove(&holder))
    }

    /// Computes the target assignment; a new target is a new group epoch.
    fn retarget(&mut self, topics: &impl Topics) {
        let target = self.assign(topics);
        if target != self.target {
            self.target = target;
            self.epoch += 1;
        }
    }

    /// Every subscribed partition to one subscribed member: kept where it
    /// is held if that member is under its even share, else to the least
    /// loaded member subscribed to its topic (ties by member id).
    fn assign(&self, topics: &impl Topics) -> HashMap<String, BTreeSet<Partition>> {
        let names = match self.members.values().any(|m| m.regex.is_some()) {
            true => topics.names(),
            false => Vec::new(),
        };
        let of: HashMap<&String, BTreeSet<String>> =
            self.members.iter().map(|(id, m)| (id, m.topics(&names))).collect();
        let wanted: BTreeSet<&String> = of.values().flatten().collect();
        let all: Vec<Partition> = wanted
            .into_iter()
            .flat_map(|t| (0..topics.partitions(t).unwrap_or(0)).map(move |p| (t.clone(), p)))
            .collect();
        let mut target: HashMap<String, BTreeSet<Partition>> =
            self.members.keys().map(|id| (id.clone(), BTreeSet::new())).collect();
        let share = all.len().div_ceil(self.members.len().max(1));
        let subscribed = |id: &String, topic: &String| of[id].contains(topic);
        let mut rest = Vec::new();
        for p in all {
            let holder = self.members.iter().find(|(_, m)| m.assigned.contains_key(&p)).map(|(id, _)| id);
            match holder.filter(|id| subscribed(id, &p.0) && target[*id].len() < share) {
                Some(id) => {
                    target.get_mut(id).expect("every member").insert(p);
                }
                None => rest.push(p),
            }
        }
        for p in rest {
            let least = target.iter().filter(|(id, _)| subscribed(id, &p.0)).min_by_key(|(id, t)| (t.len(), *id));
            if let Some(id) = least.map(|(id, _)| id.clone()) {
                target.get_mut(&id).expect("every member").insert(p);
            }
        }
        target
    }

    /// Moves `member` toward its target; true if what it holds changed.
    fn reconcile(&mut self, member: &str) -> bool {
        let target = self.target.get(member).cloned().unwrap_or_default();
        let held_elsewhere: BTreeSet<Partition> = self
            .members
            .iter()
            .filter(|(id, _)| id.as_str() != member)
            .flat_map(|(_, m)| m.assigned.keys().chain(&m.owned).cloned())
            .collect();
        let m = self.members.get_mut(member).expect("a member");
        let before = m.assigned.len();
        m.assigned.retain(|p, _| target.contains(p));
        if m.assigned.len() != before {
            // First the member gives up what is no longer its, at its epoch.
            return true;
        }
        if !m.owned.is_subset(&target) {
            // Told, not done yet.
            return false;
        }
        m.epoch = self.epoch;
        let free: Vec<Partition> =
            target.into_iter().filter(|p| !held_elsewhere.contains(p) && !m.assigned.contains_key(p)).collect();
        for p in &free {
            m.assigned.insert(p.clone(), self.epoch);
        }
        !free.is_empty()
    }
}

fn unknown(group: &str, member: &str) -> Refusal {
    (Reason::UnknownMember, format!("group {group:?} has no member {member:?} (left or session expired); rejoin"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn beat(member: &str, epoch: i32, owned: Option<&[Partition]>) -> Beat {
        Beat {
            group: "g".into(),
            member: member.into(),
            epoch,
            subscribed: (epoch == 0).then(|| vec!["t".to_string()]),
            owned: owned.map(|o| o.to_vec()),
            session_timeout_ms: 45_000,
            ..Beat::default()
        }
    }

    /// Topic "t" and the topics it lists, two partitions each.
    struct Two(Vec<&'static str>);

    impl Topics for Two {
        fn partitions(&self, topic: &str) -> Option<u32> {
            (topic == "t" || self.0.contains(&topic)).then_some(2)
        }

        fn names(&self) -> Vec<String> {
            std::iter::once("t").chain(self.0.iter().copied()).map(str::to_string).collect()
        }
    }

    const TWO: &Two = &Two(Vec::new());

    #[test]
    fn a_second_member_gets_a_partition_only_once_the_first_gave_it_up() {
        let mut g = MemberEpochs::default();
        let t = |p: u32| ("t".to_string(), p);
        let a = g.heartbeat(&beat("a", 0, None), TWO, 0).unwrap();
        assert_eq!((a.epoch, a.assignment.clone()), (1, Some(vec![t(0), t(1)])));
        let b = g.heartbeat(&beat("b", 0, None), TWO, 10).unwrap();
        assert_eq!((b.epoch, b.assignment.clone()), (2, Some(vec![])), "b is in epoch 2 and waits: a holds both");
        let a = g.heartbeat(&beat("a", 1, Some(&[t(0), t(1)])), TWO, 20).unwrap();
        assert_eq!((a.epoch, a.assignment), (1, Some(vec![t(0)])), "a is told to give one up, at its epoch");
        assert!(g.may_commit("g", "a", 1, &t(1)).is_ok(), "a commits at its epoch meanwhile");
        let b = g.heartbeat(&beat("b", 2, None), TWO, 30).unwrap();
        assert!(b.assignment.is_none(), "a has not said it gave it up yet");
        let a = g.heartbeat(&beat("a", 1, Some(&[t(0)])), TWO, 40).unwrap();
        assert_eq!((a.epoch, a.assignment), (2, None), "done: a moves to the group's epoch");
        let b = g.heartbeat(&beat("b", 2, None), TWO, 50).unwrap();
        assert_eq!((b.epoch, b.assignment), (2, Some(vec![t(1)])));
        assert!(g.may_commit("g", "a", 1, &t(0)).is_ok(), "a's commit at epoch 1 of what it kept stands (KIP-1251)");
        assert_eq!(g.may_commit("g", "a", 1, &t(1)).unwrap_err().0, Reason::StaleMemberEpoch, "not of what it gave up");
        assert_eq!(g.may_commit("g", "a", 3, &t(0)).unwrap_err().0, Reason::StaleMemberEpoch, "nor from the future");
        assert!(g.may_commit("g", "b", 2, &t(1)).is_ok());
        assert_eq!(g.may_commit("g", "b", 1, &t(1)).unwrap_err().0, Reason::StaleMemberEpoch, "b holds t1 since 2");
        assert_eq!(g.may_commit("g", "c", 2, &t(1)).unwrap_err().0, Reason::UnknownMember);

        let left = g.heartbeat(&beat("b", -1, None), TWO, 60).unwrap();
        assert_eq!(left.epoch, -1);
        let a = g.heartbeat(&beat("a", 2, None), TWO, 70).unwrap();
        assert_eq!((a.epoch, a.assignment), (4, Some(vec![t(0), t(1)])), "a takes both at the new epoch");
        assert_eq!(g.heartbeat(&beat("a", 3, None), TWO, 80).unwrap_err().0, Reason::FencedMemberEpoch);
    }

    #[test]
    fn a_silent_member_is_removed_and_its_partitions_reassigned() {
        let mut g = MemberEpochs::default();
        g.heartbeat(&beat("a", 0, None), TWO, 0).unwrap();
        g.heartbeat(&beat("b", 0, None), TWO, 0).unwrap();
        assert!(!g.tick(45_000));
        assert!(g.tick(45_001));
        assert!(!g.has("g"), "both went silent");
        let a = g.heartbeat(&beat("a", 0, None), TWO, 50_000).unwrap();
        assert_eq!(a.assignment.map(|p| p.len()), Some(2));
        assert!(g.heartbeat(&beat("zz", 5, None), TWO, 50_000).is_err(), "an unknown member is refused");
    }

    #[test]
    fn a_regex_subscribes_to_the_topics_whose_whole_name_matches_new_ones_included() {
        let mut g = MemberEpochs::default();
        let by_regex = |member: &str, epoch: i32, regex: Option<&str>| Beat {
            regex: regex.map(|r| Some(TopicRegex::new(r).unwrap())),
            subscribed: None,
            ..beat(member, epoch, None)
        };
        let topics = Two(vec!["orders-eu", "orders-us", "xorders-eu"]);
        let a = g.heartbeat(&by_regex("a", 0, Some("orders-.*")), &topics, 0).unwrap();
        let assigned: BTreeSet<String> = a.assignment.unwrap().into_iter().map(|(t, _)| t).collect();
        assert_eq!(assigned, BTreeSet::from(["orders-eu".to_string(), "orders-us".to_string()]), "whole names only");
        let more = Two(vec!["orders-eu", "orders-us", "orders-asia"]);
        let a = g.heartbeat(&by_regex("a", 1, None), &more, 10).unwrap();
        assert_eq!(a.assignment.map(|p| p.len()), Some(6), "a new matching topic joins the subscription");
        assert!(TopicRegex::new("orders-(").is_err(), "not a regular expression");
        let none = Beat { subscribed: None, ..beat("b", 0, None) };
        assert_eq!(g.heartbeat(&none, &more, 20).unwrap_err().0, Reason::InvalidRequest, "neither names nor regex");
    }

    #[test]
    fn a_static_member_that_restarts_takes_its_partitions_back_without_a_rebalance() {
        let mut g = MemberEpochs::default();
        let t = |p: u32| ("t".to_string(), p);
        let static_beat = |member: &str, epoch: i32, owned: Option<&[Partition]>| Beat {
            instance: Some("app-1".into()),
            ..beat(member, epoch, owned)
        };
        g.heartbeat(&static_beat("a", 0, None), TWO, 0).unwrap();
        g.heartbeat(&beat("b", 0, None), TWO, 0).unwrap();
        g.heartbeat(&static_beat("a", 1, Some(&[t(0), t(1)])), TWO, 10).unwrap();
        g.heartbeat(&static_beat("a", 1, Some(&[t(0)])), TWO, 20).unwrap();
        let b = g.heartbeat(&beat("b", 2, None), TWO, 30).unwrap();
        assert_eq!(b.assignment, Some(vec![t(1)]));
        let epoch = g.describe("g").unwrap().epoch;

        let refused = g.heartbeat(&static_beat("a2", 0, None), TWO, 40).unwrap_err();
        assert_eq!(refused.0, Reason::UnreleasedInstance, "a still runs: {}", refused.1);
        let left = g.heartbeat(&static_beat("a", STATIC_LEAVE, None), TWO, 50).unwrap();
        assert_eq!(left.epoch, STATIC_LEAVE);
        assert!(g.heartbeat(&beat("b", 2, None), TWO, 60).unwrap().assignment.is_none(), "b does not get t0");
        let a2 = g.heartbeat(&static_beat("a2", 0, None), TWO, 70).unwrap();
        assert_eq!((a2.epoch, a2.assignment), (2, Some(vec![t(0)])), "the next incarnation holds what a held");
        assert_eq!(g.describe("g").unwrap().epoch, epoch, "no rebalance");
        assert_eq!(g.heartbeat(&static_beat("a", 2, None), TWO, 80).unwrap_err().0, Reason::UnknownMember);

        g.heartbeat(&static_beat("a2", STATIC_LEAVE, None), TWO, 100).unwrap();
        g.heartbeat(&beat("b", 2, None), TWO, 40_000).unwrap();
        assert!(!g.tick(100 + 45_000), "its partitions wait for it through its session");
        assert!(g.tick(100 + 45_001), "then it is gone");
        let b = g.heartbeat(&beat("b", 2, None), TWO, 100 + 45_002).unwrap();
        assert_eq!((b.epoch, b.assignment), (4, Some(vec![t(0), t(1)])), "b takes both at the new epoch");
    }
}
