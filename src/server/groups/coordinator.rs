//! Consumer group coordination on the group's coordinator shard: members
//! join, the generation forms once every member rejoined (or the rebalance
//! timeout evicted the missing ones), the leader's assignment is handed out,
//! and heartbeats keep sessions alive. A rebalance is eager: members learn of
//! it from their heartbeat, stop fetching, and join again, so a queue is
//! handed to its next owner only after its last owner gave it up or was
//! evicted. Commits carry the generation and are refused from a former one.
//!
//! Pure state driven by `now_ms`, so tests drive the clock; the handler
//! parks join and sync requests until their answer is ready.

use crate::protocol::groups::{GroupDescription, GroupListing, MemberDescription};
use crate::protocol::messages::{Assignment, Membership};
use crate::server::core::Reason;
use std::collections::{BTreeMap, HashMap};

/// Why a member's assignment bytes do not parse: the decoder's own error
/// (the native format's, or a Kafka consumer's through the codec).
pub type ParseError = Box<dyn std::error::Error>;

/// A refused group request: the code and a message a user can act on.
pub type Refusal = (Reason, String);

/// The protocol type (and only assignment protocol) of ringmq's own consumers.
pub const NATIVE: &str = "ringmq";

/// A join's settings.
pub struct JoinRequest {
    pub member: String,
    pub client_id: String,
    pub session_timeout_ms: u32,
    pub rebalance_timeout_ms: u32,
    /// The kind of client (`NATIVE`, or Kafka's "consumer"): a group's members all speak one.
    pub protocol_type: String,
    /// The assignment protocols the member supports, best first, each with its metadata.
    pub protocols: Vec<(String, Vec<u8>)>,
    /// Kafka's `group.instance.id`: a static member. Restarted (a join with
    /// no member id) while its session lasts, it takes its old place and,
    /// in a stable group with the same protocols, its old assignment, with
    /// no rebalance; a join under its former member id is then fenced.
    pub instance: Option<String>,
    /// A first join (no member id) of a dynamic member is answered with an
    /// id to join with (Kafka's MEMBER_ID_REQUIRED, JoinGroup v4+): members
    /// that never come back do not hold up a rebalance.
    pub id_first: bool,
}

/// How a join was admitted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admitted {
    /// As this member: its answer comes from [`Coordinator::joined`].
    Member(String),
    /// Not yet: it must join again with this id (within its session).
    IdRequired(String),
}

/// A formed generation, as a member's join learns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Formed {
    pub generation: u32,
    pub member: String,
    pub leader: String,
    /// The assignment protocol every member supports (the leader's first such).
    pub protocol: String,
    /// Only for the leader: every member with its metadata for `protocol`.
    pub members: Vec<(String, Vec<u8>)>,
}

/// A member as Kafka's DescribeGroups shows it: its id, client id, its
/// metadata for the generation's protocol and its assignment, as bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberBytes {
    pub member: String,
    pub client_id: String,
    pub metadata: Vec<u8>,
    pub assignment: Vec<u8>,
}

/// A member's part of the leader's assignment: the bytes the leader gave
/// (handed to the member as they came) and the queues they name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Share {
    pub bytes: Vec<u8>,
    pub queues: Assignment,
}

struct Member {
    client_id: String,
    protocols: Vec<(String, Vec<u8>)>,
    session_timeout_ms: u64,
    rebalance_timeout_ms: u64,
    last_seen_ms: u64,
    /// Joined the generation being formed.
    joined: bool,
    /// The answer for its parked join, once the generation formed.
    joined_answer: Option<Formed>,
    /// Its share in the current generation, once the leader synced.
    assignment: Option<Share>,
}

impl Member {
    fn speaks(&self, protocol: &str) -> bool {
        self.protocols.iter().any(|(name, _)| name == protocol)
    }
}

