//! `summary.json`: the numbers of one run.

use crate::histogram::percentiles_us;
use crate::rebalance::Split;
use hdrhistogram::Histogram;
use serde::Serialize;

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
    /// The bound on a producer's unacknowledged messages (`--max-outstanding`)...
    pub max_outstanding: u64,
    /// ...and the most any producer had right after a send.
    pub outstanding_seen: u64,
    /// Subscriptions: consumers that each receive every message (`received`
    /// and `measured` count every copy).
    pub consumers_per_queue: u64,
    /// CPU per message sent in the measured time, by role (from the first
    /// progress line in it to the producers' end).
    pub cpu_us_per_msg: Option<crate::cpu::CpuPerMessage>,
    /// The protocol driven (`native` or `kafka`), and a Kafka run's
    /// --kafka-config settings (a key given twice: the last, as librdkafka
    /// takes it).
    pub protocol: String,
    pub kafka_config: Vec<(String, String)>,
    /// The Kafka-compatible broker a Kafka run drove, as its metadata describes it.
    pub kafka_broker: Option<KafkaBroker>,
    /// The broker as `compare` names it (`--label`, or what the run knows
    /// of it), and when it acknowledged a send (`--durability`, or the
    /// send mode and acks).
    pub broker: String,
    pub durability: String,
}

/// A Kafka-compatible broker (a cluster): where the run reached it, its
/// cluster id (None: it gave none) and how many brokers its metadata lists.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct KafkaBroker {
    pub bootstrap: String,
    pub cluster_id: Option<String>,
    pub brokers: usize,
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
        let json = SummaryJson {
            seconds: rounded(self.seconds, 3),
            message_size: self.message_size,
            msgs_per_s: rounded(self.msgs_per_s(), 1),
            mb_per_s: rounded(self.mb_per_s(), 3),
            sent: self.sent,
            acked: self.acked,
            received: self.received,
            measured: self.measured,
            lost: self.lost,
            duplicates: self.duplicates,
            errors: self.errors,
            max_outstanding: self.max_outstanding,
            outstanding_seen: self.outstanding_seen,
            consumers_per_queue: self.consumers_per_queue,
            cpu_us_per_msg: self.cpu_us_per_msg,
            protocol: self.protocol.clone(),
            kafka_config: self.kafka_config.iter().cloned().collect(),
            kafka_broker: self.kafka_broker.clone(),
            broker: self.broker.clone(),
            durability: self.durability.clone(),
            e2e: Latency::of(e2e),
            publish: Latency::of(publish),
            send_delay: Latency::of(send_delay),
            rebalance: rebalance.map(|r| RebalanceJson {
                seconds: rounded(r.rebalance_s, 3),
                during: Latency::of(&r.during),
                outside: Latency::of(&r.outside),
            }),
            delayed: delayed
                .map(|(pending, lateness)| DelayedJson { pending: *pending, lateness: Latency::of(lateness) }),
        };
        serde_json::to_string(&json).expect("a summary serializes")
    }
}

/// `x` rounded to `digits` decimals, as the summary shows it.
fn rounded(x: f64, digits: i32) -> f64 {
    let scale = 10f64.powi(digits);
    (x * scale).round() / scale
}

#[derive(Serialize)]
struct SummaryJson {
    seconds: f64,
    message_size: usize,
    msgs_per_s: f64,
    mb_per_s: f64,
    sent: u64,
    acked: u64,
    received: u64,
    measured: u64,
    lost: u64,
    duplicates: u64,
    errors: u64,
    max_outstanding: u64,
    outstanding_seen: u64,
    consumers_per_queue: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    cpu_us_per_msg: Option<crate::cpu::CpuPerMessage>,
    protocol: String,
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    kafka_config: std::collections::BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    kafka_broker: Option<KafkaBroker>,
    broker: String,
    durability: String,
    e2e: Latency,
    publish: Latency,
    send_delay: Latency,
    #[serde(skip_serializing_if = "Option::is_none")]
    rebalance: Option<RebalanceJson>,
    #[serde(skip_serializing_if = "Option::is_none")]
    delayed: Option<DelayedJson>,
}

/// One distribution's percentiles, microseconds.
#[derive(Serialize)]
struct Latency {
    p50_us: u64,
    p90_us: u64,
    p99_us: u64,
    p999_us: u64,
    p9999_us: u64,
    max_us: u64,
    count: u64,
}

impl Latency {
    fn of(h: &Histogram<u64>) -> Latency {
        let [p50_us, p90_us, p99_us, p999_us, p9999_us, max_us] = percentiles_us(h);
        Latency { p50_us, p90_us, p99_us, p999_us, p9999_us, max_us, count: h.len() }
    }
}

#[derive(Serialize)]
struct RebalanceJson {
    seconds: f64,
    during: Latency,
    outside: Latency,
}

#[derive(Serialize)]
struct DelayedJson {
    pending: u64,
    lateness: Latency,
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
            "max_outstanding",
            "outstanding_seen",
            "consumers_per_queue",
            "e2e",
            "publish",
            "send_delay",
            "broker",
            "durability",
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
