//! The librdkafka producer and reader of `tests/kafka_clients/python_failover.py`,
//! for tests that check a Kafka producer's acknowledged messages across a
//! fail-over or a move: run the producer, wait for it, read what it
//! acknowledged and what the topic holds.

use super::ChildGuard;
use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/kafka_clients/python_failover.py");

/// One message the producer had acknowledged.
#[derive(Debug, Clone, PartialEq)]
pub struct Acked {
    pub value: String,
    pub partition: u32,
    pub offset: u64,
    /// The wall-clock time of its ack, Unix seconds.
    pub at: f64,
}

/// Starts the idempotent acks=all producer on `topic` for `seconds`; it
/// writes what was acknowledged to `out` when it ends.
pub fn produce(bootstrap: &str, topic: &str, seconds: u32, out: &Path) -> ChildGuard {
    let child = super::tools::python(&["confluent_kafka"])
        .args([SCRIPT, bootstrap, topic, "produce", &seconds.to_string()])
        .arg(out)
        .spawn()
        .expect("run the Kafka producer");
    ChildGuard(child)
}

/// Waits up to `limit` for `producer` to end, and checks that it succeeded.
pub fn wait(producer: &mut ChildGuard, limit: Duration) {
    let deadline = Instant::now() + limit;
    while producer.0.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "the Kafka producer did not finish within {limit:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(producer.0.wait().unwrap().success(), "the Kafka producer failed");
}

/// What the producer wrote to `out`: each acknowledged message.
pub fn acked(out: &Path) -> Vec<Acked> {
    lines(out)
        .map(|f| Acked {
            value: f[0].to_string(),
            partition: f[1].parse().unwrap(),
            offset: f[2].parse().unwrap(),
            at: f[3].parse().unwrap(),
        })
        .collect()
}

/// Reads every partition of `topic` to its end (the reader writes to
/// `out`); each value by its partition and offset.
pub fn read(bootstrap: &str, topic: &str, out: &Path) -> HashMap<(u32, u64), String> {
    let status = super::tools::python(&["confluent_kafka"])
        .args([SCRIPT, bootstrap, topic, "read"])
        .arg(out)
        .status()
        .expect("run the Kafka reader");
    assert!(status.success(), "the Kafka reader failed");
    lines(out).map(|f| ((f[1].parse().unwrap(), f[2].parse().unwrap()), f[0].to_string())).collect()
}

/// The space-separated fields of each line of `path`.
fn lines(path: &Path) -> impl Iterator<Item = Vec<String>> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let rows: Vec<Vec<String>> = text.lines().map(|l| l.split(' ').map(str::to_string).collect()).collect();
    rows.into_iter()
}
