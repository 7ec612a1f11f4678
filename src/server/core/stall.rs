//! Stalls of a shard's thread (a blocking call, a long loop): glommio's
//! stall detector logs the task queue that ran past its budget with a
//! backtrace, and a probe task counts how late its wake-ups come, so the
//! shard's stall stats say how often and how long the thread was held.

use glommio::{StallDetectionHandler, TaskQueueHandle};
use std::cell::Cell;
use std::time::{Duration, Instant};

/// How often the probe asks to be woken.
const PROBE_INTERVAL: Duration = Duration::from_millis(1);

/// glommio's detector with the broker's threshold: a task queue run longer
/// than the task quota (`ServerConfig::task_quota`) plus `threshold` is
/// logged with its backtrace (glommio logs through the `log` crate, which
/// the broker's subscriber takes in).
#[derive(Debug)]
pub struct Detector {
    pub threshold: Duration,
}

impl StallDetectionHandler for Detector {
    fn threshold(&self, _queue: TaskQueueHandle, _max_expected_runtime: Duration) -> Option<Duration> {
        Some(self.threshold)
    }
}

/// Stalls seen on one shard.
#[derive(Debug, Default)]
pub struct StallStats {
    count: Cell<u64>,
    longest: Cell<Duration>,
}

impl StallStats {
    /// Wake-ups of the probe later than the threshold.
    pub fn count(&self) -> u64 {
        self.count.get()
    }

    /// The latest of them.
    pub fn longest(&self) -> Duration {
        self.longest.get()
    }

    fn record(&self, late: Duration) {
        self.count.set(self.count.get() + 1);
        self.longest.set(self.longest.get().max(late));
    }
}

/// Runs until dropped: sleeps `PROBE_INTERVAL` again and again and records
/// every wake-up that came more than `threshold` late (the thread was held
/// by something else that long).
pub async fn probe(stats: std::rc::Rc<StallStats>, threshold: Duration) {
    // A new executor's first timer comes ~15 ms late: not a stall of the shard's.
    glommio::timer::sleep(PROBE_INTERVAL).await;
    loop {
        let asked = Instant::now();
        glommio::timer::sleep(PROBE_INTERVAL).await;
        let late = asked.elapsed().saturating_sub(PROBE_INTERVAL);
        if late > threshold {
            stats.record(late);
            tracing::warn!(late_ms = late.as_secs_f64() * 1e3, "the shard's thread was held past the stall threshold");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::rc::Rc;

    #[test]
    fn a_blocking_call_on_the_shard_thread_is_counted_as_a_stall() {
        let ex = glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
            .preempt_timer(Duration::from_millis(5))
            .detect_stalls(Some(Box::new(Detector { threshold: Duration::from_millis(10) })))
            .make()
            .unwrap();
        let stats = ex.run(async {
            let stats = Rc::new(StallStats::default());
            let watching = glommio::spawn_local(probe(stats.clone(), Duration::from_millis(10)));
            glommio::timer::sleep(Duration::from_millis(20)).await;
            assert_eq!(stats.count(), 0, "an idle thread does not stall: {:?}", stats.longest());
            // What a std::fs call on a 1 GiB file does to the reactor.
            std::thread::sleep(Duration::from_millis(40));
            glommio::timer::sleep(Duration::from_millis(5)).await;
            drop(watching);
            stats
        });
        assert_eq!(stats.count(), 1, "one stall");
        assert!(stats.longest() >= Duration::from_millis(30), "as long as the thread was held: {:?}", stats.longest());
    }
}
