//! Fixed-bucket histograms kept by one thread (latencies, batch sizes): an
//! observation is a search over a few dozen bounds and two `Cell` adds, so
//! the hot path can afford one per append or per durable write. Read as
//! snapshots, which merge across shards and export as Prometheus histograms.

use std::cell::Cell;
use std::time::Duration;

/// Bounds of latency histograms, in seconds: 1-2-5 steps from 50 us to 10 s,
/// fine enough to read p50..p99.9 of a broker whose disk syncs in 0.1-25 ms.
pub const LATENCY_SECONDS: &[f64] =
    &[0.000_05, 0.000_1, 0.000_2, 0.000_5, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0];

/// Bounds of size histograms (records or batches per durable write): powers of two.
pub const SIZES: &[f64] =
    &[1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 2048.0, 4096.0, 8192.0, 16384.0, 65536.0];

/// A histogram owned by one thread.
#[derive(Debug)]
pub struct Histogram {
    bounds: &'static [f64],
    /// One count per bound, then the count above the last bound.
    counts: Box<[Cell<u64>]>,
    sum: Cell<f64>,
}

impl Histogram {
    /// An empty histogram over ascending `bounds`.
    pub fn new(bounds: &'static [f64]) -> Histogram {
        assert!(bounds.windows(2).all(|w| w[0] < w[1]), "histogram bounds ascend");
        Histogram { bounds, counts: (0..=bounds.len()).map(|_| Cell::new(0)).collect(), sum: Cell::new(0.0) }
    }

    /// Counts one value.
    pub fn observe(&self, value: f64) {
        let bucket = self.bounds.partition_point(|&bound| bound < value);
        let count = &self.counts[bucket];
        count.set(count.get() + 1);
        self.sum.set(self.sum.get() + value);
    }

    /// Counts one duration, in seconds.
    pub fn observe_duration(&self, took: Duration) {
        self.observe(took.as_secs_f64());
    }

    /// What it counted so far.
    pub fn snapshot(&self) -> HistogramSnapshot {
        HistogramSnapshot {
            bounds: self.bounds,
            counts: self.counts.iter().map(Cell::get).collect(),
            sum: self.sum.get(),
        }
    }
}

/// A histogram's counts at one moment.
#[derive(Debug, Clone, PartialEq)]
pub struct HistogramSnapshot {
    /// Upper bounds of the buckets (inclusive), ascending.
    pub bounds: &'static [f64],
    /// Values per bucket (not cumulative); the last one counts values above every bound.
    pub counts: Vec<u64>,
    /// The sum of every value counted.
    pub sum: f64,
}

impl HistogramSnapshot {
    /// How many values were counted.
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// (upper bound, values at or below it) for each bound, then +Inf: the
    /// cumulative form Prometheus exposes.
    pub fn cumulative(&self) -> Vec<(f64, u64)> {
        let bounds = self.bounds.iter().copied().chain([f64::INFINITY]);
        let mut total = 0;
        bounds
            .zip(&self.counts)
            .map(|(bound, count)| {
                total += count;
                (bound, total)
            })
            .collect()
    }

    /// Adds another shard's counts of the same histogram.
    pub fn merge(&mut self, other: &HistogramSnapshot) {
        assert_eq!(self.bounds, other.bounds, "merged histograms share their bounds");
        self.counts.iter_mut().zip(&other.counts).for_each(|(a, b)| *a += b);
        self.sum += other.sum;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_land_in_the_first_bucket_whose_bound_holds_them() {
        let h = Histogram::new(&[1.0, 2.0, 5.0]);
        for v in [0.5, 1.0, 1.5, 5.0, 7.0] {
            h.observe(v);
        }
        let s = h.snapshot();
        assert_eq!(s.counts, vec![2, 1, 1, 1]);
        assert_eq!(s.cumulative(), vec![(1.0, 2), (2.0, 3), (5.0, 4), (f64::INFINITY, 5)]);
        assert_eq!(s.count(), 5);
        assert_eq!(s.sum, 15.0);
    }

    #[test]
    fn merged_snapshots_add_their_counts_and_sums() {
        let (a, b) = (Histogram::new(SIZES), Histogram::new(SIZES));
        a.observe(3.0);
        b.observe(3.0);
        b.observe(100_000.0);
        let mut merged = a.snapshot();
        merged.merge(&b.snapshot());
        assert_eq!(merged.count(), 3);
        assert_eq!(merged.cumulative().last(), Some(&(f64::INFINITY, 3)));
        assert_eq!(merged.sum, 100_006.0);
    }
}
