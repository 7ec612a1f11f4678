//! Sync replication under kill -9, twenty times, and a rolling restart: a producer sends all the
//! while, the leader is killed at a random moment of each round and started
//! again; every acknowledged message is then present at its queue and offset,
//! in order per queue, no message is stored twice (the client's retries are
//! recognised), and nothing a consumer received during the loop is missing
//! or different afterwards. Prints the fail-over times (kill to the
//! first acknowledged produce after it).

mod common;

use common::etcd::{isr_of, wait_for_status, Etcd};
use common::{assert_acked_present, free_port_pair, Broker};
use ringmq::client::{
    Client, ClientConfig, ConsumedMessage, Consumer, Message, Producer, ProducerConfig, SendResult, StartFrom,
};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const TOPIC: &str = "loop";
const QUEUES: u32 = 4;
const ROUNDS: usize = 20;

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
    let full = |lines: &[String]| isr_of(lines, "g1").split(',').count() == 3;
    let lines = wait_for_status(&etcd.url, Duration::from_secs(60), full);
    assert!(full(&lines), "the in-sync set stays {:?}", isr_of(&lines, "g1"));
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
                let earlier = seen.insert((m.queue, m.offset), m.value.clone());
                assert!(earlier.is_none_or(|v| v == m.value), "{}/{} was received with two values", m.queue, m.offset);
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
        let seq: u64 = String::from_utf8_lossy(&m.value).trim_start_matches("p-").parse().unwrap();
        if let Some(prev) = last.insert(m.queue, seq) {
            assert!(prev < seq, "queue {}: p-{prev} before p-{seq}", m.queue);
        }
    }
}

/// Three nodes of group g1 on 127.0.0.`first_ip`.., each of its own
/// address; the topic made and every node in sync. Returns them and the
/// bootstrap list.
fn start_group(dir: &std::path::Path, etcd: &Etcd, first_ip: usize) -> (Vec<Broker>, String) {
    let nodes: Vec<Broker> = ["a", "b", "c"]
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let ip = format!("127.0.0.{}", first_ip + i);
            let listen = format!("{ip}:{}", free_port_pair(&ip));
            let args = ["--cluster", &etcd.url, "--group", "g1", "--node", name, "--lease-ms", "1000"];
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
    let mut values: Vec<&[u8]> = got.iter().map(|m| m.value.as_slice()).collect();
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
    let (mut nodes, bootstrap) = start_group(dir.path(), &etcd, 61);
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
    let stored: HashMap<(u32, u64), &[u8]> = got.iter().map(|m| ((m.queue, m.offset), m.value.as_slice())).collect();
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

/// `ringmq cluster transfer-leader` to `to`; the line it prints.
fn transfer_leader(etcd: &Etcd, to: &str) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ringmq"))
        .args(["cluster", "transfer-leader", "--cluster", &etcd.url, "--group", "g1", "--to", to])
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
    let (mut nodes, bootstrap) = start_group(dir.path(), &etcd, 81);
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
            assert!(said.starts_with(&format!("group=g1 leader={} epoch=", names[to])), "{said}");
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
