//! Exactly-once with Kafka transactions on a single node: a
//! consume-transform-produce loop of librdkafka and one of the Java client,
//! each killed with kill -9 at 20 random points (`common/eos.rs`), move every
//! input record to the output exactly once.
//! The same against a three-node broker group whose leader is killed too is
//! in `kafka_cluster.rs`.

mod common;

use common::eos::{assert_exactly_once, kill_and_restart, output, LoopClient, IN, OUT};

/// The loop of `client` killed at 20 random points on one node.
fn killed_20_times(client: LoopClient, seed: u64) {
    let dir = tempfile::tempdir().unwrap();
    let (broker, kafka) = common::kafka_broker(dir.path(), &[]);
    broker.client().create_topic(IN, 2, 0).unwrap();
    broker.client().create_topic(OUT, 2, 0).unwrap();
    eprintln!("kill points seeded {seed:#x}");
    let fed = kill_and_restart(client, &kafka, seed, false, |_| {});
    assert_exactly_once(&output(broker.client(), fed), fed);
}

#[test]
fn a_librdkafka_transactional_loop_killed_20_times_moves_every_record_exactly_once() {
    killed_20_times(LoopClient::Librdkafka, 0x5eed_0001);
}

#[test]
fn a_java_transactional_loop_killed_20_times_moves_every_record_exactly_once() {
    killed_20_times(LoopClient::Java, 0x5eed_0003);
}
