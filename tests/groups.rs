//! Consumer groups against a real broker: members join, leave and crash
//! while messages flow; every message is processed, a queue never has two
//! holders at once, and redeliveries happen only across a rebalance.

mod common;

use common::Broker;
use ringmq::client::{Client, Consumer, GroupConfig, Message, Producer, ProducerConfig, StartNew, Strategy};
use ringmq::protocol::messages::Membership;
use ringmq::protocol::ErrorCode;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const TOPIC: &str = "orders";
const MESSAGES: u64 = 50_000;

/// One processing of one message.
#[derive(Debug, Clone)]
struct Processed {
    queue: u32,
    offset: u64,
    member: usize,
    generation: u32,
    at: Instant,
}

fn config(strategy: Strategy) -> GroupConfig {
    GroupConfig {
        session_timeout: Duration::from_secs(2),
        heartbeat_interval: Duration::from_millis(200),
        rebalance_timeout: Duration::from_secs(3),
        start_new: StartNew::Earliest,
        strategy,
        ..GroupConfig::new("billing", &[TOPIC])
    }
}

/// How a member's run ends.
#[derive(Clone, Copy, PartialEq)]
enum End {
    Leave,
    Crash,
}

struct MemberRun {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<()>,
}

fn start_member(
    client: Arc<Client>,
    id: usize,
    strategy: Strategy,
    end: End,
    log: Arc<Mutex<Vec<Processed>>>,
) -> MemberRun {
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let thread = std::thread::spawn(move || {
        let mut c = Consumer::subscribe(client, GroupConfig { client_id: format!("m{id}"), ..config(strategy) });
        let mut idle_polls = 0;
        loop {
            if stop2.load(Ordering::Relaxed) && end == End::Leave {
                break;
            }
            let got = match c.poll(Duration::from_millis(100)) {
                Ok(got) => got,
                Err(e) => panic!("member {id}: poll failed: {e}"),
            };
            let generation = c.generation();
            let at = Instant::now();
            log.lock().unwrap().extend(got.iter().map(|m| Processed {
                queue: m.queue,
                offset: m.offset,
                member: id,
                generation,
                at,
            }));
            idle_polls = if got.is_empty() { idle_polls + 1 } else { 0 };
            if end == End::Crash && stop2.load(Ordering::Relaxed) && (!got.is_empty() || idle_polls > 10) {
                // Dies after processing a batch, before committing it (it comes again).
                c.abandon();
                return;
            }
            if !got.is_empty() {
                // Fenced commits are expected around a rebalance: the next poll rejoins.
                let _ = c.commit();
            }
        }
    });
    MemberRun { stop, thread }
}

impl MemberRun {
    fn end(self) {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().expect("member thread");
    }
}

#[test]
fn a_group_processes_everything_while_members_join_leave_and_crash() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(dir.path(), &[]);
    let client = broker.client();
    client.create_topic(TOPIC, 8, 0).unwrap();
    let log = Arc::new(Mutex::new(Vec::new()));
    let member = |id, end| start_member(broker.client(), id, Strategy::Average, end, log.clone());

    let producer_client = broker.client();
    let producer = std::thread::spawn(move || {
        let p = Producer::new(producer_client, ProducerConfig::default());
        let started = Instant::now();
        let mut acked = Vec::new();
        for i in 0..MESSAGES {
            // About 8,000 messages/s: the run spans the membership changes below.
            while started.elapsed() < Duration::from_micros(i * 125) {
                std::thread::sleep(Duration::from_millis(1));
            }
            acked.push(p.send_async(TOPIC, Message::new(format!("m-{i}"))));
        }
        acked.into_iter().map(|f| f.wait().unwrap()).map(|r| (r.queue, r.offset)).collect::<HashSet<_>>()
    });

    let m0 = member(0, End::Leave);
    let m1 = member(1, End::Crash);
    std::thread::sleep(Duration::from_millis(1500));
    let m2 = member(2, End::Leave);
    std::thread::sleep(Duration::from_millis(1500));
    m0.end(); // leaves: its queues move at once
    std::thread::sleep(Duration::from_millis(1500));
    m1.end(); // crashes: its queues move after the session timeout
    let m3 = member(3, End::Leave);
    let acked = producer.join().unwrap();
    assert_eq!(acked.len() as u64, MESSAGES);

    let deadline = Instant::now() + Duration::from_secs(60);
    while distinct(&log.lock().unwrap()) < acked.len() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    m2.end();
    m3.end();

    let log = log.lock().unwrap().clone();
    let seen: HashSet<(u32, u64)> = log.iter().map(|p| (p.queue, p.offset)).collect();
    let missing = acked.difference(&seen).count();
    assert_eq!(missing, 0, "every acknowledged message is processed at least once");
    assert_one_holder_at_a_time(&log);
    let duplicates = log.len() - seen.len();
    assert_duplicates_only_across_rebalances(&log);
    let generations = log.iter().map(|p| p.generation).max().unwrap();
    eprintln!(
        "processed {} messages ({} distinct, {duplicates} redelivered) over {generations} generations",
        log.len(),
        seen.len()
    );
    assert!(duplicates * 10 <= seen.len(), "redeliveries stay a small share: {duplicates}");
}

