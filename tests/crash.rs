//! kill -9 under load: every message acknowledged as durable before the crash
//! is there after the restart, in per-queue order, with no duplicates.

mod common;

use common::Broker;
use ringmq::client::{Consumer, Message, Producer, ProducerConfig, StartFrom};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[test]
fn every_durably_acked_message_survives_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let mut broker = Broker::start(dir.path(), &[]);
    broker.client().create_topic("crash", 8, 0).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let producers: Vec<_> = (0..4)
        .map(|t| {
            let (client, stop) = (broker.client(), stop.clone());
            std::thread::spawn(move || {
                let p = Producer::new(client, ProducerConfig::default());
                let mut acked = Vec::new();
                for i in 0.. {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    let value = format!("p{t}-{i}");
                    // A producer stops at its first error: nothing is retried
                    // across the crash, so no duplicate is expected.
                    match p.send("crash", &Message::new(value.clone())) {
                        Ok(r) => acked.push((value, r)),
                        Err(_) => break,
                    }
                }
                acked
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(1500));
    broker.kill9();
    stop.store(true, Ordering::Relaxed);
    let acked: Vec<_> = producers.into_iter().flat_map(|p| p.join().unwrap()).collect();
    assert!(acked.len() > 100, "the load ran: {} acked", acked.len());

    broker.restart();
    let client = broker.client();
    let mut consumer = Consumer::new(client.clone(), None);
    consumer.assign_all("crash", StartFrom::Earliest).unwrap();
    let total: u64 = (0..8).map(|q| client.list_offsets("crash", q).unwrap().1).sum();
    let got = common::consume(&mut consumer, total as usize, Duration::from_secs(60));
    assert_eq!(got.len() as u64, total);
    common::assert_acked_present(&got, &acked);
    common::assert_per_sender_order(&got);
    let unacked = got.len() - acked.len();
    eprintln!(
        "{} acked, {} stored, {unacked} durable but unacknowledged (in flight at the kill), 0 retried",
        acked.len(),
        got.len()
    );
    assert!(unacked <= 4, "at most one in-flight message per producer");
}

/// One cycle's load: `producers` threads sending sync until `stop` or an
/// error; each message "c{cycle}-p{t}-{i}-" padded to a length of its own.
fn load(broker: &Broker, cycle: u32, producers: u32, stop: &Arc<AtomicBool>) -> Vec<std::thread::JoinHandle<Acked>> {
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
                    let head = format!("c{cycle}-p{t}-{i}-");
                    let value = format!("{head}{}", "v".repeat((i * 37 + t as usize * 101) % 1500));
                    match p.send("loop", &Message::new(value.clone())) {
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

/// Reads every queue of "loop" from offset 0 to its end; asserts there is
/// no gap and no message twice, and that every acked one is where its ack said.
fn check_everything(broker: &Broker, acked: &Acked, queues: u32) -> usize {
    let client = broker.client();
    let mut consumer = Consumer::new(client.clone(), None);
    consumer.assign_all("loop", StartFrom::Earliest).unwrap();
    let total: u64 = (0..queues).map(|q| client.list_offsets("loop", q).unwrap().1).sum();
    let got = common::consume(&mut consumer, total as usize, Duration::from_secs(60));
    assert_eq!(got.len() as u64, total, "every offset below each queue's end is readable: no gaps");
    let values: std::collections::HashSet<&[u8]> = got.iter().map(|m| m.value.as_slice()).collect();
    assert_eq!(values.len(), got.len(), "no message is stored twice");
    common::assert_acked_present(&got, acked);
    got.len()
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
        let producers = load(&broker, cycle, 3, &stop);
        // Somewhere in 0.1-1.3 s of load: mid-round, mid-rollover, mid-checkpoint.
        std::thread::sleep(Duration::from_millis(100 + seed % 1200));
        broker.kill9();
        stop.store(true, Ordering::Relaxed);
        let before = acked.len();
        acked.extend(producers.into_iter().flat_map(|p| p.join().unwrap()));
        broker.restart();
        let stored = check_everything(&broker, &acked, 6);
        eprintln!(
            "cycle {cycle}: {} acked this cycle, {} acked in all, {stored} stored, 0 lost",
            acked.len() - before,
            acked.len()
        );
    }
    assert!(acked.len() > 100 * cycles as usize / 2, "the load ran: {} acked", acked.len());
}
