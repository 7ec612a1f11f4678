//! 100,000 messages over 8 queues on 2 shards, with every send mode; all of
//! them consumed with their content, in per-queue order.

mod common;

use common::Broker;
use ringmq::client::{Consumer, Message, Producer, ProducerConfig, SendResult, StartFrom};
use std::time::{Duration, Instant};

const SYNC_THREADS: usize = 4;
const SYNC_EACH: usize = 5_000;
const ASYNC: usize = 70_000;
const ONEWAY: usize = 10_000;

#[test]
fn a_hundred_thousand_messages_in_every_send_mode_are_consumed_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(dir.path(), &[]);
    broker.client().create_topic("volume", 8, 0).unwrap();

    let sync_threads: Vec<_> = (0..SYNC_THREADS)
        .map(|t| {
            let client = broker.client();
            std::thread::spawn(move || {
                let p = Producer::new(client, ProducerConfig::default());
                (0..SYNC_EACH)
                    .map(|i| {
                        (format!("sync-{t}-{i}"), p.send("volume", &Message::new(format!("sync-{t}-{i}"))).unwrap())
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let async_producer = Producer::new(broker.client(), ProducerConfig::default());
    let futures: Vec<_> = (0..ASYNC)
        .map(|i| (format!("async-0-{i}"), async_producer.send_async("volume", Message::new(format!("async-0-{i}")))))
        .collect();
    let oneway = Producer::new(broker.client(), ProducerConfig::default());
    for i in 0..ONEWAY {
        oneway.send_oneway("volume", &Message::new(format!("oneway-0-{i}"))).unwrap();
    }
    let mut acked: Vec<(String, SendResult)> = futures.into_iter().map(|(v, f)| (v, f.wait().unwrap())).collect();
    for t in sync_threads {
        acked.extend(t.join().unwrap());
    }
    assert_eq!(acked.len(), SYNC_THREADS * SYNC_EACH + ASYNC);

    let mut consumer = Consumer::new(broker.client(), None);
    consumer.assign_all("volume", StartFrom::Earliest).unwrap();
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut quiet = 0;
    while Instant::now() < deadline && quiet < 3 {
        let batch = consumer.poll(Duration::from_millis(500)).unwrap();
        quiet = if batch.is_empty() { quiet + 1 } else { 0 };
        got.extend(batch);
    }
    common::assert_acked_present(&got, &acked);
    let oneway_got = got.iter().filter(|m| m.value_or_empty().starts_with(b"oneway")).count();
    assert!(oneway_got <= ONEWAY, "one-way messages: {oneway_got} received of {ONEWAY} sent");
    assert_eq!(got.len(), acked.len() + oneway_got);

    // Per queue, each sender's messages appear in the order it sent them.
    let queues = common::assert_per_sender_order(&got);
    assert_eq!(queues.len(), 8, "every queue was used");
}
