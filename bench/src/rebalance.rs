//! End-to-end latency around a consumer-group rebalance: latencies are
//! kept per second of receive time, and once the run is over the seconds
//! that overlap the rebalance (from the member's restart until it received
//! again) are reported apart from the rest of the measured run.

use crate::histogram::{new_histogram, percentiles_us};
use hdrhistogram::Histogram;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Per-second histograms and the rebalance's edges.
pub struct Window {
    start_ns: u64,
    seconds: Mutex<Vec<Histogram<u64>>>,
    restart_ns: AtomicU64,
    back_ns: AtomicU64,
}

/// Latency during the rebalance and outside it.
pub struct Split {
    /// Seconds from the restart until the member received again.
    pub rebalance_s: f64,
    pub during: Histogram<u64>,
    pub outside: Histogram<u64>,
    /// (second since start, p99 µs) of each second with messages.
    pub p99_by_second: Vec<(usize, u64)>,
}

impl Window {
    /// Seconds are counted from `start_ns`.
    pub fn new(start_ns: u64) -> Window {
        Window { start_ns, seconds: Mutex::default(), restart_ns: AtomicU64::new(0), back_ns: AtomicU64::new(0) }
    }

    /// Records latencies of (receive ns, latency ns) pairs.
    pub fn record(&self, received_ns: u64, latencies_ns: &[u64]) {
        let second = (received_ns.saturating_sub(self.start_ns) / 1_000_000_000) as usize;
        let mut seconds = self.seconds.lock().expect("window lock");
        if seconds.len() <= second {
            seconds.resize_with(second + 1, new_histogram);
        }
        for ns in latencies_ns {
            seconds[second].saturating_record((ns / 1000).max(1));
        }
    }

    /// The member left the group.
    pub fn restarted(&self, at_ns: u64) {
        self.restart_ns.store(at_ns, Ordering::Relaxed);
    }

    /// The restarted member received messages again (the first call counts).
    pub fn back(&self, at_ns: u64) {
        let _ = self.back_ns.compare_exchange(0, at_ns, Ordering::Relaxed, Ordering::Relaxed);
    }

    /// Splits the measured seconds (from `measure_from_ns`) by the rebalance;
    /// None if no restart happened.
    pub fn split(&self, measure_from_ns: u64) -> Option<Split> {
        let (restart, back) = (self.restart_ns.load(Ordering::Relaxed), self.back_ns.load(Ordering::Relaxed));
        if restart == 0 {
            return None;
        }
        let back = if back == 0 { u64::MAX } else { back };
        let second_of = |ns: u64| (ns.saturating_sub(self.start_ns) / 1_000_000_000) as usize;
        let (first, from, to) = (second_of(measure_from_ns), second_of(restart), second_of(back));
        let (mut during, mut outside) = (new_histogram(), new_histogram());
        let mut p99_by_second = Vec::new();
        for (i, h) in self.seconds.lock().expect("window lock").iter().enumerate().skip(first) {
            if h.is_empty() {
                continue;
            }
            p99_by_second.push((i, percentiles_us(h)[2]));
            let target = if (from..=to).contains(&i) { &mut during } else { &mut outside };
            target.add(h).expect("same bounds");
        }
        let rebalance_s = back.saturating_sub(restart) as f64 / 1e9;
        Some(Split { rebalance_s, during, outside, p99_by_second })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_overlapping_the_rebalance_are_reported_apart() {
        let s = 1_000_000_000u64;
        let w = Window::new(0);
        for second in 0..10 {
            let latency = if (4..=5).contains(&second) { 50_000_000 } else { 1_000_000 };
            w.record(second * s + 10, &[latency; 100]);
        }
        assert!(w.split(0).is_none(), "no restart, no split");
        w.restarted(4 * s + 200);
        w.back(5 * s + 900);
        w.back(7 * s);
        let split = w.split(2 * s).unwrap();
        assert!((split.rebalance_s - 1.000_000_7).abs() < 1e-9);
        assert_eq!(split.during.len(), 200);
        assert_eq!(split.outside.len(), 600, "seconds 2, 3 and 6-9");
        assert!(percentiles_us(&split.during)[2] >= 49_000 && percentiles_us(&split.outside)[5] <= 1_001);
        assert_eq!(split.p99_by_second.first().map(|p| p.0), Some(2));
    }
}
