//! The simulated broker group: `NODES` nodes on one memory store, each with
//! its real control plane and life (`node::serve`) on a task set of its own
//! that the world can stop running (a pause) or drop (a crash, the model
//! log surviving as a disk does). A node's shard is a model log; a leader's
//! is driven by the real `Replication`, fed by its followers' fetches.
//!
//! Faults come from the seed: crashes, pauses past the lease, a node cut
//! off from everything, a node partitioned from a peer (or from all of
//! them) while it still reaches the store, and calls to the store delayed,
//! lost, or done with their answer lost. After every step the world checks
//! what must always hold; once the faults stop, that the group leads and
//! acknowledges again.

use super::super::control_plane::ControlPlane;
use super::super::isr::{isr_key, Isr};
use super::super::node::{self, Data, DataError, Role, Wake};
use super::super::store::{MemoryStore, Store};
use super::super::ClusterConfig;
use super::link::{Link, Sky, Weather};
use crate::server::{ClusterRole, IsrLink, Lead, ReplicatedLog, Replication, ReplicationConfig, ReplicationMode};
use proptest::prelude::RngExt;
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;
use tokio::task::{JoinHandle, LocalSet};
use tokio::time::Instant;

const GROUP: &str = "g";
const NODES: usize = 3;
const LEASE: Duration = Duration::from_secs(2);
/// How often the data moves: fetches, a client's write, acks, the checks.
const STEP: Duration = Duration::from_millis(20);
/// Calm time the group has to lead and acknowledge again once faults stop.
const RECOVERY: Duration = Duration::from_secs(60);
const REPLICATION: ReplicationConfig = ReplicationConfig {
    mode: ReplicationMode::Sync,
    insync_min: 2,
    lag_max: Duration::from_secs(1),
    ack_timeout: Duration::from_secs(3),
};

/// One entry of a model log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    epoch: u64,
    value: u64,
}

/// A model log as replication sees it: one unit per entry, durable at once.
struct LogView<'a>(&'a [Entry]);

impl ReplicatedLog for LogView<'_> {
    fn ends(&self) -> (u64, u64) {
        (self.0.len() as u64, self.0.len() as u64)
    }

    fn commit_to(&self, _: u64) {}
}

enum Serving {
    Stopped,
    Leader { epoch: u64, replication: Rc<Replication>, isr: IsrLink, expired: Instant },
    Follower { epoch: u64, leader: String },
}

/// A node's shard: its log survives crashes.
struct Model {
    log: Vec<Entry>,
    stored_epoch: u64,
    serving: Serving,
}

/// What the nodes' data tell the world.
#[derive(Default)]
struct Witness {
    /// Who started leading each epoch.
    leaders: RefCell<BTreeMap<u64, String>>,
    violations: RefCell<Vec<String>>,
    origin: Cell<Option<(Instant, std::time::Instant)>>,
}

impl Witness {
    fn violated(&self, what: String) {
        self.violations.borrow_mut().push(what);
    }

    /// The simulated time, as the std instant `Replication` counts in.
    fn now(&self) -> std::time::Instant {
        let (origin, std_origin) = self.origin.get().expect("set at the start");
        std_origin + (Instant::now() - origin)
    }
}

/// A node's `Data`: the model log.
struct ModelData {
    name: String,
    model: Rc<RefCell<Model>>,
    base: ClusterRole,
    witness: Rc<Witness>,
}

impl Data for ModelData {
    fn shards(&self) -> usize {
        1
    }

    fn last_epoch(&self) -> Result<u64, DataError> {
        Ok(self.model.borrow().stored_epoch)
    }

