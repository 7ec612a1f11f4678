//! Sync replication under kill -9, twenty times, under ten pauses of the
//! leader past its lease, and a rolling restart: a producer sends all the
//! while, the leader is killed at a random moment of each round and started
//! again; every acknowledged message is then present at its queue and offset,
//! in order per queue, no message is stored twice (the client's retries are
//! recognised), and nothing a consumer received during the loop is missing
//! or different afterwards. Prints the fail-over times (kill to the
//! first acknowledged produce after it). A paused leader answers every
//! request it holds once it runs again.

mod common;

use common::etcd::Etcd;
use common::{assert_acked_present, batch, free_port_pair, Broker, Raw};
use ringmq::client::{
    Client, ClientConfig, ConsumedMessage, Consumer, Message, Producer, ProducerConfig, SendResult, StartFrom,
};
use ringmq::protocol::frame;
use ringmq::protocol::messages::{Produce, QueueRef, ACKS_DURABLE};
use ringmq::protocol::{ApiKey, Writer};
use std::collections::HashMap;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const TOPIC: &str = "loop";
const QUEUES: u32 = 4;
const ROUNDS: usize = 20;
const PAUSES: usize = 10;
/// The pause test's raw requests go here, apart from the producer's order.
const HELD: &str = "held";
/// The nodes' etcd lease: a leader paused longer than this is replaced
/// (etcd grants no less than 2 s with its default election timeout).
const LEASE: Duration = Duration::from_millis(2000);
/// The pause test's `--replica-ack-timeout-ms`.
const ACK_TIMEOUT: Duration = Duration::from_millis(3000);

fn client_of(bootstrap: &str) -> Option<Arc<Client>> {
    let mut cfg = ClientConfig::new(bootstrap);
    cfg.request_timeout = Duration::from_secs(10);
    cfg.retries = 400;
    cfg.retry_backoff = Duration::from_millis(5);
    Client::connect(cfg).ok()
}

/// The index of the node that serves clients, once one does.
fn leader(nodes: &[Broker]) -> usize {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(i) = nodes.iter().position(|n| client_of(n.addr()).is_some()) {
            return i;
        }
        assert!(Instant::now() < deadline, "no node leads");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits until the in-sync set holds all three nodes again.
fn wait_for_full_isr(etcd: &Etcd) {
    common::etcd::wait_for_isr_of(&etcd.url, "g1", 3);
}

/// Sends "p-SEQ" until stopped; notes every acknowledged send and when.
fn produce(bootstrap: String, stop: Arc<AtomicBool>, acked: Acked) {
    let client = loop {
        if let Some(c) = client_of(&bootstrap) {
            break c;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let producer = Producer::new(client, ProducerConfig::default());
    let mut seq = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let value = format!("p-{seq}");
        if let Ok(sent) = producer.send(TOPIC, &Message::new(value.clone())) {
            acked.lock().unwrap().push((value, sent, Instant::now()));
        }
        seq += 1;
    }
}

/// Consumes from the start until stopped, reconnecting through fail-overs;
/// returns what it received, by (queue, offset).
fn consume(bootstrap: String, stop: Arc<AtomicBool>) -> HashMap<(u32, u64), Vec<u8>> {
    let mut seen: HashMap<(u32, u64), Vec<u8>> = HashMap::new();
    let mut positions: HashMap<u32, u64> = HashMap::new();
    while !stop.load(Ordering::Relaxed) {
        let Some(client) = client_of(&bootstrap) else { continue };
        let mut consumer = Consumer::new(client, None);
        if consumer.assign_all(TOPIC, StartFrom::Earliest).is_err() {
            continue;
        }
        for (q, p) in &positions {
            consumer.seek(TOPIC, *q, *p);
        }
        while !stop.load(Ordering::Relaxed) {
            let Ok(got) = consumer.poll(Duration::from_millis(100)) else { break };
            for m in got {
                let earlier = seen.insert((m.queue, m.offset), m.value_or_empty().to_vec());
                assert!(
                    earlier.is_none_or(|v| v == m.value_or_empty()),
                    "{}/{} was received with two values",
                    m.queue,
                    m.offset
                );
                positions.insert(m.queue, m.offset + 1);
            }
        }
    }
    seen
}

/// Per queue, the sequence numbers only grow.
fn assert_order_per_queue(got: &[ConsumedMessage]) {
    let mut last: HashMap<u32, u64> = HashMap::new();
    let mut ordered: Vec<&ConsumedMessage> = got.iter().collect();
    ordered.sort_by_key(|m| (m.queue, m.offset));
    for m in ordered {
        let seq: u64 = String::from_utf8_lossy(m.value_or_empty()).trim_start_matches("p-").parse().unwrap();
        if let Some(prev) = last.insert(m.queue, seq) {
            assert!(prev < seq, "queue {}: p-{prev} before p-{seq}", m.queue);
        }
    }
}

/// Three nodes of group g1 on 127.0.0.`first_ip`.., each of its own
/// address; the topic made and every node in sync. Returns them and the
/// bootstrap list.
fn start_group(dir: &std::path::Path, etcd: &Etcd, first_ip: usize, extra: &[&str]) -> (Vec<Broker>, String) {
    let nodes: Vec<Broker> = ["a", "b", "c"]
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let ip = format!("127.0.0.{}", first_ip + i);
            let listen = format!("{ip}:{}", free_port_pair(&ip));
            let lease = LEASE.as_millis().to_string();
            let mut args =
                vec!["--cluster", etcd.url.as_str(), "--broker-group", "g1", "--node", name, "--lease-ms", &lease];
            args.extend_from_slice(extra);
            Broker::start_listening(&dir.join(name), &listen, &args)
        })
        .collect();
    let bootstrap = nodes.iter().map(|n| n.addr().to_string()).collect::<Vec<_>>().join(",");
    client_of(nodes[0].addr()).expect("the first node leads").create_topic(TOPIC, QUEUES, 0).unwrap();
    wait_for_full_isr(etcd);
    (nodes, bootstrap)
}

