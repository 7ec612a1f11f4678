//! kill -9 under load: every message acknowledged as durable before the crash
//! is there after the restart, in per-queue order, with no duplicates.

mod common;

use common::Broker;
use ringmq::client::{ConsumedMessage, Consumer, Message, Producer, ProducerConfig, StartFrom};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[test]
fn every_durably_acked_message_survives_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let mut broker = Broker::start(dir.path(), &[]);
    broker.client().create_topic("crash", 8, 0).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let producers = load(&broker, "crash", 0, 4, &stop);
    std::thread::sleep(Duration::from_millis(1500));
    broker.kill9();
    stop.store(true, Ordering::Relaxed);
    let acked: Vec<_> = producers.into_iter().flat_map(|p| p.join().unwrap()).collect();
    assert!(acked.len() > 100, "the load ran: {} acked", acked.len());

    broker.restart();
    let got = check_everything(&broker, "crash", 8, &acked);
    common::assert_per_sender_order(&got);
    let unacked = got.len() - acked.len();
    eprintln!(
        "{} acked, {} stored, {unacked} durable but unacknowledged (in flight at the kill), 0 retried",
        acked.len(),
        got.len()
    );
    assert!(unacked <= 4, "at most one in-flight message per producer");
}

/// One cycle's load on `topic`: `producers` threads sending sync until
/// `stop` or their first error (nothing is retried across a crash, so no
/// duplicate is expected); values "c{cycle}p{t}-{i}", keys of varied length.
fn load(
    broker: &Broker,
    topic: &'static str,
    cycle: u32,
    producers: u32,
    stop: &Arc<AtomicBool>,
) -> Vec<std::thread::JoinHandle<Acked>> {
    (0..producers)
        .map(|t| {
            let (client, stop) = (broker.client(), stop.clone());
            std::thread::spawn(move || {
                let p = Producer::new(client, ProducerConfig::default());
                let mut acked = Vec::new();
                for i in 0.. {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    let value = format!("c{cycle}p{t}-{i}");
                    let key = "k".repeat((i * 37 + t as usize * 101) % 1500);
                    match p.send(topic, &Message::new(value.clone()).with_key(key)) {
                        Ok(r) => acked.push((value, r)),
                        Err(_) => break,
                    }
                }
                acked
            })
        })
        .collect()
}

type Acked = Vec<(String, ringmq::client::SendResult)>;

/// Reads every queue of `topic` from offset 0 to its end; asserts there is
/// no gap and no message twice, and that every acked one is where its ack said.
fn check_everything(broker: &Broker, topic: &str, queues: u32, acked: &Acked) -> Vec<ConsumedMessage> {
    let client = broker.client();
    let mut consumer = Consumer::new(client.clone(), None);
    consumer.assign_all(topic, StartFrom::Earliest).unwrap();
    let total: u64 = (0..queues).map(|q| client.list_offsets(topic, q).unwrap().1).sum();
    let got = common::consume(&mut consumer, total as usize, Duration::from_secs(60));
    assert_eq!(got.len() as u64, total, "every offset below each queue's end is readable: no gaps");
    let values: std::collections::HashSet<&[u8]> = got.iter().map(|m| m.value_or_empty()).collect();
    assert_eq!(values.len(), got.len(), "no message is stored twice");
    common::assert_acked_present(&got, acked);
    got
}

#[test]
fn kill_9_at_random_moments_over_many_cycles_loses_nothing() {
    // RINGMQ_KILL9_CYCLES raises the count (the long run: 30).
    let cycles: u32 = std::env::var("RINGMQ_KILL9_CYCLES").ok().and_then(|c| c.parse().ok()).unwrap_or(6);
    let mut seed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64 | 1;
    eprintln!("kill -9 loop: {cycles} cycles, seed {seed}");
    let dir = tempfile::tempdir().unwrap();
    let mut broker = Broker::start(dir.path(), &[]);
    broker.client().create_topic("loop", 6, 0).unwrap();
    let mut acked: Acked = Vec::new();
    for cycle in 0..cycles {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let stop = Arc::new(AtomicBool::new(false));
        let producers = load(&broker, "loop", cycle, 3, &stop);
        // Somewhere in 0.1-1.3 s of load: mid-round, mid-rollover, mid-checkpoint.
        std::thread::sleep(Duration::from_millis(100 + seed % 1200));
        broker.kill9();
        stop.store(true, Ordering::Relaxed);
        let before = acked.len();
        acked.extend(producers.into_iter().flat_map(|p| p.join().unwrap()));
        broker.restart();
        let stored = check_everything(&broker, "loop", 6, &acked).len();
        eprintln!(
            "cycle {cycle}: {} acked this cycle, {} acked in all, {stored} stored, 0 lost",
            acked.len() - before,
            acked.len()
        );
    }
    assert!(acked.len() > 100 * cycles as usize / 2, "the load ran: {} acked", acked.len());
}
