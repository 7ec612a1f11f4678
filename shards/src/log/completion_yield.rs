//! Gives the shard's core to the kernel while durable writes are in flight.
//!
//! An O_DSYNC write to a disk with a volatile cache and no FUA completes
//! through kernel work on the core that took the write's completion, which is
//! the shard's own core: a direct-I/O worker issues the cache flush and only
//! then completes the write. A worker woken on a core whose thread is running
//! may wait until that thread sleeps or the next scheduler tick (4 ms at
//! HZ=250). Measured on this project's VM: fio's 4 KiB O_DSYNC writes took
//! 3.85 ms instead of 0.11 ms with a busy loop, even a SCHED_IDLE one, on the
//! core that completes them, and 0.14 ms when that loop called sched_yield
//! every 50 us. The shard sleeps only when it parks, so under load each
//! durable write took 100-200 us longer than the disk did.
//!
//! While a durable write is in flight this task calls sched_yield every
//! `completion_yield`: a cheap no-op when nothing else is runnable on the
//! core, the worker's turn when it is.
//!
//! For at most `YIELD_LIMIT` without a write starting or finishing, though.
//! A shard that yields every 20 us never sleeps and keeps its core; when the
//! kernel's work does not get the core from a yield (two brokers' shards
//! yielding to each other on one core), nothing else ends that: with two
//! brokers on the same two cores, durable writes stood still for 92 of 150
//! seconds, and the kernel logged its direct-I/O completion workqueue on
//! that core stuck for up to 204 s (`perf-scripts/shared-cores.sh`). Past the
//! limit the task waits for the next write to start or finish: the shard
//! parks when it has nothing else to do, or the scheduler's tick hands the
//! core over, as without yields.

use crate::probe::stats::add;
use crate::shard::Inner;
use crate::signal::Signal;
use std::cell::Cell;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// The flusher's durable writes, as the task follows them.
pub(crate) struct Writes {
    pub in_flight: Rc<Cell<usize>>,
    pub started: Rc<Signal>,
    pub finished: Rc<Signal>,
}

/// Starts the task in a task queue of its own, so its turn comes when its
/// timer fires, not behind every ready request. None when `completion_yield`
/// is zero. Dropping the task stops it.
pub(crate) fn start(inner: Rc<Inner>, writes: Writes) -> Option<glommio::Task<()>> {
    if inner.config.completion_yield.is_zero() {
        return None;
    }
    let executor = glommio::executor();
    let queue =
        executor.create_task_queue(glommio::Shares::default(), glommio::Latency::NotImportant, "completion-yield");
    match glommio::spawn_local_into(run(inner, writes), queue) {
        Ok(task) => Some(task),
        Err(error) => {
            tracing::warn!(%error, "cannot start the completion yield task; durable writes may complete later");
            None
        }
    }
}

/// Longest the task yields without a durable write starting or finishing.
const YIELD_LIMIT: Duration = Duration::from_millis(1);

async fn run(inner: Rc<Inner>, writes: Writes) {
    let Writes { in_flight, started, finished } = writes;
    // One timer, reset for every pause: a new one would allocate each time.
    let mut pause = glommio::timer::Timer::new(inner.config.completion_yield);
    loop {
        if in_flight.get() == 0 {
            started.wait().await;
            continue;
        }
        // Created before the yields: a write that starts or finishes during them counts.
        let mut moved = std::pin::pin!(futures_lite::future::or(started.wait(), finished.wait()));
        let until = Instant::now() + YIELD_LIMIT;
        loop {
            std::thread::yield_now(); // sched_yield(2)
            add(&inner.counters.kernel_yields, 1);
            pause.reset(inner.config.completion_yield);
            let paused = async {
                (&mut pause).await;
                false
            };
            let progress = async {
                moved.as_mut().await;
                true
            };
            if futures_lite::future::or(progress, paused).await {
                break;
            }
            if Instant::now() >= until {
                add(&inner.counters.kernel_yields_stopped, 1);
                moved.as_mut().await;
                break;
            }
        }
    }
}