impl Phase {
    /// The state's name, as Kafka's tools print a group's.
    fn name(self) -> &'static str {
        match self {
            Phase::Empty => "Empty",
            Phase::Joining { .. } => "PreparingRebalance",
            Phase::Syncing => "CompletingRebalance",
            Phase::Stable => "Stable",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Empty,
    /// Waiting for members to (re)join until the deadline.
    Joining {
        deadline_ms: u64,
    },
    /// Formed; waiting for the leader's assignment.
    Syncing,
    Stable,
}

struct Group {
    generation: u32,
    phase: Phase,
    leader: String,
    /// The protocol type its members speak (set by the first one).
    protocol_type: String,
    /// The assignment protocol of the current generation.
    protocol: String,
    members: BTreeMap<String, Member>,
    /// Ids handed out by MEMBER_ID_REQUIRED, until when they may join.
    pending: BTreeMap<String, u64>,
    /// Static members: instance id to member id.
    statics: HashMap<String, String>,
}

/// Every group this shard coordinates.
#[derive(Default)]
pub struct Coordinator {
    groups: HashMap<String, Group>,
    next_member: u64,
}

impl Coordinator {
    /// Every group with members: name, state, member count.
    pub fn list(&self) -> Vec<GroupListing> {
        let listing = |(name, g): (&String, &Group)| GroupListing {
            group: name.clone(),
            state: g.phase.name().into(),
            members: g.members.len() as u32,
        };
        self.groups.iter().map(listing).collect()
    }

    /// A group's state and members (offsets are the caller's to add); None if it has no members.
    pub fn describe(&self, group: &str) -> Option<GroupDescription> {
        let g = self.groups.get(group)?;
        let members = g.members.iter().map(|(id, m)| MemberDescription {
            member: id.clone(),
            client_id: m.client_id.clone(),
            assignment: m.assignment.as_ref().map(|s| s.queues.clone()).unwrap_or_default(),
        });
        Some(GroupDescription {
            group: group.to_string(),
            state: g.phase.name().into(),
            protocol_type: g.protocol_type.clone(),
            protocol: g.protocol.clone(),
            generation: g.generation,
            leader: g.leader.clone(),
            members: members.collect(),
            offsets: Vec::new(),
        })
    }

    /// The protocol type a group's members speak (None: no such group here).
    pub fn protocol_type(&self, group: &str) -> Option<&str> {
        self.groups.get(group).map(|g| g.protocol_type.as_str())
    }

    /// A group's members with their metadata and assignment bytes (none for an unknown group).
    pub fn member_bytes(&self, group: &str) -> Vec<MemberBytes> {
        let Some(g) = self.groups.get(group) else { return Vec::new() };
        let metadata = |m: &Member| m.protocols.iter().find(|(p, _)| *p == g.protocol).map(|(_, b)| b.clone());
        g.members
            .iter()
            .map(|(id, m)| MemberBytes {
                member: id.clone(),
                client_id: m.client_id.clone(),
                metadata: metadata(m).unwrap_or_default(),
                assignment: m.assignment.as_ref().map(|s| s.bytes.clone()).unwrap_or_default(),
            })
            .collect()
    }

    /// Refuses `member` speaking for static `instance` when another member
    /// now holds it (the instance restarted as a new member; Kafka's
    /// FENCED_INSTANCE_ID). An instance no one holds is the caller's own
    /// business (an unknown member is refused by the call itself).
    pub fn check_instance(&self, group: &str, instance: &str, member: &str) -> Result<(), Refusal> {
        let holder = self.groups.get(group).and_then(|g| g.statics.get(instance));
        match holder {
            Some(holder) if holder != member => Err((
                Reason::FencedInstance,
                format!("group {group:?}'s static member {instance:?} is now {holder:?}: {member:?} is fenced"),
            )),
            _ => Ok(()),
        }
    }

    /// True while the group has members.
    pub fn has_members(&self, group: &str) -> bool {
        self.groups.get(group).is_some_and(|g| !g.members.is_empty())
    }

    /// True if a member of the group holds a queue of `topic` in its assignment.
    pub fn consumes(&self, group: &str, topic: &str) -> bool {
        let Some(g) = self.groups.get(group) else { return false };
        let holds = |m: &Member| m.assignment.as_ref().is_some_and(|s| s.queues.topics.iter().any(|(t, _)| t == topic));
        g.members.values().any(holds)
    }

    /// Forgets a group without members (a group with members is kept).
    pub fn forget(&mut self, group: &str) {
        if !self.has_members(group) {
            self.groups.remove(group);
        }
    }