    fn start(&mut self, epoch: u64, role: Role) -> Result<Vec<u64>, DataError> {
        let mut m = self.model.borrow_mut();
        m.serving = match role {
            Role::Leader => {
                let before = self.witness.leaders.borrow_mut().insert(epoch, self.name.clone());
                if let Some(other) = before.filter(|other| *other != self.name) {
                    self.witness.violated(format!("{other} and {} both led epoch {epoch}", self.name));
                }
                let role = ClusterRole { epoch, lead: Lead::Leader, ..self.base.clone() };
                let replication = Replication::new(&role, 0, &LogView(&m.log), self.witness.now());
                let isr = self.base.isr.clone();
                Serving::Leader { epoch, replication: Rc::new(replication), isr, expired: Instant::now() }
            }
            Role::Follower { leader, cuts } => {
                if let Some(cut) = cuts[0] {
                    m.log.truncate(cut as usize);
                }
                Serving::Follower { epoch: leader.epoch, leader: leader.node }
            }
        };
        Ok(vec![m.log.len() as u64])
    }

    fn store_epoch(&mut self, epoch: u64) -> Result<(), DataError> {
        self.model.borrow_mut().stored_epoch = epoch;
        Ok(())
    }

    fn serving(&mut self) {}

    fn stop(&mut self) {
        self.model.borrow_mut().serving = Serving::Stopped;
    }
}

/// Whether a node's tasks run.
#[derive(Default)]
struct Pause {
    on: Cell<bool>,
    waker: RefCell<Option<Waker>>,
}

/// A node's task set, run only while it is not paused.
struct NodeTasks {
    tasks: LocalSet,
    pause: Rc<Pause>,
}

impl Future for NodeTasks {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.pause.on.get() {
            *self.pause.waker.borrow_mut() = Some(cx.waker().clone());
            return Poll::Pending;
        }
        Pin::new(&mut self.tasks).poll(cx)
    }
}

struct Node {
    name: String,
    model: Rc<RefCell<Model>>,
    cut: Arc<AtomicBool>,
    /// Peers this node cannot reach nor be reached by (the store it still can).
    apart_from: Vec<usize>,
    pause: Rc<Pause>,
    /// None while crashed.
    tasks: Option<JoinHandle<()>>,
    /// When the current fault (crash, pause or cut) ends.
    fault_ends: Option<Instant>,
}

impl Node {
    fn up(&self) -> bool {
        self.tasks.is_some() && !self.pause.on.get() && !self.cut.load(Ordering::Relaxed)
    }
}

/// A client write the leader has not acknowledged yet.
struct Pending {
    leader: usize,
    epoch: u64,
    index: usize,
    value: u64,
}

/// What a seed's run found.
#[derive(Debug)]
pub struct Outcome {
    pub violations: Vec<String>,
    pub acked: usize,
    pub epochs: u64,
    /// Faults the run made, in order.
    pub faults: Vec<String>,
}

pub struct World {
    store: MemoryStore,
    sky: Arc<Mutex<Sky>>,
    nodes: Vec<Node>,
    witness: Rc<Witness>,
    pending: Vec<Pending>,
    /// Acknowledged writes: (log index, value).
    acked: Vec<(usize, u64)>,
    next_value: u64,
    faults: Vec<String>,
}

impl World {
    /// A group of `NODES` on a new store, faults drawn from `seed`; on a
    /// paused current-thread runtime, inside a `LocalSet`.
    pub fn new(seed: u64) -> World {
        let mut bytes = [0u8; 32];
        bytes[..8].copy_from_slice(&seed.to_le_bytes());
        let rng = proptest::test_runner::TestRng::from_seed(proptest::test_runner::RngAlgorithm::ChaCha, &bytes);
        let sky = Arc::new(Mutex::new(Sky { rng, weather: Weather::CALM }));
        let witness = Rc::new(Witness::default());
        witness.origin.set(Some((Instant::now(), std::time::Instant::now())));
        let nodes = (0..NODES)
            .map(|i| Node {
                name: format!("n{i}"),
                model: Rc::new(RefCell::new(Model { log: Vec::new(), stored_epoch: 0, serving: Serving::Stopped })),
                cut: Arc::default(),
                apart_from: Vec::new(),
                pause: Rc::default(),
                tasks: None,
                fault_ends: None,
            })
            .collect();
        let mut world = World {
            store: MemoryStore::new(),
            sky,
            nodes,
            witness,
            pending: Vec::new(),
            acked: Vec::new(),
            next_value: 1,
            faults: Vec::new(),
        };
        (0..NODES).for_each(|i| world.start(i));
        world
    }

