//! A seeded simulation of a queue moving between two broker groups under
//! faults: the real etcd steps of a move (`cluster::moves` on a memory
//! store), each group's real metadata over the view it applied
//! (`Metadata::with_placement`) and the real copy decisions (`copy_step`),
//! around model groups whose leaders crash (losing what their group had
//! not committed), pause, lose etcd and the other group for a while, or
//! only the other group (a partition between them). A producer appends to
//! whichever group takes it; an append is acknowledged once its group
//! committed it.
//!
//! After every step: at most one group takes appends to the queue, and
//! every acknowledged record is in the log of the group etcd places the
//! queue in, at its offset. Once faults stop, the move ends switched.

use super::super::moves::{start, step};
use super::super::placement::{create, read_view, shards_key};
use super::super::store::{MemoryStore, Store};
use crate::server::metadata::{Home, Metadata};
use crate::server::placement::{copy_step, ClusterView, CopyStep, MoveStep, Place};
use crate::server::NewTopic;
use proptest::prelude::RngExt;
use proptest::test_runner::{RngAlgorithm, TestRng};
use std::collections::HashMap;

const TOPIC: &str = "t";
const GROUPS: [&str; 2] = ["source", "target"];
/// Steps with faults, then calm steps for the move to end.
const FAULTY_STEPS: u32 = 2000;
const CALM_STEPS: u32 = 1000;
/// Most entries one copy read returns.
const READ_MAX: usize = 7;

/// What a group's leader is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Health {
    Up,
    /// Runs, but reaches nobody: not etcd, not the other group.
    CutOff(u32),
    /// Runs and reaches etcd, but not the other group.
    Partitioned(u32),
    /// Stopped (no step of its own) for so many steps.
    Paused(u32),
    /// Crashed; a new leader takes over after so many steps.
    Down(u32),
}

/// One broker group's leader and the logs of its storage queues.
struct Group {
    name: &'static str,
    health: Health,
    /// The metadata its leader applied (committed in the group).
    metadata: Metadata,
    /// Each storage queue's log, and how much of it the group committed.
    logs: HashMap<u32, (Vec<u64>, usize)>,
    /// The freeze was asked by this group's copy (forgotten by a crash).
    froze: bool,
}

impl Group {
    fn home(&self) -> Option<Home> {
        self.metadata.topics.get(TOPIC).map(|t| t.queues[0].clone())
    }

    /// The queue's log here (its storage id's), if it has storage.
    fn log(&mut self) -> Option<&mut (Vec<u64>, usize)> {
        let id = self.home()?.stored()?.storage_id;
        Some(self.logs.entry(id).or_default())
    }

    /// Whether it takes appends to the queue now.
    fn takes_appends(&self) -> bool {
        matches!(self.home(), Some(Home::Here(_)))
    }

    fn runs(&self) -> bool {
        matches!(self.health, Health::Up | Health::CutOff(_) | Health::Partitioned(_))
    }

    /// Reaches etcd.
    fn reaches_out(&self) -> bool {
        matches!(self.health, Health::Up | Health::Partitioned(_))
    }

    /// Reaches the other group.
    fn reaches_peer(&self) -> bool {
        self.health == Health::Up
    }
}

/// What a run did.
pub struct MoveOutcome {
    pub acked: usize,
    /// Moves started (each the other way).
    pub moves: usize,
    pub faults: Vec<String>,
    pub violations: Vec<String>,
}

struct Sim {
    rng: TestRng,
    store: MemoryStore,
    groups: [Group; 2],
    /// Acknowledged appends: (offset, value).
    acked: Vec<(u64, u64)>,
    /// Appended, not yet acknowledged: (group, offset, value).
    pending: Vec<(usize, u64, u64)>,
    next_value: u64,
    created: i64,
    faults: Vec<String>,
    violations: Vec<String>,
}

