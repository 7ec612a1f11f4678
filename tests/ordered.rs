//! Ordered consumption against a real broker: two orderly push consumers
//! of one group, messages keyed over 20 keys, transient failures and one
//! poison message. Per key, no message is processed before its predecessor;
//! a queue never runs on two workers at once; the poison message is retried
//! in place, then dead-lettered, and its key moves on.

mod common;

use common::Broker;
use ringmq::client::{
    ConsumeStatus, ConsumedMessage, Consumer, GroupConfig, Message, Producer, ProducerConfig, PushConfig, PushConsumer,
    QueueSelector, StartFrom, StartNew,
};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const KEYS: u32 = 20;
const PER_KEY: u32 = 50;
const POISON: (u32, u32) = (3, 10);

#[derive(Default)]
struct Seen {
    /// Queues a listener call is running on.
    running: HashSet<(String, u32)>,
    overlaps: usize,
    /// (key, seq) of each success, in completion order.
    successes: Vec<(u32, u32)>,
    poison_attempts: usize,
    /// Transient failures already injected.
    failed_once: HashSet<(u32, u32)>,
}

fn parse(m: &ConsumedMessage) -> (u32, u32) {
    let v = String::from_utf8_lossy(m.value_or_empty()).into_owned();
    let (k, s) = v.trim_start_matches('k').split_once('-').unwrap();
    (k.parse().unwrap(), s.parse().unwrap())
}

fn listener(seen: Arc<Mutex<Seen>>) -> ringmq::client::Listener {
    Arc::new(move |m: &ConsumedMessage| {
        let queue = (m.topic.clone(), m.queue);
        {
            let mut s = seen.lock().unwrap();
            if !s.running.insert(queue.clone()) {
                s.overlaps += 1;
            }
        }
        std::thread::sleep(Duration::from_micros(200));
        let (key, seq) = parse(m);
        let mut s = seen.lock().unwrap();
        s.running.remove(&queue);
        if (key, seq) == POISON {
            s.poison_attempts += 1;
            ConsumeStatus::ReconsumeLater
        } else if seq % 7 == 3 && s.failed_once.insert((key, seq)) {
            ConsumeStatus::ReconsumeLater
        } else {
            s.successes.push((key, seq));
            ConsumeStatus::Success
        }
    })
}

#[test]
fn ordered_consumers_keep_per_key_order_and_dead_letter_a_poison_message() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(dir.path(), &[]);
    let client = broker.client();
    client.create_topic("orders", 4, 0).unwrap();
    let seen = Arc::new(Mutex::new(Seen::default()));
    let config = |id: &str| PushConfig {
        threads: 2,
        max_retries: 3,
        orderly: true,
        suspend: Duration::from_millis(5),
        lock_lease: Duration::from_secs(3),
        commit_interval: Duration::from_millis(100),
        ..PushConfig::new(GroupConfig {
            start_new: StartNew::Earliest,
            heartbeat_interval: Duration::from_millis(100),
            session_timeout: Duration::from_secs(2),
            rebalance_timeout: Duration::from_secs(3),
            client_id: id.into(),
            ..GroupConfig::new("ordered", &["orders"])
        })
    };
    let a = PushConsumer::start(broker.client(), config("a"), listener(seen.clone())).unwrap();
    let producer =
        Producer::new(client.clone(), ProducerConfig { selector: QueueSelector::KeyHash, ..Default::default() });
    let send = |seqs: std::ops::Range<u32>| {
        let sends: Vec<_> = seqs
            .flat_map(|seq| (0..KEYS).map(move |key| (key, seq)))
            .map(|(key, seq)| {
                producer.send_async("orders", Message::new(format!("k{key}-{seq}")).with_key(format!("{key}")))
            })
            .collect();
        sends.into_iter().for_each(|f| {
            f.wait().unwrap();
        });
    };
    send(0..PER_KEY / 2);
    // A second member joins mid-stream: queues move under their locks.
    let b = PushConsumer::start(broker.client(), config("b"), listener(seen.clone())).unwrap();
    send(PER_KEY / 2..PER_KEY);
    let want: HashSet<(u32, u32)> =
        (0..KEYS).flat_map(|k| (0..PER_KEY).map(move |s| (k, s))).filter(|m| *m != POISON).collect();
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        let done: HashSet<(u32, u32)> = seen.lock().unwrap().successes.iter().copied().collect();
        if done == want {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    a.shutdown();
    b.shutdown();

    let s = seen.lock().unwrap();
    assert_eq!(s.overlaps, 0, "a queue ran on two workers at once");
    let done: HashSet<(u32, u32)> = s.successes.iter().copied().collect();
    let missing: Vec<_> = want.difference(&done).take(10).collect();
    assert!(missing.is_empty(), "{} of {} never succeeded, e.g. {missing:?}", want.len() - done.len(), want.len());
    let mut first_success: HashMap<(u32, u32), usize> = HashMap::new();
    for (i, m) in s.successes.iter().enumerate() {
        first_success.entry(*m).or_insert(i);
    }
    for key in 0..KEYS {
        for seq in (1..PER_KEY).filter(|seq| (key, *seq) != POISON) {
            let prev = if (key, seq - 1) == POISON { seq.checked_sub(2) } else { Some(seq - 1) };
            let Some(prev) = prev else { continue };
            assert!(
                first_success[&(key, prev)] < first_success[&(key, seq)],
                "k{key}-{seq} was processed before k{key}-{prev}"
            );
        }
    }
    assert!(s.poison_attempts >= 4 && s.poison_attempts % 4 == 0, "tries per delivery: {}", s.poison_attempts);
    let mut dlq = Consumer::new(client, None);
    dlq.assign_all("%DLQ%ordered", StartFrom::Earliest).unwrap();
    let dead = common::consume(&mut dlq, 1, Duration::from_secs(10));
    assert_eq!(dead.iter().map(parse).collect::<Vec<_>>()[..1], [POISON]);
}
