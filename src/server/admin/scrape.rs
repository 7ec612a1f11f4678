//! A scrape: every shard's metric families gathered over the mesh (shard 0
//! answers its own), labelled with the shard, joined into consumer lag,
//! and encoded in the OpenMetrics text format by prometheus-client.
//! `/public_metrics` is the same without the shard label: samples that
//! differ only by shard are added up (a histogram's buckets too), except
//! the families whose value is the same on every shard or a maximum.

use crate::server::core::metrics::{samples, Family, Kind, Sample, Value};
use crate::server::core::Reason;
use crate::server::core::{Core, Failure};
use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use std::collections::BTreeMap;

/// The content type of an OpenMetrics text exposition.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Families whose per-shard values do not add up: the node reports their largest.
const LARGEST_OF_SHARDS: &[&str] = &[
    "ringmq_stall_longest_seconds",
    "ringmq_replication_isr_size",
    "ringmq_replication_leader_epoch",
    "ringmq_replication_committed_position",
];

/// Every shard's families, each sample labelled with its shard, plus consumer lag.
pub async fn gather(core: &Core) -> Result<Vec<Family>, Failure> {
    let mut merged: Vec<Family> = Vec::new();
    for shard in 0..core.shards() {
        let families = if shard == core.id() {
            core.collect_metrics()
        } else {
            let timeout = core.config().admin_timeout;
            let asked = core.mesh().metrics(shard);
            let late = async {
                glommio::timer::sleep(timeout).await;
                let m = format!("shard {shard} did not report its metrics within {timeout:?} (admin_timeout)");
                Err(Failure(Reason::Internal, m))
            };
            futures_lite::future::or(asked, late).await?
        };
        let label = shard.to_string();
        for mut family in families {
            for sample in &mut family.samples {
                sample.labels.insert(0, ("shard", label.clone()));
            }
            match merged.iter_mut().find(|f| f.name == family.name) {
                Some(into) => into.samples.append(&mut family.samples),
                None => merged.push(family),
            }
        }
    }
    let lag = consumer_lag(&merged);
    if !lag.samples.is_empty() {
        merged.push(lag);
    }
    Ok(merged)
}

/// Each consumer group's lag per queue: the queue's end minus the group's
/// committed offset (the two come from different shards). A queue of
/// another broker group has no end here and no lag sample.
fn consumer_lag(families: &[Family]) -> Family {
    let queue_of = |s: &Sample| (s.label("topic").map(str::to_string), s.label("queue").map(str::to_string));
    let ends: BTreeMap<_, f64> =
        samples(families, "ringmq_queue_end_offset").map(|s| (queue_of(s), s.number())).collect();
    let mut lag = Family {
        name: "ringmq_consumer_lag",
        help: "Messages of a queue a consumer group has not committed yet: the queue's end minus its committed offset.",
        kind: Kind::Gauge,
        samples: Vec::new(),
    };
    for committed in samples(families, "ringmq_group_committed_offset") {
        let Some(end) = ends.get(&queue_of(committed)) else { continue };
        let labels = ["group", "topic", "queue"].map(|k| (k, committed.label(k).unwrap_or_default().to_string()));
        lag.samples.push(Sample { labels: labels.into(), value: Value::Number((end - committed.number()).max(0.0)) });
    }
    lag
}

/// The node's view: the shard label dropped, samples that differ only by it combined.
pub fn without_shards(families: Vec<Family>) -> Vec<Family> {
    families
        .into_iter()
        .map(|family| {
            let largest = LARGEST_OF_SHARDS.contains(&family.name);
            let mut combined: Vec<Sample> = Vec::new();
            for mut sample in family.samples {
                sample.labels.retain(|(k, _)| *k != "shard");
                match combined.iter_mut().find(|c| c.labels == sample.labels) {
                    Some(into) => combine(&mut into.value, &sample.value, largest),
                    None => combined.push(sample),
                }
            }
            Family { samples: combined, ..family }
        })
        .collect()
}

fn combine(into: &mut Value, other: &Value, largest: bool) {
    match (into, other) {
        (Value::Number(a), Value::Number(b)) if largest => *a = a.max(*b),
        (Value::Number(a), Value::Number(b)) => *a += b,
        (Value::Histogram(a), Value::Histogram(b)) => a.merge(b),
        (into, other) => unreachable!("a family's samples are of one kind: {into:?} and {other:?}"),
    }
}

/// The families in the OpenMetrics text format.
pub fn encode(families: Vec<Family>) -> String {
    let mut registry = prometheus_client::registry::Registry::default();
    registry.register_collector(Box::new(Exposition(families)));
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).expect("writing to a String cannot fail");
    text
}

/// Families handed to prometheus-client's encoder as they are.
#[derive(Debug)]
struct Exposition(Vec<Family>);

