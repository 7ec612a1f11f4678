//! The Kafka listener with a stock Kafka client (kcat, librdkafka): its
//! metadata names one broker per shard and every queue as a partition led
//! by the shard that owns it.

mod common;

use common::Broker;
use std::process::Command;

#[test]
fn kcat_lists_the_brokers_and_the_partitions_of_a_ringmq_topic() {
    let dir = tempfile::tempdir().unwrap();
    let port = common::free_port_pair("127.0.0.1");
    let kafka = format!("127.0.0.1:{port}");
    let broker = Broker::start(dir.path(), &["--kafka-listen", &kafka]);
    let client = broker.client();
    client.create_topic("orders", 4, 0).unwrap();
    let out = Command::new("kcat").args(["-b", &kafka, "-L", "-m", "10"]).output().expect("run kcat (Debian: kcat)");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "kcat -L: {}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains(" 2 brokers:"), "{text}");
    assert!(text.contains(&format!("broker 1 at 127.0.0.1:{}", port + 1)), "{text}");
    assert!(text.contains("topic \"orders\" with 4 partitions:"), "{text}");
    let topic = client.topic("orders").unwrap();
    for (q, shard) in topic.queue_shards.iter().enumerate() {
        assert!(text.contains(&format!("partition {q}, leader {shard},")), "queue {q} on shard {shard}: {text}");
    }
}

#[test]
fn kcat_produces_keyed_messages_that_kcat_and_the_native_sdk_read_back() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let port = common::free_port_pair("127.0.0.1");
    let kafka = format!("127.0.0.1:{port}");
    let broker = Broker::start(dir.path(), &["--kafka-listen", &kafka]);
    let client = broker.client();
    client.create_topic("orders", 4, 0).unwrap();
    let mut producer = Command::new("kcat")
        .args(["-b", &kafka, "-P", "-t", "orders", "-K:"])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .expect("run kcat");
    let lines: String = (0..1000).map(|i| format!("k{i}:v{i}\n")).collect();
    producer.stdin.take().unwrap().write_all(lines.as_bytes()).unwrap();
    assert!(producer.wait().unwrap().success(), "kcat -P");

    let out = Command::new("kcat")
        .args(["-b", &kafka, "-C", "-t", "orders", "-o", "beginning", "-e", "-f", "%p %o %k %s\\n"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let mut got: Vec<(u32, u64, String, String)> = text
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            (f[0].parse().unwrap(), f[1].parse().unwrap(), f[2].to_string(), f[3].to_string())
        })
        .collect();
    got.sort();
    assert_eq!(got.len(), 1000, "kcat reads back every message");
    assert!(got.iter().all(|(_, _, k, v)| k[1..] == v[1..]), "keys and values belong together");

    // The native SDK sees the same messages at the same offsets.
    let mut consumer = ringmq::client::Consumer::new(client.clone(), None);
    consumer.assign_all("orders", ringmq::client::StartFrom::Earliest).unwrap();
    let native = common::consume(&mut consumer, 1000, std::time::Duration::from_secs(20));
    let mut native: Vec<(u32, u64, String, String)> = native
        .iter()
        .map(|m| {
            (
                m.queue,
                m.offset,
                String::from_utf8_lossy(&m.key).into_owned(),
                String::from_utf8_lossy(&m.value).into_owned(),
            )
        })
        .collect();
    native.sort();
    assert_eq!(native, got);
}

/// Debian's python3-kafka (kafka-python 2.0) is in the system Python, which a pyenv shim may shadow.
const SYSTEM_PYTHON: &str = "/usr/bin/python3";

#[test]
fn kafka_python_creates_produces_consumes_and_deletes() {
    let dir = tempfile::tempdir().unwrap();
    let port = common::free_port_pair("127.0.0.1");
    let kafka = format!("127.0.0.1:{port}");
    let broker = Broker::start(dir.path(), &["--kafka-listen", &kafka]);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/kafka_clients/python_admin_produce_consume.py");
    let out = Command::new(SYSTEM_PYTHON).args([script, &kafka]).output().expect("run python3 (Debian: python3-kafka)");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("second create: TopicAlreadyExistsError"), "{text}");
    assert!(text.contains("consumed 30") && text.contains("deleted"), "{text}");
    assert!(!broker.client().list_topics().unwrap().contains(&"py".to_string()), "the topic is gone both ways");
}