/// Runs one seed.
pub async fn simulate_move(seed: u64) -> MoveOutcome {
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    let store = MemoryStore::new();
    for g in GROUPS {
        store.put(&shards_key(g), b"1".to_vec(), None).await.expect("a memory store");
    }
    let view = read_view(&store).await.expect("a memory store");
    let topic = NewTopic {
        name: TOPIC.into(),
        queues: 1,
        flush: ringmq_shards::FlushPolicy::Sync,
        configs: Default::default(),
    };
    // Placed round robin from a shard the name picks: make it the source's.
    let source_view = ClusterView { groups: view.groups[..1].to_vec(), ..view };
    create(&store, &source_view, &topic).await.expect("a memory store");
    let group =
        |name| Group { name, health: Health::Up, metadata: Metadata::default(), logs: HashMap::new(), froze: false };
    let mut sim = Sim {
        rng: TestRng::from_seed(RngAlgorithm::ChaCha, &bytes),
        store,
        groups: [group(GROUPS[0]), group(GROUPS[1])],
        acked: Vec::new(),
        pending: Vec::new(),
        next_value: 0,
        created: 0,
        faults: Vec::new(),
        violations: Vec::new(),
    };
    sim.created = read_view(&sim.store).await.expect("a memory store").topics[TOPIC].created;
    // Moved to the other group 100 steps after each switch, while faults last.
    let (mut to, mut moves, mut settled) = (Place { broker_group: GROUPS[0].into(), shard: 0 }, 0, 100);
    for s in 0..FAULTY_STEPS + CALM_STEPS {
        let placed = read_view(&sim.store).await.expect("a memory store").topics[TOPIC].clone();
        if !placed.moves.is_empty() || placed.queues[0] != to {
            settled = s;
        } else if s < FAULTY_STEPS && s >= settled + 100 {
            to = Place { broker_group: GROUPS[usize::from(to.broker_group == GROUPS[0])].into(), shard: 0 };
            start(&sim.store, TOPIC, 0, to.clone()).await.expect("the move is stored");
            moves += 1;
        }
        if s < FAULTY_STEPS {
            sim.strike(s);
        }
        sim.step().await;
        sim.check(s).await;
        if !sim.violations.is_empty() {
            break;
        }
    }
    let view = read_view(&sim.store).await.expect("a memory store");
    if sim.violations.is_empty() && (view.topics[TOPIC].queues[0] != to || !view.topics[TOPIC].moves.is_empty()) {
        sim.violations.push(format!("the move did not end once faults stopped: {:?}", view.topics[TOPIC]));
    }
    MoveOutcome { acked: sim.acked.len(), moves, faults: sim.faults, violations: sim.violations }
}

impl Sim {
    /// Maybe starts a fault on a group that has none (about one in 110 steps).
    fn strike(&mut self, s: u32) {
        let (g, draw, lasts) =
            (self.rng.random_range(0..2usize), self.rng.random_range(0..450u32), self.rng.random_range(5..120u32));
        if self.groups[g].health != Health::Up || draw >= 4 {
            return;
        }
        let group = &mut self.groups[g];
        group.health = match draw {
            0 => Health::CutOff(lasts),
            1 => Health::Paused(lasts),
            2 => Health::Partitioned(lasts),
            _ => Health::Down(lasts),
        };
        if draw == 3 {
            // A crash loses what the group had not committed, and the copy's state.
            for (log, committed) in group.logs.values_mut() {
                log.truncate(*committed);
            }
            group.froze = false;
            self.pending.retain(|(p, _, _)| *p != g);
        }
        self.faults.push(format!("step {s}: {} {:?}", group.name, group.health));
    }

    async fn step(&mut self) {
        let view = read_view(&self.store).await.expect("a memory store");
        for g in 0..2 {
            let group = &mut self.groups[g];
            group.health = match group.health {
                Health::CutOff(0) | Health::Paused(0) | Health::Partitioned(0) | Health::Down(0) => Health::Up,
                Health::CutOff(n) => Health::CutOff(n - 1),
                Health::Partitioned(n) => Health::Partitioned(n - 1),
                Health::Paused(n) => Health::Paused(n - 1),
                Health::Down(n) => Health::Down(n - 1),
                Health::Up => Health::Up,
            };
            if !group.runs() {
                continue;
            }
            // Replication: part of what the group holds commits, some steps
            // (followers that lag leave a tail uncommitted for a while).
            for (log, committed) in group.logs.values_mut() {
                if *committed < log.len() && self.rng.random_bool(0.3) {
                    *committed = self.rng.random_range(*committed + 1..=log.len());
                }
            }
            // The leader applies the view it reaches (a group applies only what it committed).
            if group.reaches_out() && self.rng.random_bool(0.5) {
                let next = group.metadata.with_placement(&view.topics, group.name);
                let wanted: Vec<u32> = next
                    .topics
                    .values()
                    .flat_map(|t| t.queues.iter().filter_map(Home::stored))
                    .map(|s| s.storage_id)
                    .collect();
                group.logs.retain(|id, _| wanted.contains(id));
                group.metadata = next;
            }
        }
        self.acknowledge();
        self.produce();
        self.copy().await;
    }