    /// Adds or refreshes a member and starts a rebalance if none is under
    /// way (a static member that comes back to a stable group with the same
    /// protocols takes its old place without one). Its answer comes from
    /// [`Coordinator::joined`].
    pub fn join(&mut self, group: &str, req: JoinRequest, now_ms: u64) -> Result<Admitted, Refusal> {
        if req.session_timeout_ms == 0 || req.rebalance_timeout_ms == 0 {
            return Err((Reason::InvalidRequest, "session and rebalance timeouts must be positive".into()));
        }
        let g = self.groups.entry(group.to_string()).or_insert_with(|| Group {
            generation: 0,
            phase: Phase::Empty,
            leader: String::new(),
            protocol_type: String::new(),
            protocol: String::new(),
            members: BTreeMap::new(),
            pending: BTreeMap::new(),
            statics: HashMap::new(),
        });
        let fresh = |next: &mut u64| {
            *next += 1;
            format!("{}-{}", req.client_id, *next)
        };
        let known_static = req.instance.as_ref().and_then(|i| g.statics.get(i).cloned());
        let id = match (&known_static, req.member.is_empty()) {
            (Some(current), false) if *current != req.member => return Err(fenced(group, &req)),
            (Some(_), true) | (None, true) if req.instance.is_some() => fresh(&mut self.next_member),
            (None, true) if req.id_first => {
                let id = fresh(&mut self.next_member);
                g.pending.insert(id.clone(), now_ms + u64::from(req.session_timeout_ms));
                return Ok(Admitted::IdRequired(id));
            }
            (None, true) => fresh(&mut self.next_member),
            _ if g.members.contains_key(&req.member) || g.pending.remove(&req.member).is_some() => req.member.clone(),
            _ => return Err(unknown_member(group, &req.member)),
        };
        g.check_protocols(group, &id, &req)?;
        if let Some(old) = known_static.filter(|old| *old != id) {
            if g.take_over(&old, &id, &req, now_ms) {
                return Ok(Admitted::Member(id));
            }
        }
        g.protocol_type = req.protocol_type;
        if let Some(instance) = &req.instance {
            g.statics.insert(instance.clone(), id.clone());
        }
        let member = Member {
            client_id: req.client_id,
            protocols: req.protocols,
            session_timeout_ms: u64::from(req.session_timeout_ms),
            rebalance_timeout_ms: u64::from(req.rebalance_timeout_ms),
            last_seen_ms: now_ms,
            joined: true,
            joined_answer: None,
            assignment: None,
        };
        let rejoin_of_forming = matches!(g.phase, Phase::Joining { .. });
        g.members.insert(id.clone(), member);
        if !rejoin_of_forming {
            g.start_rebalance(now_ms, Some(&id));
        }
        g.try_form(now_ms);
        Ok(Admitted::Member(id))
    }

    /// The answer for a parked join: None while the generation is forming.
    pub fn joined(&self, group: &str, member: &str) -> Result<Option<Formed>, Refusal> {
        let m = self.member(group, member)?;
        Ok(m.joined_answer.clone())
    }

    /// Records the leader's assignment (a follower brings none) for the
    /// current generation, each member's bytes read by `parse` (the format of
    /// the group's protocol type). The answer comes from [`Coordinator::synced`].
    pub fn sync(
        &mut self,
        who: &Membership,
        assignments: &[(String, Vec<u8>)],
        parse: impl Fn(&[u8]) -> Result<Assignment, ParseError>,
        now_ms: u64,
    ) -> Result<(), Refusal> {
        let g = self.current(who)?;
        g.members.get_mut(&who.member).expect("checked by current").last_seen_ms = now_ms;
        if g.leader != who.member || g.phase != Phase::Syncing {
            return Ok(());
        }
        let mut decoded = HashMap::new();
        for (member, bytes) in assignments {
            let queues = parse(bytes)
                .map_err(|e| (Reason::InvalidRequest, format!("assignment for {member:?} does not parse: {e}")))?;
            decoded.insert(member.clone(), Share { bytes: bytes.clone(), queues });
        }
        for (id, m) in g.members.iter_mut() {
            m.assignment = Some(decoded.remove(id).unwrap_or_default());
        }
        g.phase = Phase::Stable;
        Ok(())
    }

    /// The member's assignment once the leader synced; None before.
    pub fn synced(&self, who: &Membership) -> Result<Option<Share>, Refusal> {
        let g = self.group(&who.group, &who.member)?;
        check_generation(g, who)?;
        if matches!(g.phase, Phase::Joining { .. }) {
            return Err(rebalancing(&who.group));
        }
        Ok(g.members[&who.member].assignment.clone())
    }

