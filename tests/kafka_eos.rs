//! Exactly-once with Kafka transactions on a single node: a
//! consume-transform-produce loop killed with kill -9 at 20 random points
//! (`common/eos.rs`) moves every input record to the output exactly once.
//! The same against a three-node broker group whose leader is killed too is
//! in `kafka_cluster.rs`.

mod common;

use common::eos::{assert_exactly_once, kill_and_restart, output, IN, OUT};

#[test]
fn a_transactional_loop_killed_20_times_moves_every_record_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, kafka) = common::kafka_broker(dir.path(), &[]);
    broker.client().create_topic(IN, 2, 0).unwrap();
    broker.client().create_topic(OUT, 2, 0).unwrap();
    let seed = 0x5eed_0001;
    eprintln!("kill points seeded {seed:#x}");
    let fed = kill_and_restart(&kafka, seed, false, |_| {});
    assert_exactly_once(&output(broker.client(), fed), fed);
}
