//! A throughput model of broker groups with sync replication, on modelled
//! machines (what this 2-CPU host cannot show: every group on machines of
//! its own). Each machine has a disk (writes one at a time, each taking a
//! sync's latency plus its bytes over the disk's bandwidth: group commit,
//! whatever arrived during one write goes in the next), a network link
//! (sends one at a time at its bandwidth, then its latency) and the
//! leader's CPU (a cost per message). A group is three nodes: its leader
//! writes what producers append while its followers fetch from it, the
//! leader shipping what it took before its own write ends (as the broker
//! does); each follower writes what it got and its next fetch is its ack.
//! A produce is acknowledged once the leader and both followers hold it
//! durably (the committed end: the minimum of their durable ends). Each
//! group has producers of its own that keep a window of 1 KiB messages
//! unacknowledged. On a paused tokio clock: deterministic, in simulated time.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Duration;
use tokio::sync::Notify;
use tokio::time::Instant;

const MESSAGE_BYTES: u64 = 1024;
/// Messages a producer sends per request.
const BATCH: u64 = 16;
/// Messages a producer keeps unacknowledged.
const WINDOW: u64 = 256;
const PRODUCERS: usize = 2;
const NODES: usize = 3;
const SYNC_LATENCY: Duration = Duration::from_micros(40);
const DISK_BYTES_PER_SEC: f64 = 1e9;
const LINK_LATENCY: Duration = Duration::from_micros(30);
const LINK_BYTES_PER_SEC: f64 = 1.25e9;
/// A leader's CPU per message appended (decode, check, index).
const CPU_PER_MESSAGE: Duration = Duration::from_micros(2);
/// Bytes of a fetch request, an ack, a produce answer.
const SMALL: u64 = 64;
const WARM_UP: Duration = Duration::from_millis(100);
const MEASURED: Duration = Duration::from_millis(400);
/// Tokio's timers count whole milliseconds: the model runs this many times
/// slower on the paused clock, so that a microsecond of it is a millisecond there.
const SLOWER: u32 = 1000;

/// A model duration on the paused clock.
fn clock(d: Duration) -> Duration {
    d * SLOWER
}

/// One resource that serves one request at a time, in order.
#[derive(Default)]
struct Busy(Cell<Option<Instant>>);

impl Busy {
    /// Takes the resource for `work` once it is free; when that ends.
    fn take(&self, work: Duration) -> Instant {
        let start = self.0.get().map_or(Instant::now(), |b| b.max(Instant::now()));
        self.0.set(Some(start + work));
        start + work
    }
}

#[derive(Default)]
struct Machine {
    disk: Busy,
    link: Busy,
    cpu: Busy,
}

impl Machine {
    async fn write(&self, bytes: u64) {
        let done = self.disk.take(clock(SYNC_LATENCY + Duration::from_secs_f64(bytes as f64 / DISK_BYTES_PER_SEC)));
        tokio::time::sleep_until(done).await;
    }

    /// Sends `bytes` from this machine; returns once they arrived.
    async fn send(&self, bytes: u64) {
        let sent = self.link.take(clock(Duration::from_secs_f64(bytes as f64 / LINK_BYTES_PER_SEC)));
        tokio::time::sleep_until(sent + clock(LINK_LATENCY)).await;
    }

    async fn compute(&self, work: Duration) {
        tokio::time::sleep_until(self.cpu.take(clock(work))).await;
    }
}

/// One group's log, in messages.
struct Group {
    appended: Cell<u64>,
    /// Durable ends: the leader's, then each follower's as the leader knows it.
    durable: RefCell<Vec<u64>>,
    grew: Notify,
    committed_moved: Notify,
}

impl Group {
    fn new(nodes: usize) -> Group {
        let durable = RefCell::new(vec![0; nodes]);
        Group { appended: Cell::new(0), durable, grew: Notify::new(), committed_moved: Notify::new() }
    }

    fn committed(&self) -> u64 {
        self.durable.borrow().iter().copied().min().unwrap_or(0)
    }