type Acked = Arc<Mutex<Vec<(String, SendResult, Instant)>>>;

/// Reads the whole topic back: every acknowledged message at its queue and
/// offset, each value once, in order per queue. Returns what is stored.
fn assert_all_acked_there_once(bootstrap: &str, acked: &Acked) -> Vec<ConsumedMessage> {
    let client = client_of(bootstrap).expect("a leader");
    let mut all = Consumer::new(client, None);
    all.assign_all(TOPIC, StartFrom::Earliest).unwrap();
    let acked: Vec<(String, SendResult)> = acked.lock().unwrap().iter().map(|(v, s, _)| (v.clone(), *s)).collect();
    let got = common::consume(&mut all, acked.len(), Duration::from_secs(60));
    let got: Vec<ConsumedMessage> =
        got.into_iter().chain(common::poll_during(&mut all, Duration::from_secs(1))).collect();
    assert_acked_present(&got, &acked);
    assert_order_per_queue(&got);
    // Each value is sent once; the client's retries of it carry the same
    // bytes, which the broker recognises (also on a new leader).
    let mut values: Vec<&[u8]> = got.iter().map(|m| m.value_or_empty()).collect();
    values.sort();
    let sent = values.len();
    values.dedup();
    assert_eq!(values.len(), sent, "no message is stored twice");
    got
}

#[test]
fn twenty_leader_kills_lose_no_acknowledged_message() {
    let dir = tempfile::tempdir().unwrap();
    let etcd = Etcd::start(&dir.path().join("etcd"));
    let (mut nodes, bootstrap) = start_group(dir.path(), &etcd, 61, &[]);
    let stop = Arc::new(AtomicBool::new(false));
    let acked: Acked = Arc::default();
    let producer = std::thread::spawn({
        let (b, s, a) = (bootstrap.clone(), stop.clone(), acked.clone());
        move || produce(b, s, a)
    });
    let consumer = std::thread::spawn({
        let (b, s) = (bootstrap.clone(), stop.clone());
        move || consume(b, s)
    });
    let mut failovers = Vec::new();
    let mut random = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64;
    for round in 0..ROUNDS {
        let victim = leader(&nodes);
        random = random.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        std::thread::sleep(Duration::from_millis(100 + (random >> 33) % 500));
        let killed = Instant::now();
        nodes[victim].kill9();
        let deadline = killed + Duration::from_secs(60);
        let first_ack = loop {
            if let Some(at) = acked.lock().unwrap().iter().map(|(_, _, at)| *at).find(|at| *at > killed) {
                break at;
            }
            assert!(Instant::now() < deadline, "round {round}: no produce was acknowledged after the kill");
            std::thread::sleep(Duration::from_millis(10));
        };
        failovers.push(first_ack - killed);
        nodes[victim].restart();
        wait_for_full_isr(&etcd);
    }
    stop.store(true, Ordering::Relaxed);
    producer.join().unwrap();
    let received = consumer.join().unwrap();

    let got = assert_all_acked_there_once(&bootstrap, &acked);
    let stored: HashMap<(u32, u64), &[u8]> = got.iter().map(|m| ((m.queue, m.offset), m.value_or_empty())).collect();
    for ((q, o), value) in &received {
        assert_eq!(stored.get(&(*q, *o)).copied(), Some(value.as_slice()), "received {q}/{o} is gone or changed");
    }
    failovers.sort();
    let ms = |d: &Duration| d.as_secs_f64() * 1e3;
    eprintln!(
        "fail-over (kill -9 to the first acknowledged produce) over {ROUNDS} kills: p50 {:.0} ms, max {:.0} ms; \
         acknowledged {}, stored {}, received during the loop {}",
        ms(&failovers[failovers.len() / 2]),
        ms(failovers.last().unwrap()),
        acked.lock().unwrap().len(),
        got.len(),
        received.len()
    );
}

