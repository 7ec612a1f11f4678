//! Holds of a shard's thread: a blocking call, a long loop, or the CPU
//! taken by other threads or by the host. Each shard's probe task beats
//! the shard's `Pulse`; the watchdog thread (`watchdog.rs`) sees a pulse
//! that stopped beating, says where the thread was and records the hold
//! here, where the shard's metrics and its shutdown log read it.

use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::{LazyLock, Mutex};
use std::time::{Duration, Instant};

/// The pulses' clock: nanoseconds since the first beat of the process.
static EPOCH: LazyLock<Instant> = LazyLock::new(Instant::now);

/// The pulses' clock now.
pub fn now_ns() -> u64 {
    EPOCH.elapsed().as_nanos() as u64
}

/// Shortest and longest time between beats: a beat is a timer wake-up of
/// an otherwise idle shard, so it sets what watching costs an idle broker.
const BEAT_MIN: Duration = Duration::from_millis(1);
const BEAT_MAX: Duration = Duration::from_millis(50);

/// What held a shard's thread, from the thread's scheduler statistics over
/// the hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// It ran the broker's code all along: a long loop or a busy task.
    Running,
    /// It slept in a system call (the stack names the call).
    Blocked,
    /// It was ready to run and waited for its CPU: other threads ran there.
    Starved,
    /// The host took the CPU from this machine (steal time).
    Stolen,
}

impl Cause {
    pub const ALL: [Cause; 4] = [Cause::Running, Cause::Blocked, Cause::Starved, Cause::Stolen];

    pub fn as_str(self) -> &'static str {
        match self {
            Cause::Running => "running",
            Cause::Blocked => "blocked",
            Cause::Starved => "starved",
            Cause::Stolen => "stolen",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// One hold, as the watchdog saw it.
#[derive(Debug, Clone)]
pub struct Hold {
    /// How long the thread missed its beats.
    pub held: Duration,
    pub cause: Cause,
    /// The thread's time on its CPU, waiting for it, and the host's steal
    /// on that CPU, from the hold's detection to its end.
    pub on_cpu: Duration,
    pub waiting: Duration,
    pub stolen: Duration,
    /// The thread's state when the hold was seen (`R` running or ready,
    /// `S` sleeping, `D` in the kernel) and its system call, if in one.
    pub state: char,
    pub syscall: Option<String>,
    /// Where the thread was: its frames' addresses, innermost first, when it
    /// could be captured and the thread ran or slept there (a starved
    /// thread was stopped wherever the kernel took its CPU).
    pub stack: Vec<usize>,
}

/// A shard's heartbeat and the holds seen on it, shared between the shard
/// (which beats) and the watchdog (which watches and records).
#[derive(Debug)]
pub struct Pulse {
    shard: usize,
    cpu: usize,
    every: Duration,
    /// The shard thread's id; 0 while it is not beating.
    tid: AtomicI32,
    beat_ns: AtomicU64,
    holds: [AtomicU64; Cause::ALL.len()],
    longest_ns: AtomicU64,
    last: Mutex<Option<Hold>>,
    /// Time the thread ran tasks and polled I/O, neither spinning idle nor parked.
    busy_ns: AtomicU64,
}

impl Pulse {
    /// The pulse of shard `shard` on `cpu`, beating often enough for holds
    /// past `threshold` to be seen.
    pub fn new(shard: usize, cpu: usize, threshold: Duration) -> Pulse {
        Pulse {
            shard,
            cpu,
            every: (threshold / 2).clamp(BEAT_MIN, BEAT_MAX),
            tid: AtomicI32::new(0),
            beat_ns: AtomicU64::new(0),
            holds: Default::default(),
            longest_ns: AtomicU64::new(0),
            last: Mutex::new(None),
            busy_ns: AtomicU64::new(0),
        }
    }

    pub fn shard(&self) -> usize {
        self.shard
    }

    pub fn cpu(&self) -> usize {
        self.cpu
    }

    /// The beating thread, or None while it does not beat.
    pub fn tid(&self) -> Option<i32> {
        Some(self.tid.load(Ordering::Acquire)).filter(|&t| t != 0)
    }

    /// When the latest beat came (the pulses' clock, ns).
    pub fn latest_beat(&self) -> u64 {
        self.beat_ns.load(Ordering::Acquire)
    }

    /// How long past its due time the next beat is, at `now_ns`; a beat
    /// at `beat_ns` came this late when `now_ns` is the beat after it.
    pub fn late(&self, beat_ns: u64, now_ns: u64) -> Duration {
        Duration::from_nanos(now_ns.saturating_sub(beat_ns)).saturating_sub(self.every)
    }

    fn beat(&self) {
        self.beat_ns.store(now_ns(), Ordering::Release);
    }

    /// Adds the executor's run time since the last beat. glommio counts it
    /// without the idle spin and park (`--idle-spin-us`), so it is the
    /// shard's work, where the thread's CPU time counts the spin too; taking
    /// the executor's stats resets them, so only the beat takes them.
    fn add_busy(&self) {
        let ran = glommio::executor().executor_stats().total_runtime();
        self.busy_ns.fetch_add(ran.as_nanos() as u64, Ordering::Relaxed);
    }

    /// The shard thread's busy time so far (as of its latest beat).
    pub fn busy(&self) -> Duration {
        Duration::from_nanos(self.busy_ns.load(Ordering::Relaxed))
    }

    /// Holds seen so far, of every cause.
    pub fn count(&self) -> u64 {
        self.holds.iter().map(|h| h.load(Ordering::Relaxed)).sum()
    }

    pub fn count_of(&self, cause: Cause) -> u64 {
        self.holds[cause.index()].load(Ordering::Relaxed)
    }

    /// The longest hold so far.
    pub fn longest(&self) -> Duration {
        Duration::from_nanos(self.longest_ns.load(Ordering::Relaxed))
    }

    /// The latest hold, if any.
    pub fn last(&self) -> Option<Hold> {
        self.last.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Records a hold the watchdog saw end.
    pub fn record(&self, hold: Hold) {
        self.holds[hold.cause.index()].fetch_add(1, Ordering::Relaxed);
        self.longest_ns.fetch_max(hold.held.as_nanos() as u64, Ordering::Relaxed);
        *self.last.lock().unwrap_or_else(|e| e.into_inner()) = Some(hold);
    }
}

/// Beats `pulse` from the shard's thread until dropped; the watchdog stops
/// watching it then.
pub async fn probe(pulse: std::sync::Arc<Pulse>) {
    // A new executor's first timer comes ~15 ms late: not a hold of the shard's.
    glommio::timer::sleep(pulse.every).await;
    let _beating = Beating::start(&pulse);
    loop {
        pulse.beat();
        pulse.add_busy();
        glommio::timer::sleep(pulse.every).await;
    }
}

/// While alive, the pulse names its thread and is watched.
struct Beating<'a>(&'a Pulse);

impl<'a> Beating<'a> {
    fn start(pulse: &'a Pulse) -> Beating<'a> {
        pulse.beat();
        pulse.tid.store(rustix::thread::gettid().as_raw_nonzero().get(), Ordering::Release);
        Beating(pulse)
    }
}

impl Drop for Beating<'_> {
    fn drop(&mut self) {
        self.0.tid.store(0, Ordering::Release);
    }
}