    fn set_durable(&self, node: usize, end: u64) {
        self.durable.borrow_mut()[node] = end;
        self.committed_moved.notify_waiters();
    }

    async fn appended_past(&self, end: u64) -> u64 {
        loop {
            let grew = self.grew.notified();
            if self.appended.get() > end {
                return self.appended.get();
            }
            grew.await;
        }
    }

    /// What a follower at `end` is shipped: what the leader took (its write
    /// may still run), or with `after_write` only what it wrote.
    async fn shipped_past(&self, end: u64, after_write: bool) -> u64 {
        if !after_write {
            return self.appended_past(end).await;
        }
        loop {
            let moved = self.committed_moved.notified();
            let written = self.durable.borrow()[0];
            if written > end {
                return written;
            }
            moved.await;
        }
    }
}

/// What runs: `groups` groups of `nodes` nodes (1: a single node), each
/// on machines of its own or all on the same `nodes`, each with
/// `producers` producers keeping `window` messages unacknowledged.
#[derive(Debug, Clone, Copy)]
pub struct Setup {
    pub groups: usize,
    pub nodes: usize,
    pub own_machines: bool,
    pub producers: usize,
    pub window: u64,
    /// Ship followers only what the leader wrote (the broker before it
    /// shipped rounds still at the leader's disk).
    pub ship_after_write: bool,
}

impl Setup {
    /// Groups of three nodes under full load.
    pub fn loaded(groups: usize, own_machines: bool) -> Setup {
        Setup { groups, nodes: NODES, own_machines, producers: PRODUCERS, window: WINDOW, ship_after_write: false }
    }
}

/// Acknowledged messages per simulated second, over all groups.
pub async fn aggregate(setup: Setup) -> f64 {
    let Setup { groups, nodes, own_machines, producers, window, ship_after_write } = setup;
    let machines: Vec<Rc<Machine>> =
        (0..if own_machines { groups * nodes } else { nodes }).map(|_| Rc::new(Machine::default())).collect();
    let acked = Rc::new(Cell::new(0u64));
    let measuring = Rc::new(Cell::new(false));
    let mut tasks = Vec::new();
    for g in 0..groups {
        let group = Rc::new(Group::new(nodes));
        // Node n of group g; sharing machines, each group's leader on another one.
        let on = |n: usize| machines[if own_machines { g * nodes + n } else { (g + n) % nodes }].clone();
        tasks.push(tokio::task::spawn_local(flusher(group.clone(), on(0))));
        for f in 1..nodes {
            tasks.push(tokio::task::spawn_local(follower(group.clone(), f, (on(0), on(f)), ship_after_write)));
        }
        for _ in 0..producers {
            let client = Rc::new(Machine::default());
            let counted = (acked.clone(), measuring.clone());
            tasks.push(tokio::task::spawn_local(producer(group.clone(), on(0), client, window, counted)));
        }
    }
    tokio::time::sleep(clock(WARM_UP)).await;
    measuring.set(true);
    tokio::time::sleep(clock(MEASURED)).await;
    measuring.set(false);
    tasks.iter().for_each(|t| t.abort());
    acked.get() as f64 / MEASURED.as_secs_f64()
}

/// The leader writes whatever was appended since its last write.
async fn flusher(group: Rc<Group>, leader: Rc<Machine>) {
    let mut written = 0;
    loop {
        let end = group.appended_past(written).await;
        leader.write((end - written) * MESSAGE_BYTES).await;
        written = end;
        group.set_durable(0, end);
    }
}

/// A follower fetches from its durable end; the leader ships what it took
/// (its own write may still run); the follower writes it, and its next
/// fetch tells the leader its new durable end.
async fn follower(group: Rc<Group>, f: usize, (leader, node): (Rc<Machine>, Rc<Machine>), after_write: bool) {
    let mut durable = 0;
    loop {
        node.send(SMALL).await;
        group.set_durable(f, durable);
        let end = group.shipped_past(durable, after_write).await;
        leader.send((end - durable) * MESSAGE_BYTES).await;
        node.write((end - durable) * MESSAGE_BYTES).await;
        durable = end;
    }
}