    fn rng<T>(&self, f: impl FnOnce(&mut proptest::test_runner::TestRng) -> T) -> T {
        f(&mut self.sky.lock().expect("the sky").rng)
    }

    /// Starts node `i` afresh: a new control plane and life, its log as it was.
    fn start(&mut self, i: usize) {
        let node = &self.nodes[i];
        let (wake, mut wakes) = tokio::sync::mpsc::unbounded_channel();
        let on_lost: super::super::OnLost = Box::new(move |why| {
            let _ = wake.send(Wake::RoleLost(why));
        });
        let config = ClusterConfig {
            endpoints: Vec::new(),
            broker_group: GROUP.into(),
            node: node.name.clone(),
            advertise: format!("{}:9092", node.name),
            lease_ttl: LEASE,
            shards: 1,
            preferred_leader: false,
        };
        let link = Link::new(self.store.clone(), self.sky.clone(), node.cut.clone());
        let (control, run) = ControlPlane::on(link, config, on_lost);
        let isr = control.isr_link();
        let base = ClusterRole {
            broker_group: GROUP.into(),
            node: node.name.clone(),
            epoch: 0,
            replication: REPLICATION,
            lead: Lead::Leader,
            isr,
            placement: control.placement_link(),
            accounts: control.accounts_link(),
        };
        let name = node.name.clone();
        let mut data = ModelData { name: name.clone(), model: node.model.clone(), base, witness: self.witness.clone() };
        let tasks = LocalSet::new();
        tasks.spawn_local(run);
        tasks.spawn_local(async move {
            if let Err(error) = node::serve(&control, &name, &mut data, &mut wakes).await {
                tracing::warn!(node = %name, %error, "the simulated node stopped");
            }
        });
        let pause = node.pause.clone();
        self.nodes[i].tasks = Some(tokio::task::spawn_local(NodeTasks { tasks, pause }));
    }

    fn crash(&mut self, i: usize) {
        if let Some(tasks) = self.nodes[i].tasks.take() {
            tasks.abort();
        }
        self.nodes[i].model.borrow_mut().serving = Serving::Stopped;
    }

    fn resume(&self, i: usize) {
        self.nodes[i].pause.on.set(false);
        if let Some(waker) = self.nodes[i].pause.waker.borrow_mut().take() {
            waker.wake();
        }
    }

    /// Ends the faults whose time came (all of them when `all`).
    fn heal(&mut self, now: Instant, all: bool) {
        for i in 0..NODES {
            if !self.nodes[i].fault_ends.is_some_and(|end| all || end <= now) {
                continue;
            }
            self.nodes[i].fault_ends = None;
            if self.nodes[i].tasks.is_none() {
                self.start(i);
            }
            self.resume(i);
            self.nodes[i].cut.store(false, Ordering::Relaxed);
            self.nodes[i].apart_from.clear();
        }
    }

    /// Maybe starts a fault on a node that has none.
    fn strike(&mut self, now: Instant, at: Duration) {
        let chosen = self.rng(|r| {
            (
                r.random_range(0..NODES),
                r.random_range(0..1000u32),
                r.random_range(300..6000u64),
                r.random_range(0..NODES),
            )
        });
        let (i, draw, lasts_ms, peer) = chosen;
        // About one fault a node every 5 s.
        if self.nodes[i].fault_ends.is_some() || draw >= 4 * NODES as u32 {
            return;
        }
        let kind = match draw % 4 {
            0 => {
                self.crash(i);
                "crashed".to_string()
            }
            1 => {
                self.nodes[i].pause.on.set(true);
                "paused".to_string()
            }
            2 => {
                self.nodes[i].cut.store(true, Ordering::Relaxed);
                "cut off".to_string()
            }
            // A peer drawn as the node itself: apart from every peer.
            _ if peer == i => {
                self.nodes[i].apart_from = (0..NODES).filter(|&p| p != i).collect();
                "partitioned from its peers".to_string()
            }
            _ => {
                self.nodes[i].apart_from = vec![peer];
                format!("partitioned from {}", self.nodes[peer].name)
            }
        };
        self.nodes[i].fault_ends = Some(now + Duration::from_millis(lasts_ms));
        self.faults.push(format!("{at:?}: {} {kind} for {lasts_ms} ms", self.nodes[i].name));
    }

