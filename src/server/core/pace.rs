//! A bound on bytes per second for background work (a queue's copy, tiered
//! uploads): each step waits until the bytes before it fit the rate.

use std::time::{Duration, Instant};

pub struct Pace {
    /// 0: unbounded.
    bytes_per_sec: u64,
    since: Instant,
    bytes: u64,
}

impl Pace {
    pub fn new(bytes_per_sec: u64) -> Pace {
        Pace { bytes_per_sec, since: Instant::now(), bytes: 0 }
    }

    /// Counts `bytes` as done.
    pub fn took(&mut self, bytes: usize) {
        self.bytes += bytes as u64;
    }

    /// Waits until the bytes counted so far fit the rate.
    pub async fn wait(&self) {
        if self.bytes_per_sec == 0 {
            return;
        }
        let due = Duration::from_secs_f64(self.bytes as f64 / self.bytes_per_sec as f64);
        let early = due.saturating_sub(self.since.elapsed());
        if !early.is_zero() {
            glommio::timer::sleep(early).await;
        }
    }
}
