//! Producer fault avoidance, as RocketMQ does it: after a failed or slow send
//! the shard is avoided for a back-off that grows with the latency seen; when
//! every shard is avoided, sends go out anyway.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Latency thresholds (ms) and the back-off each earns (ms), RocketMQ's table.
const LATENCY_MS: [u64; 7] = [50, 100, 550, 1_000, 2_000, 3_000, 15_000];
const BACKOFF_MS: [u64; 7] = [0, 0, 30_000, 60_000, 120_000, 180_000, 600_000];
/// Back-off after a failed send (counted as the slowest latency).
const FAILED_LATENCY_MS: u64 = 30_000;

/// Which shards to avoid until when.
#[derive(Default)]
pub struct FaultTable {
    avoid_until: Mutex<HashMap<u32, Instant>>,
}

impl FaultTable {
    /// Records a send to `shard` that took `latency` (or failed).
    pub fn record(&self, shard: u32, latency: Duration, failed: bool) {
        let ms = if failed { FAILED_LATENCY_MS } else { latency.as_millis() as u64 };
        let backoff = LATENCY_MS.iter().zip(BACKOFF_MS).rev().find(|(limit, _)| ms >= **limit).map_or(0, |(_, b)| b);
        let mut t = self.avoid_until.lock().expect("fault table lock");
        if backoff == 0 {
            t.remove(&shard);
        } else {
            t.insert(shard, Instant::now() + Duration::from_millis(backoff));
        }
    }

    /// True unless the shard is in its back-off.
    pub fn is_available(&self, shard: u32) -> bool {
        self.avoid_until.lock().expect("fault table lock").get(&shard).is_none_or(|until| Instant::now() >= *until)
    }

    /// From the round-robin choice `start` on, the first queue whose owning
    /// shard is available; `start` itself if none is.
    pub fn pick(&self, queue_shards: &[u32], start: u32) -> u32 {
        let n = queue_shards.len() as u32;
        (0..n).map(|i| (start + i) % n).find(|q| self.is_available(queue_shards[*q as usize])).unwrap_or(start % n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slow_or_failed_shards_are_avoided_and_everything_avoided_sends_anyway() {
        let t = FaultTable::default();
        let shards = [0, 1, 0, 1];
        t.record(0, Duration::from_millis(20), false);
        assert_eq!(t.pick(&shards, 0), 0, "fast sends avoid nothing");
        t.record(0, Duration::from_millis(600), false);
        assert!(!t.is_available(0));
        assert_eq!(t.pick(&shards, 0), 1, "queue 0 is on the slow shard, so queue 1");
        assert_eq!(t.pick(&shards, 2), 3);
        t.record(1, Duration::ZERO, true);
        assert_eq!(t.pick(&shards, 2), 2, "every shard avoided: send anyway");
        t.record(1, Duration::from_millis(10), false);
        assert!(t.is_available(1), "a fast send clears the back-off");
    }
}