    /// Whether nodes `a` and `b` cannot reach each other.
    fn apart(&self, a: usize, b: usize) -> bool {
        self.nodes[a].apart_from.contains(&b) || self.nodes[b].apart_from.contains(&a)
    }

    /// The data's step: followers fetch, leaders expire lagging followers,
    /// a client writes to the leader, and what is committed is acknowledged.
    fn move_data(&mut self) {
        let now = self.witness.now();
        let lost = self.rng(|r| (0..NODES).map(|_| r.random_bool(0.05)).collect::<Vec<bool>>());
        for (f, lost) in lost.into_iter().enumerate() {
            let (epoch, leader) = match &self.nodes[f].model.borrow().serving {
                Serving::Follower { epoch, leader } => (*epoch, leader.clone()),
                _ => continue,
            };
            let Some(l) = self.nodes.iter().position(|n| n.name == leader) else { continue };
            if l == f || !self.nodes[f].up() || !self.nodes[l].up() || self.apart(f, l) || lost {
                continue;
            }
            let (follower, leading) = (self.nodes[f].model.clone(), self.nodes[l].model.clone());
            let leading = leading.borrow();
            let Serving::Leader { epoch: led, replication, .. } = &leading.serving else { continue };
            if *led != epoch {
                continue;
            }
            let mut follower = follower.borrow_mut();
            let from = follower.log.len();
            let shared = from.min(leading.log.len());
            if follower.log[..shared] != leading.log[..shared] {
                let first = (0..shared).find(|&i| follower.log[i] != leading.log[i]);
                self.witness.violated(format!(
                    "{} follows {leader} in epoch {epoch} with a log that differs from its leader's at {first:?}: {:?} there, {:?} on the leader",
                    self.nodes[f].name,
                    first.map(|i| follower.log[i]),
                    first.map(|i| leading.log[i]),
                ));
            }
            replication.fetched(&LogView(&leading.log), &self.nodes[f].name, from as u64, now);
            let more = leading.log.len().saturating_sub(from).min(8);
            follower.log.extend_from_slice(&leading.log[from..from + more]);
        }
        for l in 0..NODES {
            if !self.nodes[l].up() {
                continue;
            }
            let mut m = self.nodes[l].model.borrow_mut();
            let m = &mut *m;
            let Serving::Leader { epoch, replication, isr, expired } = &mut m.serving else { continue };
            if expired.elapsed() >= REPLICATION.lag_max / 4 {
                replication.expire(&LogView(&m.log), now);
                *expired = Instant::now();
            }
            if isr.deposed.load(Ordering::Acquire) {
                continue;
            }
            let value = self.next_value;
            self.next_value += 1;
            m.log.push(Entry { epoch: *epoch, value });
            self.pending.push(Pending { leader: l, epoch: *epoch, index: m.log.len() - 1, value });
        }
        let nodes = &self.nodes;
        let acked = &mut self.acked;
        self.pending.retain(|p| {
            let m = nodes[p.leader].model.borrow();
            match &m.serving {
                Serving::Leader { epoch, replication, isr, .. } if *epoch == p.epoch => {
                    if isr.deposed.load(Ordering::Acquire) {
                        return false;
                    }
                    let done = replication.committed() > p.index as u64;
                    if done {
                        acked.push((p.index, p.value));
                    }
                    !done
                }
                // The leader stopped: the write's outcome is unknown.
                _ => false,
            }
        });
    }

