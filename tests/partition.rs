//! A network partition, in network namespaces: three nodes, each in a
//! namespace of its own, etcd and the test's clients outside them. The
//! leader is cut off from etcd and its followers, not from the clients: it
//! acknowledges nothing from then on and stops taking produces once its
//! lease runs out; a follower takes over. When the partition heals, the old
//! leader cuts back what it never replicated and rejoins as a follower; led
//! by it again, the group serves exactly the acknowledged messages.

mod common;

use common::etcd::{isr_of, wait_for_status, Etcd};
use common::netns::Lan;
use common::{assert_acked_present, consume, Broker};
use ringmq::client::{Client, ClientConfig, ClientError, Consumer, Message, Producer, ProducerConfig, StartFrom};
use ringmq::protocol::ErrorCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

const TOPIC: &str = "orders";
const LEASE_MS: u64 = 1000;

fn client(bootstrap: &str, retries: u32) -> Result<Arc<Client>, ClientError> {
    let mut cfg = ClientConfig::new(bootstrap);
    cfg.request_timeout = Duration::from_secs(5);
    cfg.retries = retries;
    Client::connect(cfg)
}

/// A client of whichever of `bootstrap` leads, once one does (within a minute).
fn client_of_leader(bootstrap: &str) -> Arc<Client> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match client(bootstrap, 50) {
            Ok(c) => return c,
            Err(e) => assert!(Instant::now() < deadline, "none of {bootstrap} leads: {e}"),
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn isr_becomes(etcd: &Etcd, isr: &str) -> String {
    let lines = wait_for_status(&etcd.url, Duration::from_secs(60), |lines| isr_of(lines, "g1") == isr);
    isr_of(&lines, "g1")
}

/// Sends `value` until an attempt is acknowledged, for at most a minute.
fn send_until_acked(producer: &Producer, value: &str) -> ringmq::client::SendResult {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match producer.send(TOPIC, &Message::new(value.to_string())) {
            Ok(sent) => return sent,
            Err(e) if Instant::now() < deadline => {
                eprintln!("sending {value}: {e}; again");
                std::thread::sleep(Duration::from_millis(200));
            }
            Err(e) => panic!("sending {value}: {e}"),
        }
    }
}

/// True if the error says the node no longer takes produces (rather than
/// that it could not replicate one): NotLeader, or no answer at all from a
/// node that stopped its shards.
fn refused(e: &ClientError) -> bool {
    match e {
        ClientError::Broker { code, .. } => matches!(code, ErrorCode::NotLeader | ErrorCode::ShuttingDown),
        other => other.is_retriable(),
    }
}

#[test]
fn a_partitioned_leader_is_fenced_and_rejoins_as_a_follower_without_divergent_data() {
    let lan = Lan::new(3);
    let dir = tempfile::tempdir().unwrap();
    let etcd = Etcd::start_on(&dir.path().join("etcd"), &lan.etcd_ip());
    let names = ["a", "b", "c"];
    let lease = LEASE_MS.to_string();
    let nodes: Vec<Broker> = (0..3)
        .map(|i| {
            let listen = format!("{}:9000", lan.node_ip(i));
            let args = ["--cluster", &etcd.url, "--broker-group", "g1", "--node", names[i], "--lease-ms", &lease];
            let args = [&args[..], &["--insync-min", "2", "--replica-ack-timeout-ms", "1000"]].concat();
            Broker::start_in_netns(lan.namespace(i), &dir.path().join(names[i]), &listen, &args)
        })
        .collect();
    let addr = |i: usize| nodes[i].addr().to_string();
    let to_a = client(&addr(0), 3).expect("the first node leads");
    to_a.create_topic(TOPIC, 2, 0).unwrap();
    assert_eq!(isr_becomes(&etcd, "a,b,c"), "a,b,c");
    let producer = Producer::new(to_a.clone(), ProducerConfig::default());
    let mut acked: Vec<_> = (0..30).map(|i| (format!("m{i}"), send_until_acked(&producer, &format!("m{i}")))).collect();

    // a loses etcd and its followers; this test's clients still reach it.
    let others = vec![lan.etcd_ip(), lan.node_ip(1), lan.node_ip(2)];
    lan.cut(0, &others);
    let cut_at = Instant::now();
    let single = Producer::new(client(&addr(0), 0).unwrap(), ProducerConfig::default());
    let fenced_after = loop {
        match single.send(TOPIC, &Message::new("sent into the partition")) {
            Ok(sent) => panic!("a leader cut off from its followers acknowledged {sent:?}"),
            Err(e) if refused(&e) => break cut_at.elapsed(),
            Err(ClientError::Broker { code: ErrorCode::NotEnoughReplicas, .. }) => {}
            Err(e) => panic!("the cut-off leader answered {e}"),
        }
        assert!(cut_at.elapsed() < Duration::from_secs(60), "the cut-off leader still takes produces");
    };
    eprintln!("the cut-off leader stopped taking produces {fenced_after:?} after the cut (lease {LEASE_MS} ms)");
    drop((single, producer, to_a));

    // b or c leads a new epoch and takes produces.
    let to_bc = client_of_leader(&format!("{},{}", addr(1), addr(2)));
    let producer = Producer::new(to_bc.clone(), ProducerConfig::default());
    for i in 30..60 {
        acked.push((format!("m{i}"), send_until_acked(&producer, &format!("m{i}"))));
    }
    drop((producer, to_bc));

    // Healed, a cuts back what it never replicated and follows.
    lan.heal(0, &others);
    assert_eq!(isr_becomes(&etcd, "a,b,c"), "a,b,c", "the old leader rejoins the in-sync set");

    // Led by a again, the group serves exactly what it acknowledged.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ringmq"))
        .args(["cluster", "transfer-leader", "--cluster", &etcd.url, "--broker-group", "g1", "--to", "a"])
        .output()
        .unwrap();
    assert!(out.status.success(), "transfer-leader: {}", String::from_utf8_lossy(&out.stderr));
    let to_a = client_of_leader(&addr(0));
    let mut consumer = Consumer::new(to_a.clone(), None);
    consumer.assign_all(TOPIC, StartFrom::Earliest).unwrap();
    let got = consume(&mut consumer, acked.len(), Duration::from_secs(30));
    let got: Vec<_> = got.into_iter().chain(common::poll_during(&mut consumer, Duration::from_millis(500))).collect();
    assert_acked_present(&got, &acked);
    assert_eq!(got.len(), acked.len(), "nothing but the acknowledged messages");
    assert!(got.iter().all(|m| m.value_or_empty() != b"sent into the partition"), "no divergent data is served");
    drop((consumer, to_a));
    drop(nodes);
    drop(etcd);
    drop(lan);
}