/// Sends batches while its window allows; each is acknowledged once committed.
async fn producer(
    group: Rc<Group>,
    leader: Rc<Machine>,
    client: Rc<Machine>,
    window: u64,
    (acked, measuring): (Rc<Cell<u64>>, Rc<Cell<bool>>),
) {
    let in_flight = Rc::new(Cell::new(0u64));
    let freed = Rc::new(Notify::new());
    loop {
        while in_flight.get() + BATCH > window {
            freed.notified().await;
        }
        in_flight.set(in_flight.get() + BATCH);
        client.send(BATCH * MESSAGE_BYTES).await;
        leader.compute(CPU_PER_MESSAGE * BATCH as u32).await;
        let end = group.appended.get() + BATCH;
        group.appended.set(end);
        group.grew.notify_waiters();
        let (group, leader, in_flight, freed) = (group.clone(), leader.clone(), in_flight.clone(), freed.clone());
        let (acked, measuring) = (acked.clone(), measuring.clone());
        tokio::task::spawn_local(async move {
            loop {
                let moved = group.committed_moved.notified();
                if group.committed() >= end {
                    break;
                }
                moved.await;
            }
            leader.send(SMALL).await;
            in_flight.set(in_flight.get() - BATCH);
            if measuring.get() {
                acked.set(acked.get() + BATCH);
            }
            freed.notify_one();
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn simulated(setup: Setup) -> f64 {
        let runtime =
            tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().expect("a runtime");
        tokio::task::LocalSet::new().block_on(&runtime, aggregate(setup))
    }

    /// Groups on machines of their own add up; groups sharing three
    /// machines share their disks, and flatten once those are full.
    #[test]
    fn throughput_grows_with_groups_on_machines_of_their_own() {
        let one = simulated(Setup::loaded(1, true));
        assert!(one > 100_000.0, "one group acknowledges {one:.0} msgs/s");
        let mut lines = vec![format!("1 group: {one:.0} msgs/s")];
        for groups in 2..=4 {
            let (own, shared) = (simulated(Setup::loaded(groups, true)), simulated(Setup::loaded(groups, false)));
            lines.push(format!(
                "{groups} groups: own machines {own:.0} msgs/s ({:.2}x), sharing three {shared:.0} msgs/s ({:.2}x)",
                own / one,
                shared / one
            ));
            assert!(own / one > 0.95 * groups as f64, "{}", lines.join("\n"));
            assert!(shared < own, "{}", lines.join("\n"));
        }
        eprintln!("{}", lines.join("\n"));
    }

    /// One batch in flight: a sync ack (three nodes, the leader shipping
    /// while it writes) against a single node's, as latency (the inverse of
    /// one producer's rate), and both under full load; and the sync ack as
    /// it was when the leader shipped only what it had written.
    #[test]
    fn a_sync_ack_costs_less_than_twice_a_single_nodes_on_machines_of_their_own() {
        let one_batch = |nodes, ship_after_write| Setup {
            groups: 1,
            nodes,
            own_machines: true,
            producers: 1,
            window: BATCH,
            ship_after_write,
        };
        let (single, sync) = (simulated(one_batch(1, false)), simulated(one_batch(NODES, false)));
        let before = simulated(one_batch(NODES, true));
        let full_single = simulated(Setup { nodes: 1, ..Setup::loaded(1, true) });
        let full_sync = simulated(Setup::loaded(1, true));
        let latency = |rate: f64| BATCH as f64 / rate * 1e6;
        eprintln!(
            "one batch in flight: single node {:.0} us, sync {:.0} us ({:.2}x; shipping after the leader's write {:.0} \
             us, {:.2}x); full load: single {full_single:.0} msgs/s, sync {full_sync:.0} msgs/s ({:.2}x)",
            latency(single),
            latency(sync),
            single / sync,
            latency(before),
            single / before,
            full_sync / full_single
        );
        assert!(single / sync < 2.0 && sync > before, "{single} {sync} {before}");
        assert!(full_sync / full_single > 0.7, "{full_single} {full_sync}");
    }
}
