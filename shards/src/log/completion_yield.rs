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

use crate::probe::stats::add;
use crate::shard::Inner;
use crate::signal::Signal;
use std::cell::Cell;
use std::rc::Rc;

/// Starts the task in a task queue of its own, so its turn comes when its
/// timer fires, not behind every ready request. None when `completion_yield`
/// is zero. Dropping the task stops it.
pub(crate) fn start(inner: Rc<Inner>, in_flight: Rc<Cell<usize>>, started: Rc<Signal>) -> Option<glommio::Task<()>> {
    if inner.config.completion_yield.is_zero() {
        return None;
    }
    let executor = glommio::executor();
    let queue =
        executor.create_task_queue(glommio::Shares::default(), glommio::Latency::NotImportant, "completion-yield");
    match glommio::spawn_local_into(run(inner, in_flight, started), queue) {
        Ok(task) => Some(task),
        Err(error) => {
            tracing::warn!(%error, "cannot start the completion yield task; durable writes may complete later");
            None
        }
    }
}

async fn run(inner: Rc<Inner>, in_flight: Rc<Cell<usize>>, started: Rc<Signal>) {
    // One timer, reset for every pause: a new one would allocate each time.
    let mut pause = glommio::timer::Timer::new(inner.config.completion_yield);
    loop {
        if in_flight.get() == 0 {
            started.wait().await;
            continue;
        }
        std::thread::yield_now(); // sched_yield(2)
        add(&inner.counters.kernel_yields, 1);
        pause.reset(inner.config.completion_yield);
        (&mut pause).await;
    }
}