fn distinct(log: &[Processed]) -> usize {
    log.iter().map(|p| (p.queue, p.offset)).collect::<HashSet<_>>().len()
}

/// In every queue, processing moves forward through generations and each
/// generation's messages come from one member: no two members hold a queue
/// at once.
fn assert_one_holder_at_a_time(log: &[Processed]) {
    let mut by_queue: BTreeMap<u32, Vec<&Processed>> = BTreeMap::new();
    for p in log {
        by_queue.entry(p.queue).or_default().push(p);
    }
    for (queue, mut ps) in by_queue {
        ps.sort_by_key(|p| p.at);
        let mut holder: HashMap<u32, usize> = HashMap::new();
        let mut last_generation = 0;
        for p in ps {
            assert!(
                p.generation >= last_generation,
                "queue {queue}: generation {} after {last_generation}",
                p.generation
            );
            last_generation = p.generation;
            let h = *holder.entry(p.generation).or_insert(p.member);
            assert_eq!(h, p.member, "queue {queue}: two members in generation {}", p.generation);
        }
    }
}

/// A message processed twice was processed in two generations.
fn assert_duplicates_only_across_rebalances(log: &[Processed]) {
    let mut generations: HashMap<(u32, u64), Vec<u32>> = HashMap::new();
    for p in log {
        generations.entry((p.queue, p.offset)).or_default().push(p.generation);
    }
    for ((queue, offset), gens) in generations {
        let unique: HashSet<_> = gens.iter().collect();
        assert_eq!(unique.len(), gens.len(), "{queue}/{offset} processed twice in one generation: {gens:?}");
    }
}

#[test]
fn fenced_and_unassigned_commits_are_refused_with_typed_errors() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(dir.path(), &[]);
    let client = broker.client();
    client.create_topic(TOPIC, 4, 0).unwrap();
    let mut a = Consumer::subscribe(broker.client(), config(Strategy::RoundRobin));
    a.poll(Duration::from_millis(10)).unwrap();
    let first = a.generation();
    let who = |generation, member: &str| Membership { group: "billing".into(), generation, member: member.into() };
    let code = |r: Result<(), ringmq::client::ClientError>| match r {
        Err(ringmq::client::ClientError::Broker { code, .. }) => code,
        other => panic!("expected a broker error, got {other:?}"),
    };
    assert_eq!(code(client.commit_offset(&who(0, ""), TOPIC, 0, 1)), ErrorCode::UnknownMember, "outsider");
    assert_eq!(code(client.commit_offset(&who(first, "nobody"), TOPIC, 0, 1)), ErrorCode::UnknownMember);

    // A second member joins: once a rejoined, generation `first` is fenced.
    let mut b = Consumer::subscribe(broker.client(), config(Strategy::RoundRobin));
    let joiner = std::thread::spawn(move || {
        b.poll(Duration::from_millis(10)).unwrap();
        b
    });
    let deadline = Instant::now() + Duration::from_secs(10);
    while a.generation() == first && Instant::now() < deadline {
        a.poll(Duration::from_millis(50)).unwrap();
    }
    let b = joiner.join().unwrap();
    assert!(a.generation() > first);
    let a_id = a.membership().expect("a group member").member;
    let stale = code(client.commit_offset(&who(first, &a_id), TOPIC, 0, 1));
    assert_eq!(stale, ErrorCode::IllegalGeneration, "a former generation is fenced");
    // Round-robin over 2 members: each holds two of the four queues.
    let refused = (0..4).filter(|q| client.commit_offset(&who(a.generation(), &a_id), TOPIC, *q, 0).is_err()).count();
    assert_eq!(refused, 2, "the other member's queues are refused (NotAssigned)");
    drop(b);
}