    /// Each node as it stands, for a violation's report.
    fn describe(&self) -> String {
        let node = |n: &Node| {
            let m = n.model.borrow();
            let serving = match &m.serving {
                Serving::Stopped => "stopped".to_string(),
                Serving::Leader { epoch, replication, isr, .. } => format!(
                    "leads {epoch} (committed {}, confirmed {:?}, deposed {})",
                    replication.committed(),
                    isr.confirmed(),
                    isr.deposed.load(Ordering::Acquire)
                ),
                Serving::Follower { epoch, leader } => format!("follows {leader} in {epoch}"),
            };
            let state = match (n.tasks.is_some(), n.pause.on.get(), n.cut.load(Ordering::Relaxed)) {
                (false, ..) => "crashed",
                (_, true, _) => "paused",
                (_, _, true) => "cut off",
                _ if !n.apart_from.is_empty() => "partitioned",
                _ => "up",
            };
            format!(
                "{} {state}, {serving}, log {} (last {:?}), stored epoch {}",
                n.name,
                m.log.len(),
                m.log.last(),
                m.stored_epoch
            )
        };
        self.nodes.iter().map(node).collect::<Vec<_>>().join("; ")
    }

    /// Every acknowledged write is in the log of every member of the stored in-sync set.
    async fn check(&self) {
        let stored = self.store.get(&isr_key(GROUP)).await.expect("the memory store answers");
        let Some(isr) = stored.map(|kv| kv.json::<Isr>().expect("a stored in-sync set")) else { return };
        for member in &isr.members {
            let Some(node) = self.nodes.iter().find(|n| n.name == *member) else { continue };
            let log = &node.model.borrow().log;
            for &(index, value) in &self.acked {
                if log.get(index).map(|e| e.value) != Some(value) {
                    self.witness.violated(format!(
                        "acknowledged write {value} at {index} is not in the log of {member}, in the in-sync set {:?} of epoch {} (it has {:?}); {}",
                        isr.members,
                        isr.epoch,
                        log.get(index),
                        self.describe()
                    ));
                    return;
                }
            }
        }
    }

    /// Runs `faulty` with faults, then `RECOVERY` without: what was found.
    pub async fn run(mut self, faulty: Duration, weather: Weather) -> Outcome {
        let start = Instant::now();
        self.sky.lock().expect("the sky").weather = weather;
        let trace = std::env::var_os("RINGMQ_SIM_TRACE").is_some();
        while start.elapsed() < faulty && self.witness.violations.borrow().is_empty() {
            let now = Instant::now();
            self.heal(now, false);
            self.strike(now, now - start);
            self.move_data();
            self.check().await;
            if trace {
                eprintln!("{:?}: {}", now - start, self.describe());
            }
            tokio::time::sleep(STEP).await;
        }
        self.heal(Instant::now(), true);
        self.sky.lock().expect("the sky").weather = Weather::CALM;
        self.faults.push(format!("{:?}: calm", start.elapsed()));
        let calm = self.acked.len();
        let recovered = Instant::now();
        while recovered.elapsed() < RECOVERY && self.witness.violations.borrow().is_empty() {
            self.move_data();
            self.check().await;
            tokio::time::sleep(STEP).await;
        }
        if self.acked.len() == calm {
            let listed = self.store.list("/ringmq/broker-groups/").await.expect("the memory store answers");
            let keys: Vec<String> =
                listed.kvs.iter().map(|kv| format!("{}={}", kv.key, String::from_utf8_lossy(&kv.value))).collect();
            let state = format!("{}; store: {keys:?}", self.describe());
            self.witness
                .violated(format!("no write was acknowledged in the {RECOVERY:?} after the faults stopped: {state}"));
        }
        let epochs = self.witness.leaders.borrow().keys().next_back().copied().unwrap_or(0);
        (0..NODES).for_each(|i| self.crash(i));
        Outcome { violations: self.witness.violations.take(), acked: self.acked.len(), epochs, faults: self.faults }
    }
}
