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