/// A produce request frame of one message to `queue` of topic HELD.
fn produce_frame(queue: u32, correlation: u32, value: &str) -> Vec<u8> {
    let mut w = Writer::default();
    let body = batch(value.as_bytes());
    Produce { queue: QueueRef { topic: HELD.into(), queue }, acks: ACKS_DURABLE, batches: vec![&body] }.encode(&mut w);
    frame::request(ApiKey::Produce as u16, 0, correlation, &w.buf)
}

/// Raw connections to each queue's shard on `node`, each with `before`
/// produce requests sent (correlation ids 1..); the connections, their
/// queues and how many each was sent.
fn raw_producers(node: &Broker, shards: &[u32], tag: &str, before: u32) -> Vec<(Raw, u32, u32)> {
    (0..QUEUES)
        .map(|queue| {
            let mut raw = Raw::connect(&node.addrs[shards[queue as usize] as usize]);
            for n in 1..=before {
                raw.stream.write_all(&produce_frame(queue, n, &format!("{tag}-q{queue}-{n}"))).unwrap();
            }
            (raw, queue, before)
        })
        .collect()
}

/// How long after `since` a fresh client's produce to topic HELD was first
/// acknowledged, trying until `until`; else the last attempt's error.
fn writable_again(bootstrap: &str, since: Instant, until: Instant) -> Result<Duration, String> {
    let mut last = "no attempt".to_string();
    while Instant::now() < until {
        let mut cfg = ClientConfig::new(bootstrap);
        cfg.request_timeout = Duration::from_millis(500);
        cfg.retries = 0;
        let sent = Client::connect(cfg).map_err(|e| e.to_string()).and_then(|c| {
            Producer::new(c, ProducerConfig::default()).send(HELD, &Message::new("w")).map_err(|e| e.to_string())
        });
        match sent {
            Ok(_) => return Ok(since.elapsed()),
            Err(e) => last = format!("{e} ({:?} into the pause)", since.elapsed()),
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Err(last)
}

/// The longest time between two acknowledgements in `from..to`.
fn longest_gap(acked: &Acked, from: Instant, to: Instant) -> Duration {
    let mut at: Vec<Instant> =
        acked.lock().unwrap().iter().map(|(_, _, at)| *at).filter(|a| *a >= from && *a <= to).collect();
    at.sort();
    at.windows(2).map(|w| w[1] - w[0]).max().unwrap_or(to - from)
}

/// The leader is paused (SIGSTOP) past its lease and resumed, ten times,
/// under a steady sync produce: every request it had read or that waited
/// in its socket is answered once it runs again, within the replica ack
/// timeout (NotLeader, NotEnoughReplicas or an ack: the client retries the
/// first two); writes resume on the new leader; the followers rejoin the
/// in-sync set; nothing acknowledged is lost or stored twice. Prints each
/// round's longest gap between acknowledgements and its answer times.
#[test]
fn ten_leader_pauses_past_the_lease_answer_every_request_and_writes_resume() {
    let dir = tempfile::tempdir().unwrap();
    let etcd = Etcd::start(&dir.path().join("etcd"));
    let ack_timeout = ACK_TIMEOUT.as_millis().to_string();
    let (mut nodes, bootstrap) = start_group(dir.path(), &etcd, 91, &["--replica-ack-timeout-ms", &ack_timeout]);
    let client = client_of(&bootstrap).expect("a leader");
    client.create_topic(HELD, QUEUES, 0).unwrap();
    let shards = client.topic(HELD).unwrap().queue_shards;
    wait_for_full_isr(&etcd);
    let stop = Arc::new(AtomicBool::new(false));
    let acked: Acked = Arc::default();
    let producer = std::thread::spawn({
        let (b, s, a) = (bootstrap.clone(), stop.clone(), acked.clone());
        move || produce(b, s, a)
    });
    for round in 0..PAUSES {
        let victim = leader(&nodes);
        let mut raws = raw_producers(&nodes[victim], &shards, &format!("r{round}"), 4);
        let paused = Instant::now();
        nodes[victim].pause();
        // These wait in the paused node's sockets.
        for (raw, queue, sent) in &mut raws {
            for n in *sent + 1..=*sent + 4 {
                raw.stream.write_all(&produce_frame(*queue, n, &format!("r{round}-q{queue}-{n}"))).unwrap();
            }
            *sent += 4;
        }
        // A new leader takes writes within two lease periods, while this one sleeps.
        let writable = writable_again(&bootstrap, paused, paused + LEASE * 3);
        let writable =
            writable.unwrap_or_else(|e| panic!("round {round}: no write was taken while the leader was paused: {e}"));
        std::thread::sleep((paused + LEASE * 3).saturating_duration_since(Instant::now()));
        nodes[victim].resume();
        let resumed = Instant::now();
        let (mut slowest, mut codes) = (Duration::ZERO, std::collections::BTreeMap::new());
        for (raw, queue, sent) in &mut raws {
            raw.stream.set_read_timeout(Some(ACK_TIMEOUT + LEASE * 5)).unwrap();
            // Answers may come in any order (the protocol matches them by correlation id).
            let mut unanswered: std::collections::BTreeSet<u32> = (1..=*sent).collect();
            while let Some(&first) = unanswered.first() {
                let Some((correlation, code, ..)) = raw.read_response() else {
                    panic!(
                        "round {round}: queue {queue}'s requests {unanswered:?} unanswered {:?} after the resume \
                         (first {first})",
                        resumed.elapsed()
                    )
                };
                assert!(unanswered.remove(&correlation), "round {round}: an answer to {correlation}, asked once");
                *codes.entry(format!("{code:?}")).or_insert(0) += 1;
                slowest = slowest.max(resumed.elapsed());
            }
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        while !acked.lock().unwrap().iter().any(|(_, _, at)| *at > resumed) {
            assert!(Instant::now() < deadline, "round {round}: no produce was acknowledged after the resume");
            std::thread::sleep(Duration::from_millis(10));
        }
        wait_for_full_isr(&etcd);
        let in_sync = resumed.elapsed();
        let gap = longest_gap(&acked, paused - LEASE, Instant::now());
        eprintln!(
            "pause {round}: a new client's write taken {:.0} ms into the pause; the steady producer's longest gap \
             between acks {:.0} ms; the paused node's {} requests answered within {:.0} ms \
             of the resume ({codes:?}); all three in sync {:.0} ms after it",
            writable.as_secs_f64() * 1e3,
            gap.as_secs_f64() * 1e3,
            raws.iter().map(|(_, _, n)| n).sum::<u32>(),
            slowest.as_secs_f64() * 1e3,
            in_sync.as_secs_f64() * 1e3
        );
    }
    stop.store(true, Ordering::Relaxed);
    producer.join().unwrap();
    assert_all_acked_there_once(&bootstrap, &acked);
    nodes.iter_mut().for_each(Broker::stop);
}

/// `ringmq cluster transfer-leader` to `to`; the line it prints.
fn transfer_leader(etcd: &Etcd, to: &str) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ringmq"))
        .args(["cluster", "transfer-leader", "--cluster", &etcd.url, "--broker-group", "g1", "--to", to])
        .output()
        .expect("run ringmq cluster transfer-leader");
    assert!(out.status.success(), "transfer-leader: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A rolling restart: each node in turn stops cleanly and starts again,
/// the leader last and only after handing over with `cluster
/// transfer-leader`; the group takes produces while each node is down, and
/// loses or doubles nothing.
#[test]
fn a_rolling_restart_with_a_planned_leader_switch_keeps_the_group_writable() {
    let dir = tempfile::tempdir().unwrap();
    let etcd = Etcd::start(&dir.path().join("etcd"));
    let (mut nodes, bootstrap) = start_group(dir.path(), &etcd, 81, &[]);
    let names = ["a", "b", "c"];
    let stop = Arc::new(AtomicBool::new(false));
    let acked: Acked = Arc::default();
    let producer = std::thread::spawn({
        let (b, s, a) = (bootstrap.clone(), stop.clone(), acked.clone());
        move || produce(b, s, a)
    });
    let first = leader(&nodes);
    let order: Vec<usize> = (0..3).filter(|n| *n != first).chain([first]).collect();
    for victim in order {
        if leader(&nodes) == victim {
            let to = (0..3).find(|n| *n != victim).unwrap();
            let said = transfer_leader(&etcd, names[to]);
            assert!(said.starts_with(&format!("broker_group=g1 leader={} epoch=", names[to])), "{said}");
            assert_eq!(leader(&nodes), to, "the named node leads");
        }
        nodes[victim].stop();
        let before = acked.lock().unwrap().len();
        let deadline = Instant::now() + Duration::from_secs(60);
        while acked.lock().unwrap().len() < before + 20 {
            assert!(Instant::now() < deadline, "no produce was acknowledged while {} was down", names[victim]);
            std::thread::sleep(Duration::from_millis(20));
        }
        nodes[victim].restart();
        wait_for_full_isr(&etcd);
    }
    stop.store(true, Ordering::Relaxed);
    producer.join().unwrap();
    let got = assert_all_acked_there_once(&bootstrap, &acked);
    eprintln!("rolling restart: acknowledged {}, stored {}", acked.lock().unwrap().len(), got.len());
}