    /// Keeps the session alive; says whether the member must rejoin.
    pub fn heartbeat(&mut self, who: &Membership, now_ms: u64) -> Result<(), Refusal> {
        let g = self.groups.get_mut(&who.group).ok_or_else(|| unknown_member(&who.group, &who.member))?;
        let m = g.members.get_mut(&who.member).ok_or_else(|| unknown_member(&who.group, &who.member))?;
        m.last_seen_ms = now_ms;
        self.standing(who)
    }

    /// Whether the member may go on as it is (Ok) or must rejoin.
    pub fn standing(&self, who: &Membership) -> Result<(), Refusal> {
        let g = self.group(&who.group, &who.member)?;
        if matches!(g.phase, Phase::Joining { .. }) && !g.members[&who.member].joined {
            return Err(rebalancing(&who.group));
        }
        check_generation(g, who)
    }

    /// Removes the member and rebalances the rest.
    pub fn leave(&mut self, who: &Membership, now_ms: u64) -> Result<(), Refusal> {
        let g = self.groups.get_mut(&who.group).ok_or_else(|| unknown_member(&who.group, &who.member))?;
        if g.members.remove(&who.member).is_none() {
            return Err(unknown_member(&who.group, &who.member));
        }
        g.forget_gone_statics();
        g.start_rebalance(now_ms, None);
        g.try_form(now_ms);
        Ok(())
    }

    /// May `who` commit `queue` of `topic`? Members commit queues of their
    /// current generation's assignment (also while a rebalance forms the next
    /// one); a consumer outside the group (empty member) only while the group
    /// has no members.
    pub fn may_commit(&self, who: &Membership, topic: &str, queue: u32) -> Result<(), Refusal> {
        if who.member.is_empty() {
            let active = self.groups.get(&who.group).is_some_and(|g| !g.members.is_empty());
            if active {
                return Err((
                    Reason::UnknownMember,
                    format!("group {:?} has active members; only they commit its offsets", who.group),
                ));
            }
            return Ok(());
        }
        let g = self.group(&who.group, &who.member)?;
        check_generation(g, who)?;
        match &g.members[&who.member].assignment {
            Some(share) if share.queues.holds(topic, queue) => Ok(()),
            _ => Err((
                Reason::NotAssigned,
                format!(
                    "{topic}/{queue} is not assigned to {} in generation {} of group {:?}",
                    who.member, who.generation, who.group
                ),
            )),
        }
    }

    /// Evicts members whose session expired and forms generations whose
    /// rebalance deadline passed. True if anything changed.
    pub fn tick(&mut self, now_ms: u64) -> bool {
        let mut changed = false;
        for g in self.groups.values_mut() {
            let before = (g.generation, g.phase, g.members.len());
            // A member whose join is parked is waited for by the rebalance deadline instead.
            let parked = |m: &Member| m.joined && matches!(g.phase, Phase::Joining { .. });
            let expired: Vec<String> = g
                .members
                .iter()
                .filter(|(_, m)| !parked(m) && now_ms.saturating_sub(m.last_seen_ms) > m.session_timeout_ms)
                .map(|(id, _)| id.clone())
                .collect();
            for id in &expired {
                tracing::info!(member = %id, "group member's session expired");
                g.members.remove(id);
            }
            g.pending.retain(|_, until| *until > now_ms);
            if !expired.is_empty() {
                g.start_rebalance(now_ms, None);
            }
            g.try_form(now_ms);
            g.forget_gone_statics();
            changed |= before != (g.generation, g.phase, g.members.len());
        }
        changed
    }

    fn member(&self, group: &str, member: &str) -> Result<&Member, Refusal> {
        Ok(&self.group(group, member)?.members[member])
    }

    fn group(&self, group: &str, member: &str) -> Result<&Group, Refusal> {
        self.groups.get(group).filter(|g| g.members.contains_key(member)).ok_or_else(|| unknown_member(group, member))
    }

