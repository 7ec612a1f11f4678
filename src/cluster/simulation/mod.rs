//! A seeded, deterministic simulation of a broker group (in the manner of
//! TigerBeetle's VOPR): the real control plane, node life and replication
//! of three nodes on a memory store, under crashes, pauses past the lease,
//! nodes cut off, and lost or delayed calls, all on a paused tokio clock in
//! one thread. The same seed replays the same run exactly. `moves.rs` runs
//! a queue's move between two groups under crashes, pauses and cut-offs;
//! `throughput.rs` models groups on disks and links of their own (or
//! shared) and measures aggregate throughput against their count.
//!
//! `cargo test --lib simulation` runs `RINGMQ_SIM_SEEDS` seeds (default
//! 16) from `RINGMQ_SIM_FIRST` (default 1); `RINGMQ_SIM_SEED=N` runs seed N
//! alone and prints its faults.

mod link;
mod moves;
mod throughput;
mod world;

use link::Weather;
use std::time::Duration;
use world::{Outcome, World};

/// Time with faults, in each run.
const FAULTY: Duration = Duration::from_secs(90);
/// The weather while faults last.
const STORMY: Weather = Weather { delay_max: Duration::from_millis(80), lost_calls: 0.02, lost_answers: 0.02 };

fn simulate(seed: u64) -> Outcome {
    if std::env::var_os("RINGMQ_SIM_TRACE").is_some() {
        // The nodes' logs too, stamped with the simulated time.
        let filter = tracing_subscriber::EnvFilter::new("ringmq::cluster=info,ringmq::server=info");
        let fmt = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(false);
        let _ = fmt.with_timer(SimTime).try_init();
    }
    let runtime =
        tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().expect("a runtime");
    let local = tokio::task::LocalSet::new();
    local.block_on(&runtime, async { World::new(seed).run(FAULTY, STORMY).await })
}

/// Real time a seed may take (about a second is usual): past it, a task
/// spins without yielding, so simulated time stands still.
const SEED_WALL_TIME: Duration = Duration::from_secs(120);

/// `simulate` on a thread of its own, failed if it does not end in time
/// (the spinning thread is left behind; the test fails and the process ends).
fn simulate_bounded(seed: u64) -> Result<Outcome, String> {
    let (done, outcome) = std::sync::mpsc::channel();
    std::thread::spawn(move || done.send(simulate(seed)));
    outcome.recv_timeout(SEED_WALL_TIME).map_err(|_| {
        format!("did not end within {SEED_WALL_TIME:?} of real time: a task spins without yielding, so simulated time stands still")
    })
}

/// Log stamps in simulated time since the runtime started.
struct SimTime;

impl tracing_subscriber::fmt::time::FormatTime for SimTime {
    fn format_time(&self, w: &mut tracing_subscriber::fmt::format::Writer<'_>) -> std::fmt::Result {
        thread_local!(static ORIGIN: tokio::time::Instant = tokio::time::Instant::now());
        write!(w, "{:>9.3?}", ORIGIN.with(|origin| origin.elapsed()))
    }
}

fn env(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

#[test]
fn seeded_runs_keep_one_leader_an_epoch_every_ack_on_the_in_sync_set_and_recover() {
    let (seeds, verbose) = seeds();
    let mut failed = Vec::new();
    for seed in seeds {
        let outcome = match simulate_bounded(seed) {
            Ok(outcome) => outcome,
            Err(hung) => {
                failed
                    .push(format!("seed {seed}: {hung} (replay: RINGMQ_SIM_SEED={seed} cargo test --lib simulation)"));
                break;
            }
        };
        if verbose {
            outcome.faults.iter().for_each(|f| eprintln!("  {f}"));
        }
        eprintln!(
            "seed {seed}: {} acknowledged, {} epochs, {} faults, {} violations",
            outcome.acked,
            outcome.epochs,
            outcome.faults.len() - 1,
            outcome.violations.len()
        );
        if let Some(first) = outcome.violations.first() {
            failed.push(format!("seed {seed}: {first} (replay: RINGMQ_SIM_SEED={seed} cargo test --lib simulation)"));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

/// The seeds a run takes: `RINGMQ_SIM_SEED` alone, else `RINGMQ_SIM_SEEDS` from `RINGMQ_SIM_FIRST`.
fn seeds() -> (std::ops::Range<u64>, bool) {
    match env("RINGMQ_SIM_SEED") {
        Some(seed) => (seed..seed + 1, true),
        None => {
            let first = env("RINGMQ_SIM_FIRST").unwrap_or(1);
            (first..first + env("RINGMQ_SIM_SEEDS").unwrap_or(16), false)
        }
    }
}

#[test]
fn seeded_moves_keep_one_owner_and_every_ack_and_end_switched() {
    let (seeds, verbose) = seeds();
    let mut failed = Vec::new();
    for seed in seeds {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().expect("a runtime");
        let outcome = runtime.block_on(moves::simulate_move(seed));
        if verbose {
            outcome.faults.iter().for_each(|f| eprintln!("  {f}"));
        }
        eprintln!(
            "move seed {seed}: {} acknowledged, {} moves, {} faults",
            outcome.acked,
            outcome.moves,
            outcome.faults.len()
        );
        if let Some(first) = outcome.violations.first() {
            failed.push(format!("seed {seed}: {first} (replay: RINGMQ_SIM_SEED={seed} cargo test --lib simulation)"));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

#[test]
fn a_seed_replays_the_same_run() {
    let (a, b) = (simulate(7), simulate(7));
    assert_eq!((a.acked, a.epochs, &a.faults), (b.acked, b.epochs, &b.faults));
}
