//! Latency histograms: HdrHistogram in microseconds, the percentile table,
//! and the `.hgrm` percentile-distribution text that HdrHistogram's plotters
//! read (values in milliseconds).
//!
//! Coordinated omission: every latency is measured from the message's
//! *intended* send time on the open-loop schedule, not from when it was
//! actually sent, so a stall that delays sends is charged to every message
//! it delayed (the OpenMessaging Benchmark's method).

use hdrhistogram::Histogram;
use std::fmt::Write;

/// Highest latency recorded: one hour, in microseconds.
const MAX_US: u64 = 3_600_000_000;

/// A latency histogram in microseconds.
pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_US, 3).expect("valid histogram bounds")
}

/// Records the latency of a message intended at `intended_ns` that completed
/// at `done_ns` (same clock). A completion before the intended time (clock
/// skew across hosts) records as 0.
pub fn record(h: &mut Histogram<u64>, intended_ns: u64, done_ns: u64) {
    h.saturating_record((done_ns.saturating_sub(intended_ns) / 1_000).max(1));
}

/// The open-loop schedule: message k of a sender is intended at start + k * interval.
#[derive(Debug, Clone, Copy)]
pub struct Schedule {
    pub start_ns: u64,
    pub interval_ns: u64,
}

impl Schedule {
    /// A schedule of `rate` messages per second from `start_ns` (rate 0: no schedule, as fast as possible).
    pub fn new(start_ns: u64, rate: f64) -> Schedule {
        let interval_ns = if rate > 0.0 { (1e9 / rate) as u64 } else { 0 };
        Schedule { start_ns, interval_ns }
    }

    /// Intended send time of message `k`.
    pub fn intended(&self, k: u64) -> u64 {
        self.start_ns + k * self.interval_ns
    }
}

/// The percentiles every report shows.
pub const PERCENTILES: [(&str, f64); 6] =
    [("p50", 50.0), ("p90", 90.0), ("p99", 99.0), ("p99.9", 99.9), ("p99.99", 99.99), ("max", 100.0)];

/// Latency in microseconds at each of [`PERCENTILES`].
pub fn percentiles_us(h: &Histogram<u64>) -> [u64; 6] {
    PERCENTILES.map(|(_, p)| if p >= 100.0 { h.max() } else { h.value_at_percentile(p) })
}

/// The `.hgrm` percentile distribution, values in milliseconds.
pub fn to_hgrm(h: &Histogram<u64>) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{:>12} {:>14} {:>10} {:>14}\n", "Value", "Percentile", "TotalCount", "1/(1-Percentile)");
    for v in h.iter_quantiles(5) {
        let q = v.quantile_iterated_to();
        let value_ms = h.highest_equivalent(v.value_iterated_to()) as f64 / 1_000.0;
        if q < 1.0 {
            let _ = writeln!(
                out,
                "{value_ms:12.3} {q:2.12} {:10} {:14.2}",
                v.count_since_last_iteration(),
                1.0 / (1.0 - q)
            );
        } else {
            let _ = writeln!(out, "{value_ms:12.3} {q:2.12} {:10}", v.count_since_last_iteration());
        }
    }
    let _ = writeln!(out, "#[Mean    = {:12.3}, StdDeviation   = {:12.3}]", h.mean() / 1_000.0, h.stdev() / 1_000.0);
    let _ = writeln!(out, "#[Max     = {:12.3}, Total count    = {:12}]", h.max() as f64 / 1_000.0, h.len());
    let _ = writeln!(out, "#[Buckets = {:12}, SubBuckets     = {:12}]", h.buckets(), h.distinct_values());
    out
}

/// (percentile 0..1, value in ms) points of an `.hgrm` file.
pub fn parse_hgrm(text: &str) -> Result<Vec<(f64, f64)>, String> {
    let mut points = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with("Value"))
    {
        let mut cols = line.split_whitespace();
        let (Some(v), Some(q)) = (cols.next(), cols.next()) else { continue };
        let parse = |s: &str| s.parse::<f64>().map_err(|_| format!("not an .hgrm line: {line:?}"));
        points.push((parse(q)?, parse(v)?));
    }
    if points.is_empty() {
        return Err("no percentile lines found".into());
    }
    Ok(points)
}

/// The value (ms) at percentile `p` (0..=100) of parsed `.hgrm` points.
pub fn value_at(points: &[(f64, f64)], p: f64) -> f64 {
    let q = p / 100.0;
    points.iter().find(|(pq, _)| *pq >= q - 1e-12).or(points.last()).map_or(0.0, |(_, v)| *v)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 1,000 messages/s; the system stalls for 100 ms while message 100 is
    /// sent. Messages 100..=199 were intended 1 ms apart during the stall
    /// and all complete at its end: their latencies from the intended times
    /// are 100, 99, ..., 1 ms. A closed-loop measurement from the actual
    /// send time would have seen one slow message and 99 fast ones.
    #[test]
    fn a_stall_is_charged_to_every_message_it_delayed() {
        let s = Schedule::new(0, 1000.0);
        let mut from_intended = new_histogram();
        let mut from_actual = new_histogram();
        let stall_end = s.intended(100) + 100_000_000;
        for k in 0..1000u64 {
            let intended = s.intended(k);
            let sent = if (100..200).contains(&k) { stall_end } else { intended };
            // Service time 1 ms, except the message caught in the stall.
            let done = if k == 100 { stall_end + 1_000_000 } else { sent + 1_000_000 };
            record(&mut from_intended, intended, done);
            record(&mut from_actual, if k == 100 { intended } else { sent }, done);
        }
        // Hand-computed: 900 messages at 1 ms; message 100 at 101 ms;
        // messages 101..=199 at 100 - (k - 100) + 1 ms = 100 ms down to 2 ms.
        let ms = |q: f64| from_intended.value_at_percentile(q) as f64 / 1000.0;
        assert!((ms(50.0) - 1.0).abs() < 0.01, "p50 {}", ms(50.0));
        // 1000 values: p95 is the 950th: 900 at 1 ms, then 2..=51 ms for ranks 901..950.
        assert!((ms(95.0) - 51.0).abs() < 0.1, "p95 {}", ms(95.0));
        assert!((ms(99.0) - 91.0).abs() < 0.1, "p99 {}", ms(99.0));
        assert!((from_intended.max() as f64 / 1000.0 - 101.0).abs() < 0.1);
        assert!(from_actual.value_at_percentile(99.0) <= 1_001, "measured from the actual send, the stall hides");
    }

    #[test]
    fn hgrm_round_trips_the_percentiles() {
        let mut h = new_histogram();
        for v in 1..=10_000u64 {
            h.record(v).unwrap();
        }
        let points = parse_hgrm(&to_hgrm(&h)).unwrap();
        for (_, p) in PERCENTILES {
            let want = if p >= 100.0 { h.max() } else { h.value_at_percentile(p) } as f64 / 1000.0;
            let got = value_at(&points, p);
            assert!((got - want).abs() <= want * 0.01 + 0.001, "p{p}: {got} vs {want}");
        }
        assert!(parse_hgrm("garbage\n").is_err());
    }

    proptest::proptest! {
        /// `compare` reads any file it is given without panicking.
        #[test]
        fn no_text_makes_parse_hgrm_panic(text in "\\PC{0,200}") {
            let _ = parse_hgrm(&text);
        }
    }
}