    fn current(&mut self, who: &Membership) -> Result<&mut Group, Refusal> {
        let g = self
            .groups
            .get_mut(&who.group)
            .filter(|g| g.members.contains_key(&who.member))
            .ok_or_else(|| unknown_member(&who.group, &who.member))?;
        check_generation(g, who)?;
        if matches!(g.phase, Phase::Joining { .. }) {
            return Err(rebalancing(&who.group));
        }
        Ok(g)
    }
}

impl Group {
    /// A static member restarted as `new` takes `old`'s place: its
    /// assignment, and leadership if it led. In a stable group whose
    /// assignment protocol it still speaks (as Kafka, which checks the
    /// protocol, not the metadata) the generation goes on and the join is
    /// answered at once (true); otherwise `old` is dropped and `new` joins
    /// as any member.
    fn take_over(&mut self, old: &str, new: &str, req: &JoinRequest, now_ms: u64) -> bool {
        let Some(mut member) = self.members.remove(old) else { return false };
        if self.phase != Phase::Stable || !req.protocols.iter().any(|(p, _)| *p == self.protocol) {
            self.forget_gone_statics();
            return false;
        }
        tracing::info!(old, new, "a static group member came back and keeps its assignment");
        if self.leader == old {
            self.leader = new.to_string();
        }
        member.client_id = req.client_id.clone();
        member.protocols = req.protocols.clone();
        member.session_timeout_ms = u64::from(req.session_timeout_ms);
        member.rebalance_timeout_ms = u64::from(req.rebalance_timeout_ms);
        member.last_seen_ms = now_ms;
        // The leader's client assigns again; its sync in a stable group is
        // not taken, so every member keeps its share.
        let everyone = if self.leader == new { self.metadata_of_members(Some((new, &member))) } else { Vec::new() };
        member.joined_answer = Some(Formed {
            generation: self.generation,
            member: new.to_string(),
            leader: self.leader.clone(),
            protocol: self.protocol.clone(),
            members: everyone,
        });
        self.members.insert(new.to_string(), member);
        if let Some(instance) = &req.instance {
            self.statics.insert(instance.clone(), new.to_string());
        }
        true
    }

    /// Every member with its metadata for the generation's protocol (`extra`
    /// counted too while it is out of the map).
    fn metadata_of_members(&self, extra: Option<(&str, &Member)>) -> Vec<(String, Vec<u8>)> {
        let metadata_of = |m: &Member| m.protocols.iter().find(|(p, _)| *p == self.protocol).map(|(_, b)| b.clone());
        let mut all: Vec<(String, Vec<u8>)> =
            self.members.iter().map(|(id, m)| (id.clone(), metadata_of(m).unwrap_or_default())).collect();
        if let Some((id, m)) = extra {
            all.push((id.to_string(), metadata_of(m).unwrap_or_default()));
            all.sort();
        }
        all
    }

    /// Drops the instance ids of static members that are gone.
    fn forget_gone_statics(&mut self) {
        let members = &self.members;
        self.statics.retain(|_, id| members.contains_key(id));
    }

    /// Begins forming the next generation; only `joined` counts as rejoined.
    fn start_rebalance(&mut self, now_ms: u64, joined: Option<&str>) {
        if self.members.is_empty() {
            self.phase = Phase::Empty;
            return;
        }
        if matches!(self.phase, Phase::Joining { .. }) {
            return;
        }
        let timeout = self.members.values().map(|m| m.rebalance_timeout_ms).max().unwrap_or(0);
        self.phase = Phase::Joining { deadline_ms: now_ms + timeout };
        for (id, m) in self.members.iter_mut() {
            m.joined = Some(id.as_str()) == joined;
            m.joined_answer = None;
        }
    }

    /// Forms the generation once every member rejoined or the deadline
    /// passed (the missing ones are evicted).
    fn try_form(&mut self, now_ms: u64) {
        let Phase::Joining { deadline_ms } = self.phase else { return };
        let all_in = self.members.values().all(|m| m.joined);
        if !all_in && now_ms < deadline_ms {
            return;
        }
        self.members.retain(|id, m| {
            if !m.joined {
                tracing::info!(member = %id, "evicted: did not rejoin before the rebalance timeout");
            }
            m.joined
        });
        if self.members.is_empty() {
            self.phase = Phase::Empty;
            return;
        }
        self.generation += 1;
        if !self.members.contains_key(&self.leader) {
            self.leader = self.members.keys().next().expect("not empty").clone();
        }
        // Every join checked that the members share a protocol.
        let leader = &self.members[&self.leader];
        let everyone_speaks = |p: &str| self.members.values().all(|m| m.speaks(p));
        let (protocol, _) = leader.protocols.iter().find(|(p, _)| everyone_speaks(p)).expect("a shared protocol");
        self.protocol = protocol.clone();
        let everyone = self.metadata_of_members(None);
        for (id, m) in self.members.iter_mut() {
            m.assignment = None;
            m.joined_answer = Some(Formed {
                generation: self.generation,
                member: id.clone(),
                leader: self.leader.clone(),
                protocol: self.protocol.clone(),
                members: if *id == self.leader { everyone.clone() } else { Vec::new() },
            });
        }
        self.phase = Phase::Syncing;
    }