    /// Acks the pending appends their group committed.
    fn acknowledge(&mut self) {
        let groups = &mut self.groups;
        let mut acked = Vec::new();
        self.pending.retain(|&(g, offset, value)| {
            let committed = groups[g].log().map_or(0, |(_, c)| *c as u64);
            if offset < committed {
                acked.push((offset, value));
                return false;
            }
            true
        });
        self.acked.extend(acked);
    }

    /// Clients append (a few records) to every group that takes them (at most one should).
    fn produce(&mut self) {
        for g in 0..2 {
            let group = &mut self.groups[g];
            if !group.runs() || !group.takes_appends() || !self.rng.random_bool(0.6) {
                continue;
            }
            let (log, _) = group.log().expect("storage where it takes appends");
            for _ in 0..self.rng.random_range(1..4) {
                log.push(self.next_value);
                self.pending.push((g, log.len() as u64 - 1, self.next_value));
                self.next_value += 1;
            }
        }
    }

    /// The target's copy: one read from the source, then its next step.
    async fn copy(&mut self) {
        let Some(t) = (0..2).find(|&g| matches!(self.groups[g].home(), Some(Home::Arriving { .. }))) else { return };
        let (left, right) = self.groups.split_at_mut(1);
        let (source, target) = if t == 1 { (&mut left[0], &mut right[0]) } else { (&mut right[0], &mut left[0]) };
        if !target.reaches_peer() || !source.runs() || !source.reaches_peer() {
            return;
        }
        let frozen = matches!(source.home(), Some(Home::Leaving { .. }));
        let Some((source_log, source_committed)) = source.log().map(|(l, c)| (l.clone(), *c)) else { return };
        let (log, committed) = target.log().expect("an arriving queue is stored");
        let next = log.len();
        let read: Vec<u64> = source_log.iter().take(source_committed).skip(next).take(READ_MAX).copied().collect();
        log.extend(&read);
        let (next, all_committed) = (log.len() as u64, *committed == log.len());
        let frozen_end = frozen.then_some(source_log.len() as u64);
        let to = Place { broker_group: target.name.into(), shard: 0 };
        match copy_step(next, source_committed as u64, frozen_end, false, target.froze) {
            CopyStep::Read | CopyStep::Thaw => {}
            CopyStep::Freeze => {
                if step(&self.store, MoveStep::Freeze, TOPIC, self.created, 0, &to).await.is_ok() {
                    target.froze = true;
                }
            }
            // Switched only once committed here, as `replicated_all` waits.
            CopyStep::Switch if all_committed => {
                if step(&self.store, MoveStep::Switch, TOPIC, self.created, 0, &to).await.is_ok() {
                    target.froze = false;
                }
            }
            CopyStep::Switch => {}
        }
    }

    async fn check(&mut self, s: u32) {
        let takers: Vec<&str> = self.groups.iter().filter(|g| g.runs() && g.takes_appends()).map(|g| g.name).collect();
        if takers.len() > 1 {
            self.violations.push(format!("step {s}: {takers:?} both take appends to the queue"));
        }
        let view = read_view(&self.store).await.expect("a memory store");
        let owner = &view.topics[TOPIC].queues[0].broker_group;
        let holder = self.groups.iter_mut().find(|g| g.name == owner).expect("a group");
        let log = holder.log().map(|(l, _)| l.clone()).unwrap_or_default();
        for (offset, value) in &self.acked {
            if log.get(*offset as usize) != Some(value) {
                let what = format!("step {s}: acknowledged {value} at {offset} is not in {owner}'s log");
                self.violations.push(what);
                return;
            }
        }
    }
}
