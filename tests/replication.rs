//! A broker group of three nodes on etcd: the first node elected leads,
//! the others mirror its shards and send clients to it; produces are
//! acknowledged once two replicas hold them durably; after the leader is
//! killed, a follower is elected in a new epoch and serves every
//! acknowledged message at its queue and offset, and takes new produces.

mod common;

use common::etcd::Etcd;
use common::{assert_acked_present, consume, free_port_pair, Broker};
use ringmq::client::{Client, ClientConfig, ClientError, Consumer, Message, Producer, ProducerConfig, StartFrom};
use ringmq::protocol::ErrorCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

const TOPIC: &str = "orders";
const QUEUES: u32 = 4;
const MESSAGES: u32 = 200;

fn node(etcd: &Etcd, dir: &std::path::Path, name: &str, ip: &str) -> Broker {
    let listen = format!("{ip}:{}", free_port_pair(ip));
    let args = ["--cluster", &etcd.url, "--group", "g1", "--node", name, "--lease-ms", "1000", "--min-insync", "2"];
    Broker::start_listening(&dir.join(name), &listen, &args)
}

fn connect(addr: &str) -> Result<Arc<Client>, ClientError> {
    let mut cfg = ClientConfig::new(addr);
    cfg.request_timeout = Duration::from_secs(20);
    Client::connect(cfg)
}

/// The node among `nodes` that serves clients, once one does (within `limit`).
fn leader_of(nodes: &[&Broker], limit: Duration) -> (usize, Arc<Client>) {
    let deadline = Instant::now() + limit;
    loop {
        for (i, n) in nodes.iter().enumerate() {
            if let Ok(client) = connect(n.addr()) {
                return (i, client);
            }
        }
        assert!(Instant::now() < deadline, "no node serves clients within {limit:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn acknowledged_messages_survive_the_leaders_death_and_the_new_leader_takes_produces() {
    let dir = tempfile::tempdir().unwrap();
    let etcd = Etcd::start(&dir.path().join("etcd"));
    let mut a = node(&etcd, dir.path(), "a", "127.0.0.21");
    let mut b = node(&etcd, dir.path(), "b", "127.0.0.22");
    let mut c = node(&etcd, dir.path(), "c", "127.0.0.23");
    let client = connect(a.addr()).expect("the first node leads");

    // A follower sends clients to the leader.
    match connect(b.addr()) {
        Err(ClientError::Broker { code: ErrorCode::NotLeader, message }) => {
            assert!(message.contains("follows a"), "{message}")
        }
        Err(other) => panic!("a follower answered {other}"),
        Ok(_) => panic!("a follower served a client"),
    }

    client.create_topic(TOPIC, QUEUES, 0).expect("create a sync topic");
    let producer = Producer::new(client.clone(), ProducerConfig::default());
    let mut acked = Vec::new();
    for i in 0..MESSAGES {
        let value = format!("m{i}");
        let sent = producer.send(TOPIC, &Message::new(value.clone())).expect("a sync produce with two replicas");
        acked.push((value, sent));
    }
    drop(producer);
    drop(client);

    a.kill9();
    let (leader, client) = leader_of(&[&b, &c], Duration::from_secs(60));
    let mut consumer = Consumer::new(client.clone(), None);
    consumer.assign_all(TOPIC, StartFrom::Earliest).unwrap();
    let got = consume(&mut consumer, acked.len(), Duration::from_secs(30));
    assert_eq!(got.len(), acked.len(), "the new leader serves exactly the acknowledged messages");
    assert_acked_present(&got, &acked);
    // The new leader and the other follower make two replicas again.
    let producer = Producer::new(client.clone(), ProducerConfig::default());
    let sent = producer.send(TOPIC, &Message::new("after fail-over")).expect("produce to the new leader");
    assert!(sent.offset >= (MESSAGES / QUEUES) as u64, "{sent:?}");
    drop((producer, consumer));
    drop(client);
    if leader == 0 {
        c.stop();
        b.stop();
    } else {
        b.stop();
        c.stop();
    }
}