    /// A member may join if it speaks the group's protocol type and shares
    /// an assignment protocol with every other member.
    fn check_protocols(&self, group: &str, id: &str, req: &JoinRequest) -> Result<(), Refusal> {
        let others: Vec<&Member> = self.members.iter().filter(|(m, _)| m.as_str() != id).map(|(_, m)| m).collect();
        if req.protocols.is_empty() {
            return Err((Reason::InvalidRequest, "a join must name at least one assignment protocol".into()));
        }
        if !others.is_empty() && self.protocol_type != req.protocol_type {
            let m = format!(
                "group {group:?} is used by {:?} clients; a {:?} client cannot join it (use another group name)",
                self.protocol_type, req.protocol_type
            );
            return Err((Reason::InconsistentGroupProtocol, m));
        }
        let shared = req.protocols.iter().any(|(p, _)| others.iter().all(|m| m.speaks(p)));
        if !shared {
            let names: Vec<&str> = req.protocols.iter().map(|(p, _)| p.as_str()).collect();
            let m = format!("group {group:?}'s members support none of the assignment protocols {names:?}");
            return Err((Reason::InconsistentGroupProtocol, m));
        }
        Ok(())
    }
}

fn check_generation(g: &Group, who: &Membership) -> Result<(), Refusal> {
    if who.generation == g.generation {
        return Ok(());
    }
    Err((
        Reason::IllegalGeneration,
        format!(
            "{} speaks for generation {} of group {:?}, which is at {}: it was fenced; rejoin",
            who.member, who.generation, who.group, g.generation
        ),
    ))
}

fn unknown_member(group: &str, member: &str) -> Refusal {
    (Reason::UnknownMember, format!("group {group:?} has no member {member:?} (left or session expired); rejoin"))
}

fn fenced(group: &str, req: &JoinRequest) -> Refusal {
    let instance = req.instance.as_deref().unwrap_or_default();
    let m = format!(
        "group {group:?}'s static member {instance:?} joined again as another member: {:?} is fenced (two consumers share one group.instance.id?)",
        req.member
    );
    (Reason::FencedInstance, m)
}

fn rebalancing(group: &str) -> Refusal {
    (Reason::RebalanceInProgress, format!("group {group:?} is rebalancing; rejoin"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn join(gs: &mut Coordinator, member: &str, now: u64) -> String {
        admitted(gs.join("g", request(member, &[NATIVE]), now).unwrap())
    }

    fn admitted(a: Admitted) -> String {
        match a {
            Admitted::Member(id) => id,
            Admitted::IdRequired(id) => panic!("asked to come back as {id}"),
        }
    }

    fn request(member: &str, protocols: &[&str]) -> JoinRequest {
        JoinRequest {
            member: member.into(),
            client_id: "c".into(),
            session_timeout_ms: 1000,
            rebalance_timeout_ms: 500,
            protocol_type: NATIVE.into(),
            protocols: protocols.iter().map(|p| (p.to_string(), member.as_bytes().to_vec())).collect(),
            instance: None,
            id_first: false,
        }
    }

    #[test]
    fn a_first_join_asked_for_an_id_comes_back_with_it_and_an_unknown_id_is_refused() {
        let mut gs = Coordinator::default();
        let first = JoinRequest { id_first: true, ..request("", &[NATIVE]) };
        let Ok(Admitted::IdRequired(id)) = gs.join("g", first, 0) else { panic!("a first join gets an id") };
        assert!(gs.describe("g").unwrap().members.is_empty(), "not a member before it comes back");
        let again = JoinRequest { id_first: true, ..request(&id, &[NATIVE]) };
        assert_eq!(gs.join("g", again, 10), Ok(Admitted::Member(id.clone())));
        assert_eq!(gs.joined("g", &id).unwrap().unwrap().generation, 1);
        let stranger = JoinRequest { id_first: true, ..request("made-up", &[NATIVE]) };
        assert_eq!(gs.join("g", stranger, 20).unwrap_err().0, Reason::UnknownMember);
    }

    #[test]
    fn a_static_member_back_within_its_session_keeps_its_assignment_without_a_rebalance() {
        let mut gs = Coordinator::default();
        let stat = |member: &str, instance: &str| JoinRequest {
            instance: Some(instance.into()),
            ..request(member, &[NATIVE])
        };
        let a = admitted(gs.join("g", stat("", "ia"), 0).unwrap());
        let b = admitted(gs.join("g", stat("", "ib"), 0).unwrap());
        assert_eq!(gs.join("g", stat(&a, "ia"), 0), Ok(Admitted::Member(a.clone())), "a rejoins for b");
        let formed = gs.joined("g", &a).unwrap().unwrap();
        let g = formed.generation;
        let shares = [(a.clone(), assign(&[0])), (b.clone(), assign(&[1]))];
        gs.sync(&who(&formed.leader, g), &shares, parse, 10).unwrap();
        assert_eq!(gs.synced(&who(&a, g)).unwrap().unwrap().queues.topics, vec![("t".into(), vec![0])]);

        // a restarts: a new member id, its old place and queue, the same generation.
        let a2 = admitted(gs.join("g", stat("", "ia"), 700).unwrap());
        assert_ne!(a2, a);
        let back = gs.joined("g", &a2).unwrap().expect("answered at once");
        assert_eq!(back.generation, g, "no rebalance");
        assert_eq!(gs.synced(&who(&a2, g)).unwrap().unwrap().queues.topics, vec![("t".into(), vec![0])]);
        assert_eq!(gs.standing(&who(&b, g)), Ok(()), "b goes on as it was");
        assert_eq!(gs.heartbeat(&who(&a, g), 710).unwrap_err().0, Reason::UnknownMember, "the old id is gone");
        assert_eq!(gs.join("g", stat(&a, "ia"), 720).unwrap_err().0, Reason::FencedInstance);
        assert_eq!(
            gs.check_instance("g", "ia", &a).unwrap_err().0,
            Reason::FencedInstance,
            "its sync, heartbeat, commit"
        );
        assert_eq!(gs.check_instance("g", "ia", &a2), Ok(()));
        assert_eq!(gs.check_instance("g", "nobody", &a), Ok(()), "an instance no one holds is the call's business");
    }

    fn parse(bytes: &[u8]) -> Result<Assignment, ParseError> {
        Ok(Assignment::decode(bytes)?)
    }

    fn who(id: &str, generation: u32) -> Membership {
        Membership { group: "g".into(), generation, member: id.into() }
    }

    fn assign(queues: &[u32]) -> Vec<u8> {
        Assignment { topics: vec![("t".into(), queues.to_vec())] }.encode()
    }

    #[test]
    fn a_generation_forms_when_every_member_rejoined_and_fences_the_former_one() {
        let mut gs = Coordinator::default();
        let a = join(&mut gs, "", 0);
        let first = gs.joined("g", &a).unwrap().expect("a lone member forms generation 1 at once");
        assert_eq!((first.generation, first.leader.as_str()), (1, a.as_str()));
        gs.sync(&who(&a, 1), &[(a.clone(), assign(&[0, 1]))], parse, 1).unwrap();
        assert_eq!(gs.synced(&who(&a, 1)).unwrap().unwrap().queues.topics[0].1, vec![0, 1]);
        gs.may_commit(&who(&a, 1), "t", 1).unwrap();

        let b = join(&mut gs, "", 10);
        assert_eq!(gs.joined("g", &b).unwrap(), None, "waits for a to rejoin");
        assert_eq!(gs.heartbeat(&who(&a, 1), 20).unwrap_err().0, Reason::RebalanceInProgress);
        gs.may_commit(&who(&a, 1), "t", 1).expect("a may commit its queues until the next generation forms");
        join(&mut gs, &a, 30);
        let (ja, jb) = (gs.joined("g", &a).unwrap().unwrap(), gs.joined("g", &b).unwrap().unwrap());
        assert_eq!((ja.generation, jb.generation), (2, 2));
        assert_eq!((ja.members.len(), jb.members.len()), (2, 0), "only the leader gets the members");
        assert_eq!(gs.may_commit(&who(&a, 1), "t", 1).unwrap_err().0, Reason::IllegalGeneration);
        assert_eq!(gs.synced(&who(&b, 2)).unwrap(), None, "b waits for the leader");
        gs.sync(&who(&b, 2), &[], parse, 31).unwrap();
        gs.sync(&who(&a, 2), &[(a.clone(), assign(&[0])), (b.clone(), assign(&[1]))], parse, 32).unwrap();
        assert_eq!(gs.synced(&who(&b, 2)).unwrap().unwrap().queues.topics[0].1, vec![1]);
        assert_eq!(gs.may_commit(&who(&a, 2), "t", 1).unwrap_err().0, Reason::NotAssigned);
        gs.may_commit(&who(&b, 2), "t", 1).unwrap();
        gs.heartbeat(&who(&b, 2), 40).unwrap();
    }

    #[test]
    fn expired_sessions_and_missing_rejoins_are_evicted() {
        let mut gs = Coordinator::default();
        let a = join(&mut gs, "", 0);
        gs.sync(&who(&a, 1), &[], parse, 0).unwrap();
        let b = join(&mut gs, "", 100);
        // a never rejoins: the rebalance timeout (500 ms) evicts it.
        assert!(!gs.tick(599));
        assert!(gs.tick(601));
        assert_eq!(gs.joined("g", &b).unwrap().unwrap().generation, 2);
        assert_eq!(gs.heartbeat(&who(&a, 1), 602).unwrap_err().0, Reason::UnknownMember);
        gs.sync(&who(&b, 2), &[], parse, 602).unwrap();
        // b stops heartbeating: after its session (1000 ms) the group is empty.
        assert!(!gs.tick(1500));
        assert!(gs.tick(1603));
        assert_eq!(gs.heartbeat(&who(&b, 2), 1604).unwrap_err().0, Reason::UnknownMember);
        gs.may_commit(&who("", 0), "t", 0).expect("an empty group takes commits from outside");
    }

    #[test]
    fn leaving_rebalances_the_rest_and_outsiders_cannot_commit_an_active_group() {
        let mut gs = Coordinator::default();
        let a = join(&mut gs, "", 0);
        let b = join(&mut gs, "", 0);
        join(&mut gs, &a, 1);
        gs.sync(&who(&a, 2), &[], parse, 2).unwrap();
        assert_eq!(gs.may_commit(&who("", 0), "t", 0).unwrap_err().0, Reason::UnknownMember);
        gs.leave(&who(&a, 2), 3).unwrap();
        assert_eq!(gs.heartbeat(&who(&b, 2), 4).unwrap_err().0, Reason::RebalanceInProgress);
        join(&mut gs, &b, 5);
        let jb = gs.joined("g", &b).unwrap().unwrap();
        assert_eq!((jb.generation, jb.leader.as_str()), (3, b.as_str()), "b leads once a left");
        assert_eq!(gs.leave(&who(&a, 2), 6).unwrap_err().0, Reason::UnknownMember);
    }

    #[test]
    fn members_agree_on_the_leaders_first_shared_protocol_and_one_protocol_type() {
        let mut gs = Coordinator::default();
        let a = admitted(gs.join("g", request("", &["range", "roundrobin"]), 0).unwrap());
        let b = admitted(gs.join("g", request("", &["roundrobin"]), 0).unwrap());
        let refused = gs.join("g", request("", &["sticky"]), 0).unwrap_err();
        assert_eq!(refused.0, Reason::InconsistentGroupProtocol);
        let kafka = JoinRequest { protocol_type: "consumer".into(), ..request("", &["roundrobin"]) };
        assert_eq!(gs.join("g", kafka, 0).unwrap_err().0, Reason::InconsistentGroupProtocol);
        gs.join("g", request(&a, &["range", "roundrobin"]), 1).unwrap();
        let formed = gs.joined("g", &a).unwrap().unwrap();
        assert_eq!((formed.leader.as_str(), formed.protocol.as_str()), (a.as_str(), "roundrobin"));
        assert_eq!(formed.members, vec![(a.clone(), a.as_bytes().to_vec()), (b.clone(), Vec::new())]);
    }
}