impl prometheus_client::collector::Collector for Exposition {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        for family in &self.0 {
            let kind = match family.kind {
                Kind::Counter => MetricType::Counter,
                Kind::Gauge => MetricType::Gauge,
                Kind::Histogram => MetricType::Histogram,
            };
            let mut metric = encoder.encode_descriptor(family.name, family.help, None, kind)?;
            for sample in &family.samples {
                let labels: Vec<(&str, &str)> = sample.labels.iter().map(|(k, v)| (*k, v.as_str())).collect();
                let mut labelled = metric.encode_family(&labels)?;
                match (&sample.value, family.kind) {
                    // Counts print as integers; a counter of seconds keeps its fraction.
                    (Value::Number(n), Kind::Counter) if n.fract() == 0.0 => {
                        labelled.encode_counter::<NoLabelSet, u64, u64>(&(*n as u64), None)?
                    }
                    (Value::Number(n), Kind::Counter) => labelled.encode_counter::<NoLabelSet, f64, u64>(n, None)?,
                    (Value::Number(n), _) => labelled.encode_gauge(n)?,
                    (Value::Histogram(h), _) => {
                        // The encoder adds the buckets up; its +Inf bucket is the one bounded by f64::MAX.
                        let bounds = h.bounds.iter().copied().chain([f64::MAX]);
                        let buckets: Vec<(f64, u64)> = bounds.zip(h.counts.iter().copied()).collect();
                        labelled.encode_histogram::<NoLabelSet>(h.sum, h.count(), &buckets, None)?
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringmq_shards::Histogram;

    fn family(name: &'static str, kind: Kind, samples: Vec<Sample>) -> Family {
        Family { name, help: "Help.", kind, samples }
    }

    fn sample(labels: &[(&'static str, &str)], value: f64) -> Sample {
        Sample { labels: labels.iter().map(|(k, v)| (*k, v.to_string())).collect(), value: Value::Number(value) }
    }

    #[test]
    fn lag_is_the_queue_end_minus_the_committed_offset() {
        let families = vec![
            family(
                "ringmq_queue_end_offset",
                Kind::Gauge,
                vec![sample(&[("shard", "1"), ("topic", "t"), ("queue", "0")], 10.0)],
            ),
            family(
                "ringmq_group_committed_offset",
                Kind::Gauge,
                vec![
                    sample(&[("shard", "0"), ("group", "g"), ("topic", "t"), ("queue", "0")], 4.0),
                    sample(&[("shard", "0"), ("group", "g"), ("topic", "elsewhere"), ("queue", "0")], 4.0),
                ],
            ),
        ];
        let lag = consumer_lag(&families);
        assert_eq!(lag.samples, vec![sample(&[("group", "g"), ("topic", "t"), ("queue", "0")], 6.0)]);
    }

    #[test]
    fn the_node_view_adds_shards_up_except_largest_of_families() {
        let h = Histogram::new(&[1.0]);
        h.observe(0.5);
        let hist =
            |shard: &str| Sample { labels: vec![("shard", shard.to_string())], value: Value::Histogram(h.snapshot()) };
        let families = vec![
            family("a", Kind::Counter, vec![sample(&[("shard", "0")], 2.0), sample(&[("shard", "1")], 3.0)]),
            family(
                "ringmq_stall_longest_seconds",
                Kind::Gauge,
                vec![sample(&[("shard", "0")], 2.0), sample(&[("shard", "1")], 3.0)],
            ),
            family("h", Kind::Histogram, vec![hist("0"), hist("1")]),
        ];
        let node = without_shards(families);
        assert_eq!(node[0].samples, vec![sample(&[], 5.0)]);
        assert_eq!(node[1].samples, vec![sample(&[], 3.0)]);
        let Value::Histogram(merged) = &node[2].samples[0].value else { panic!("a histogram") };
        assert_eq!(merged.count(), 2);
    }

    #[test]
    fn the_exposition_is_openmetrics_text() {
        let h = Histogram::new(&[1.0, 2.0]);
        h.observe(1.5);
        let families = vec![
            family("ringmq_x", Kind::Counter, vec![sample(&[("shard", "0")], 7.0)]),
            family("ringmq_busy_seconds", Kind::Counter, vec![sample(&[("shard", "0")], 0.25)]),
            family(
                "ringmq_h_seconds",
                Kind::Histogram,
                vec![Sample { labels: vec![], value: Value::Histogram(h.snapshot()) }],
            ),
        ];
        let text = encode(families);
        assert!(text.contains("# TYPE ringmq_x counter\n"), "{text}");
        assert!(text.contains("ringmq_x_total{shard=\"0\"} 7\n"), "{text}");
        assert!(text.contains("ringmq_busy_seconds_total{shard=\"0\"} 0.25\n"), "{text}");
        assert!(text.contains("ringmq_h_seconds_bucket{le=\"2.0\"} 1\n"), "{text}");
        assert!(text.contains("ringmq_h_seconds_bucket{le=\"+Inf\"} 1\n"), "{text}");
        assert!(text.ends_with("# EOF\n"), "{text}");
    }
}
