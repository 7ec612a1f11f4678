//! Two broker groups on one etcd: a topic's queues are placed over both, and
//! a client that knows either group's node produces to every queue and
//! consumes all of them; a consumer group commits positions of queues in
//! both groups on its one coordinator; a queue request sent to the wrong
//! group is refused with NotLeader and stores nothing; and while one group
//! fails over, the other keeps taking produces.

mod common;

use common::{assert_acked_present, consume, free_port_pair, Broker, Raw};
use ringmq::client::{
    Client, Consumer, GroupConfig, Message, Producer, ProducerConfig, QueueSelector, SendResult, StartFrom, StartNew,
};
use ringmq::protocol::messages::{Produce, QueueRef, ACKS_DURABLE};
use ringmq::protocol::{ApiKey, ErrorCode, Writer};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

const TOPIC: &str = "spread";
/// Two shards per node, two groups: two queues on each of the four shards.
const QUEUES: u32 = 8;
const PER_QUEUE: u32 = 10;

fn node(etcd: &common::etcd::Etcd, dir: &std::path::Path, group: &str, name: &str, ip: &str) -> Broker {
    let listen = format!("{ip}:{}", free_port_pair(ip));
    let args =
        ["--cluster", &etcd.url, "--broker-group", group, "--node", name, "--lease-ms", "1000", "--insync-min", "1"];
    Broker::start_listening(&dir.join(name), &listen, &args)
}

fn connect(bootstrap: &str) -> Arc<Client> {
    common::connect_retrying(bootstrap, 100)
}

/// A producer that sends each message to the queue its key names.
fn producer(client: &Arc<Client>) -> Producer {
    let by_key = Arc::new(|m: &Message, _: u32| {
        String::from_utf8_lossy(m.key.as_deref().unwrap_or_default()).parse::<u32>().expect("the key names the queue")
    });
    Producer::new(client.clone(), ProducerConfig { selector: QueueSelector::Custom(by_key), ..Default::default() })
}

fn send(p: &Producer, queue: u32, value: String) -> (String, SendResult) {
    let sent = p.send(TOPIC, &Message::new(value.clone()).with_key(queue.to_string())).unwrap_or_else(|e| {
        panic!("sending {value} to queue {queue}: {e}");
    });
    assert_eq!(sent.queue, queue);
    (value, sent)
}

/// The queues whose owner's address is on `ip`.
fn queues_on(client: &Client, ip: &str) -> Vec<u32> {
    (0..QUEUES).filter(|q| client.owner(TOPIC, *q).unwrap().starts_with(&format!("{ip}:"))).collect()
}

#[test]
fn a_topic_spread_over_two_groups_is_served_through_either_and_one_groups_fail_over_does_not_stop_the_other() {
    let dir = tempfile::tempdir().unwrap();
    let etcd = common::etcd::Etcd::start(&dir.path().join("etcd"));
    let mut e1 = node(&etcd, dir.path(), "east", "e1", "127.0.0.71");
    let mut e2 = node(&etcd, dir.path(), "east", "e2", "127.0.0.72");
    let mut w1 = node(&etcd, dir.path(), "west", "w1", "127.0.0.73");

    // Created through the west node; the east node's metadata has it at once.
    connect(w1.addr()).create_topic(TOPIC, QUEUES, 0).expect("create through west");
    let east = connect(e1.addr());
    let (east_queues, west_queues) = (queues_on(&east, "127.0.0.71"), queues_on(&east, "127.0.0.73"));
    assert_eq!(east_queues.len() + west_queues.len(), QUEUES as usize, "every queue is led by e1 or w1");
    assert_eq!((east_queues.len(), west_queues.len()), (4, 4), "half the queues in each group");
    let shards: BTreeSet<String> = (0..QUEUES).map(|q| east.owner(TOPIC, q).unwrap()).collect();
    assert_eq!(shards.len(), 4, "both shards of both groups hold queues: {shards:?}");

    // A queue request sent to the other group is refused, and stores nothing.
    let mut w = Writer::default();
    let wrong = QueueRef { topic: TOPIC.into(), queue: east_queues[0] };
    Produce { queue: wrong, acks: ACKS_DURABLE, batches: vec![&common::batch(b"misrouted")] }.encode(&mut w);
    let (_, code, message, _) = Raw::connect(w1.addr()).call(ApiKey::Produce as u16, 0, 1, &w.buf);
    assert_eq!(code, ErrorCode::NotLeader, "{message}");
    assert!(message.contains("broker group \"east\""), "{message}");

    // Produced through a client that knows only an east node, to every queue.
    let p = producer(&east);
    let mut acked: Vec<_> = (0..QUEUES)
        .flat_map(|q| (0..PER_QUEUE).map(move |i| (q, i)))
        .map(|(q, i)| send(&p, q, format!("q{q}-{i}")))
        .collect();
    drop(p);
    for q in 0..QUEUES {
        assert_eq!(
            east.list_offsets(TOPIC, q).unwrap(),
            (0, u64::from(PER_QUEUE)),
            "queue {q} holds its messages only"
        );
    }

    // A consumer group that knows only the west node reads all of it and
    // commits on its one coordinator; the east client reads the positions back.
    let west = connect(w1.addr());
    let group = GroupConfig { start_new: StartNew::Earliest, ..GroupConfig::new("readers", &[TOPIC]) };
    let mut member = Consumer::subscribe(west.clone(), group);
    let got = consume(&mut member, acked.len(), Duration::from_secs(30));
    assert_eq!(got.len(), acked.len(), "the group reads every queue of both groups");
    assert_acked_present(&got, &acked);
    member.commit().unwrap();
    drop(member);
    for q in 0..QUEUES {
        assert_eq!(east.fetch_offset("readers", TOPIC, q).unwrap(), Some(u64::from(PER_QUEUE)), "queue {q}");
    }

    // East's leader dies. West, whose metadata was read before, takes
    // produces while east has no leader, and after.
    let west_producer = producer(&west);
    let everywhere = connect(&format!("{},{},{}", e1.addr(), e2.addr(), w1.addr()));
    let follower = producer(&everywhere);
    e1.kill9();
    for &q in &west_queues {
        acked.push(send(&west_producer, q, format!("during-{q}")));
    }
    // East fails over to e2; a client that knew e1 follows it there.
    let deadline = Instant::now() + Duration::from_secs(60);
    for &q in &east_queues {
        acked.push(send(&follower, q, format!("after-{q}")));
        assert!(Instant::now() < deadline, "east did not fail over within a minute");
    }
    assert!(everywhere.owner(TOPIC, east_queues[0]).unwrap().starts_with("127.0.0.72:"), "e2 leads east now");
    for &q in &west_queues {
        acked.push(send(&west_producer, q, format!("after-{q}")));
    }
    drop((west_producer, follower));

    // Every acknowledged message is served, at its queue and offset.
    let mut consumer = Consumer::new(everywhere.clone(), None);
    consumer.assign_all(TOPIC, StartFrom::Earliest).unwrap();
    let got = consume(&mut consumer, acked.len(), Duration::from_secs(30));
    assert_eq!(got.len(), acked.len(), "exactly the acknowledged messages");
    assert_acked_present(&got, &acked);
    drop((consumer, everywhere, west, east));
    w1.stop();
    e2.stop();
}
