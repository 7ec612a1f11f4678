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
//! two members at once. Commits are checked against the member's epoch.

use super::coordinator::Refusal;
use crate::server::core::Reason;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// A topic's partition.
pub type Partition = (String, u32);

/// One heartbeat, in the broker's terms.
#[derive(Debug, Clone, Default)]
pub struct Beat {
    pub group: String,
    /// Empty on a first heartbeat of a client that lets the broker choose.
    pub member: String,
    /// 0: join; -1: leave; otherwise the epoch the member is at.
    pub epoch: i32,
    /// None: unchanged since the last heartbeat.
    pub subscribed: Option<Vec<String>>,
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
    pub epoch: u32,
    pub client_id: String,
    pub client_host: String,
    pub subscribed: Vec<String>,
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
    /// What the member was last told it holds.
    assigned: BTreeSet<Partition>,
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

    /// Serves one heartbeat; `partitions` gives a topic's partition count
    /// (None: no such topic, left out of the assignment).
    pub fn heartbeat(
        &mut self,
        beat: &Beat,
        partitions: impl Fn(&str) -> Option<u32>,
        now_ms: u64,
    ) -> Result<BeatAnswer, Refusal> {
        if beat.epoch == -1 || beat.epoch == -2 {
            return self.leave(&beat.group, &beat.member);
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
            let subscribed = beat.subscribed.clone().ok_or_else(|| {
                (Reason::InvalidRequest, "a joining member names the topics it subscribes to".to_string())
            })?;
            let member = group.members.entry(id.clone()).or_default();
            // A rejoin gives up what it held (the client dropped it on being fenced).
            *member = Member { subscribed, ..Member::default() };
            id
        } else {
            let m = group.members.get_mut(&beat.member).ok_or_else(|| unknown(&beat.group, &beat.member))?;
            if beat.epoch as u32 != m.epoch {
                let why = format!("member {} is at epoch {}, not {}: rejoin", beat.member, m.epoch, beat.epoch);
                return Err((Reason::FencedMemberEpoch, why));
            }
            if let Some(subscribed) = &beat.subscribed {
                m.subscribed = subscribed.clone();
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
        group.retarget(&partitions);
        let changed = group.reconcile(&member_id);
        let m = &group.members[&member_id];
        let assignment = (changed || beat.epoch == 0).then(|| m.assigned.iter().cloned().collect());
        Ok(BeatAnswer { member: member_id, epoch: m.epoch as i32, assignment })
    }

    fn leave(&mut self, group: &str, member: &str) -> Result<BeatAnswer, Refusal> {
        let g = self.groups.get_mut(group).ok_or_else(|| unknown(group, member))?;
        g.members.remove(member).ok_or_else(|| unknown(group, member))?;
        g.target.remove(member);
        g.epoch += 1;
        Ok(BeatAnswer { member: member.to_string(), epoch: -1, assignment: None })
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

    /// May `member` at `epoch` commit? It must be a member at its current
    /// epoch, as Kafka checks: the epoch fences a member that lost its
    /// partitions, and a member giving some up commits them first.
    pub fn may_commit(&self, group: &str, member: &str, epoch: u32) -> Result<(), Refusal> {
        let g = self.groups.get(group).ok_or_else(|| unknown(group, member))?;
        let m = g.members.get(member).ok_or_else(|| unknown(group, member))?;
        if epoch != m.epoch {
            return Err((Reason::StaleMemberEpoch, format!("member {member} is at epoch {}, not {epoch}", m.epoch)));
        }
        Ok(())
    }

    /// A group's epoch and members, if it has any.
    pub fn describe(&self, group: &str) -> Option<GroupView> {
        let g = self.groups.get(group).filter(|g| !g.members.is_empty())?;
        let members = g
            .members
            .iter()
            .map(|(id, m)| MemberView {
                member: id.clone(),
                epoch: m.epoch,
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                subscribed: m.subscribed.clone(),
                assigned: m.assigned.iter().cloned().collect(),
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

impl Group {
    /// Computes the target assignment; a new target is a new group epoch.
    fn retarget(&mut self, partitions: &impl Fn(&str) -> Option<u32>) {
        let target = self.assign(partitions);
        if target != self.target {
            self.target = target;
            self.epoch += 1;
        }
    }

    /// Every subscribed partition to one subscribed member: kept where it
    /// is held if that member is under its even share, else to the least
    /// loaded member subscribed to its topic (ties by member id).
    fn assign(&self, partitions: &impl Fn(&str) -> Option<u32>) -> HashMap<String, BTreeSet<Partition>> {
        let topics: BTreeSet<&String> = self.members.values().flat_map(|m| &m.subscribed).collect();
        let all: Vec<Partition> =
            topics.into_iter().flat_map(|t| (0..partitions(t).unwrap_or(0)).map(move |p| (t.clone(), p))).collect();
        let mut target: HashMap<String, BTreeSet<Partition>> =
            self.members.keys().map(|id| (id.clone(), BTreeSet::new())).collect();
        let share = all.len().div_ceil(self.members.len().max(1));
        let subscribed = |id: &String, topic: &String| self.members[id].subscribed.contains(topic);
        let mut rest = Vec::new();
        for p in all {
            let holder = self.members.iter().find(|(_, m)| m.assigned.contains(&p)).map(|(id, _)| id);
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
            .flat_map(|(_, m)| m.assigned.iter().chain(&m.owned).cloned())
            .collect();
        let m = self.members.get_mut(member).expect("a member");
        let kept: BTreeSet<Partition> = m.assigned.intersection(&target).cloned().collect();
        if kept != m.assigned {
            // First the member gives up what is no longer its, at its epoch.
            m.assigned = kept;
            return true;
        }
        if !m.owned.is_subset(&target) {
            // Told, not done yet.
            return false;
        }
        m.epoch = self.epoch;
        let free = target.iter().filter(|p| !held_elsewhere.contains(*p)).cloned();
        let next: BTreeSet<Partition> = kept.iter().cloned().chain(free).collect();
        let changed = next != m.assigned;
        m.assigned = next;
        changed
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

    fn two(_: &str) -> Option<u32> {
        Some(2)
    }

    #[test]
    fn a_second_member_gets_a_partition_only_once_the_first_gave_it_up() {
        let mut g = MemberEpochs::default();
        let t = |p: u32| ("t".to_string(), p);
        let a = g.heartbeat(&beat("a", 0, None), two, 0).unwrap();
        assert_eq!((a.epoch, a.assignment.clone()), (1, Some(vec![t(0), t(1)])));
        let b = g.heartbeat(&beat("b", 0, None), two, 10).unwrap();
        assert_eq!((b.epoch, b.assignment.clone()), (2, Some(vec![])), "b is in epoch 2 and waits: a holds both");
        let a = g.heartbeat(&beat("a", 1, Some(&[t(0), t(1)])), two, 20).unwrap();
        assert_eq!((a.epoch, a.assignment), (1, Some(vec![t(0)])), "a is told to give one up, at its epoch");
        assert!(g.may_commit("g", "a", 1).is_ok(), "a commits at its epoch meanwhile");
        let b = g.heartbeat(&beat("b", 2, None), two, 30).unwrap();
        assert!(b.assignment.is_none(), "a has not said it gave it up yet");
        let a = g.heartbeat(&beat("a", 1, Some(&[t(0)])), two, 40).unwrap();
        assert_eq!((a.epoch, a.assignment), (2, None), "done: a moves to the group's epoch");
        let b = g.heartbeat(&beat("b", 2, None), two, 50).unwrap();
        assert_eq!((b.epoch, b.assignment), (2, Some(vec![t(1)])));
        assert!(g.may_commit("g", "b", 2).is_ok());
        assert_eq!(g.may_commit("g", "b", 1).unwrap_err().0, Reason::StaleMemberEpoch);
        assert_eq!(g.may_commit("g", "c", 2).unwrap_err().0, Reason::UnknownMember);

        let left = g.heartbeat(&beat("b", -1, None), two, 60).unwrap();
        assert_eq!(left.epoch, -1);
        let a = g.heartbeat(&beat("a", 2, None), two, 70).unwrap();
        assert_eq!((a.epoch, a.assignment), (4, Some(vec![t(0), t(1)])), "a takes both at the new epoch");
        assert_eq!(g.heartbeat(&beat("a", 3, None), two, 80).unwrap_err().0, Reason::FencedMemberEpoch);
    }

    #[test]
    fn a_silent_member_is_removed_and_its_partitions_reassigned() {
        let mut g = MemberEpochs::default();
        g.heartbeat(&beat("a", 0, None), two, 0).unwrap();
        g.heartbeat(&beat("b", 0, None), two, 0).unwrap();
        assert!(!g.tick(45_000));
        assert!(g.tick(45_001));
        assert!(!g.has("g"), "both went silent");
        let a = g.heartbeat(&beat("a", 0, None), two, 50_000).unwrap();
        assert_eq!(a.assignment.map(|p| p.len()), Some(2));
        assert!(g.heartbeat(&beat("zz", 5, None), two, 50_000).is_err(), "an unknown member is refused");
    }
}
