//! `summary.json`: the numbers of one run, written by hand (no serde needed).

use crate::histogram::{percentiles_us, PERCENTILES};
use crate::rebalance::Split;
use hdrhistogram::Histogram;

/// Counts and rates of a run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Summary {
    pub seconds: f64,
    pub message_size: usize,
    pub sent: u64,
    pub acked: u64,
    pub received: u64,
    /// Received messages whose intended send time fell in the measured window.
    pub measured: u64,
    pub lost: u64,
    pub duplicates: u64,
    pub errors: u64,
}

impl Summary {
    /// Messages per second in the measured window.
    pub fn msgs_per_s(&self) -> f64 {
        self.measured as f64 / self.seconds.max(1e-9)
    }

    /// Payload megabytes (10^6) per second received.
    pub fn mb_per_s(&self) -> f64 {
        self.msgs_per_s() * self.message_size as f64 / 1e6
    }

    /// The JSON object with the counts and the e2e, publish and send delay
    /// distributions (and, after a member restart, e2e during its rebalance
    /// and outside it).
    pub fn to_json(
        &self,
        [e2e, publish, send_delay]: [&Histogram<u64>; 3],
        rebalance: Option<&Split>,
        delayed: Option<&(u64, Histogram<u64>)>,
    ) -> String {
        let lat = |h: &Histogram<u64>| {
            let keys = ["p50_us", "p90_us", "p99_us", "p999_us", "p9999_us", "max_us"];
            let values = percentiles_us(h);
            let fields: Vec<String> = keys.iter().zip(values).map(|(k, v)| format!("\"{k}\":{v}")).collect();
            format!("{{{},\"count\":{}}}", fields.join(","), h.len())
        };
        debug_assert_eq!(PERCENTILES.len(), 6);
        let rebalance = rebalance.map_or(String::new(), |r| {
            format!(
                ",\"rebalance\":{{\"seconds\":{:.3},\"during\":{},\"outside\":{}}}",
                r.rebalance_s,
                lat(&r.during),
                lat(&r.outside)
            )
        });
        let delayed = delayed.map_or(String::new(), |(pending, lateness)| {
            format!(",\"delayed\":{{\"pending\":{pending},\"lateness\":{}}}", lat(lateness))
        });
        format!(
            "{{\"seconds\":{:.3},\"message_size\":{},\"msgs_per_s\":{:.1},\"mb_per_s\":{:.3},\"sent\":{},\"acked\":{},\"received\":{},\"measured\":{},\"lost\":{},\"duplicates\":{},\"errors\":{},\"e2e\":{},\"publish\":{},\"send_delay\":{}{}{}}}",
            self.seconds,
            self.message_size,
            self.msgs_per_s(),
            self.mb_per_s(),
            self.sent,
            self.acked,
            self.received,
            self.measured,
            self.lost,
            self.duplicates,
            self.errors,
            lat(e2e),
            lat(publish),
            lat(send_delay),
            rebalance,
            delayed
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::histogram::new_histogram;

    #[test]
    fn summary_json_has_every_key_a_report_reads() {
        let mut h = new_histogram();
        h.record(1500).unwrap();
        let s = Summary {
            seconds: 2.0,
            message_size: 1000,
            sent: 12,
            acked: 12,
            received: 12,
            measured: 10,
            ..Summary::default()
        };
        let json = s.to_json([&h, &h, &h], None, None);
        let keys = [
            "msgs_per_s",
            "mb_per_s",
            "sent",
            "acked",
            "received",
            "lost",
            "duplicates",
            "e2e",
            "publish",
            "send_delay",
        ];
        for key in keys {
            assert!(json.contains(&format!("\"{key}\":")), "{key} missing: {json}");
        }
        for key in ["p50_us", "p90_us", "p99_us", "p999_us", "p9999_us", "max_us"] {
            assert_eq!(json.matches(&format!("\"{key}\":")).count(), 3, "{key} in every distribution");
        }
        assert!(json.contains("\"msgs_per_s\":5.0") && json.contains("\"mb_per_s\":0.005"), "{json}");
        assert!(json.contains("\"lost\":0"));
    }
}