#[test]
fn broadcast_members_each_receive_everything_and_resume_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(dir.path(), &[]);
    let client = broker.client();
    client.create_topic("news", 4, 0).unwrap();
    let producer = Producer::new(client.clone(), ProducerConfig::default());
    let send = |from: u32, to: u32| {
        for i in from..to {
            producer.send("news", &Message::new(format!("n-{i}"))).unwrap();
        }
    };
    let member = |name: &str| {
        let config = GroupConfig { start_new: StartNew::Earliest, ..GroupConfig::broadcast("feed", &["news"], name) };
        Consumer::subscribe(broker.client(), config)
    };
    let values = |got: &[ringmq::client::ConsumedMessage]| {
        let mut v: Vec<String> = got.iter().map(|m| String::from_utf8(m.value_or_empty().to_vec()).unwrap()).collect();
        v.sort();
        v
    };
    let expected = |from: u32, to: u32| {
        let mut v: Vec<String> = (from..to).map(|i| format!("n-{i}")).collect();
        v.sort();
        v
    };
    send(0, 300);
    let mut members: Vec<Consumer> = ["a", "b", "c"].iter().map(|n| member(n)).collect();
    for m in &mut members {
        let got = common::consume(m, 300, Duration::from_secs(10));
        assert_eq!(values(&got), expected(0, 300), "every member gets every message");
        m.commit().unwrap();
    }
    // "b" restarts: it resumes from its own committed offsets.
    drop(members.remove(1));
    send(300, 500);
    let mut b = member("b");
    let got = common::consume(&mut b, 200, Duration::from_secs(10));
    assert_eq!(values(&got), expected(300, 500), "b resumes where it committed, nothing twice");
    for m in &mut members {
        assert_eq!(values(&common::consume(m, 200, Duration::from_secs(10))), expected(300, 500));
    }
    // A broadcast member without an instance name is refused at its first poll.
    let nameless = GroupConfig { instance: None, ..GroupConfig::broadcast("feed", &["news"], "x") };
    let e = Consumer::subscribe(client, nameless).poll(Duration::from_millis(10)).unwrap_err();
    assert!(e.to_string().contains("instance name"), "{e}");
}

#[test]
fn a_new_group_starts_where_configured_and_auto_commit_keeps_its_place() {
    let dir = tempfile::tempdir().unwrap();
    let mut broker = Broker::start(dir.path(), &[]);
    let client = broker.client();
    client.create_topic(TOPIC, 2, 0).unwrap();
    let producer = Producer::new(client.clone(), ProducerConfig::default());
    let send = |range: std::ops::Range<u32>| {
        for i in range {
            producer.send(TOPIC, &Message::new(format!("m-{i}"))).unwrap();
        }
    };
    send(0..10);
    let config = |group: &str, start_new| GroupConfig {
        start_new,
        auto_commit: Some(Duration::from_millis(50)),
        ..GroupConfig::new(group, &[TOPIC])
    };
    let values = |got: Vec<ringmq::client::ConsumedMessage>| {
        let mut v: Vec<String> =
            got.into_iter().map(|m| String::from_utf8(m.value.unwrap_or_default()).unwrap()).collect();
        v.sort();
        v
    };
    let mut latest = Consumer::subscribe(broker.client(), config("late", StartNew::Latest));
    latest.poll(Duration::from_millis(50)).unwrap(); // joins at the end of the queues
    let mut earliest = Consumer::subscribe(broker.client(), config("early", StartNew::Earliest));
    assert_eq!(common::consume(&mut earliest, 10, Duration::from_secs(10)).len(), 10, "from the first message");
    send(10..15);
    let late: Vec<String> = (10..15).map(|i| format!("m-{i}")).collect();
    assert_eq!(values(common::consume(&mut latest, 5, Duration::from_secs(10))), late, "only what came after");
    // No commit() call: auto-commit (and the commit on close) keep the place.
    std::thread::sleep(Duration::from_millis(100));
    latest.poll(Duration::from_millis(10)).unwrap();
    drop(latest);
    send(15..17);
    drop(producer);
    // The group's offsets are durable on its coordinator: they survive kill -9.
    broker.kill9();
    broker.restart();
    let mut again = Consumer::subscribe(broker.client(), config("late", StartNew::Earliest));
    let after = values(common::consume(&mut again, 2, Duration::from_secs(10)));
    assert_eq!(after, vec!["m-15".to_string(), "m-16".to_string()], "resumes after what the first member consumed");
}
