//! Retries and dead letters against a real broker whose clock the tests
//! drive (`serve --manual-clock`): no test sleeps through a back-off delay.

mod common;

use common::Broker;
use ringmq::client::{
    Client, ConsumeStatus, ConsumedMessage, Consumer, GroupConfig, Message, Producer, ProducerConfig, PushConfig,
    PushConsumer, StartFrom, StartNew,
};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn manual_broker(dir: &std::path::Path) -> Broker {
    Broker::start(dir, &["--manual-clock"])
}

fn reader(client: &Arc<Client>, topic: &str) -> Consumer {
    let mut c = Consumer::new(client.clone(), None);
    c.assign_all(topic, StartFrom::Earliest).unwrap();
    c
}

/// Polls for up to `real` wall time.
fn poll_for(c: &mut Consumer, real: Duration) -> Vec<ConsumedMessage> {
    let deadline = Instant::now() + real;
    let mut got = Vec::new();
    while Instant::now() < deadline && got.is_empty() {
        got.extend(c.poll(Duration::from_millis(50)).unwrap());
    }
    got
}

#[test]
fn sent_back_messages_return_on_the_growing_schedule_then_go_to_the_dead_letter_topic() {
    let dir = tempfile::tempdir().unwrap();
    let broker = manual_broker(dir.path());
    let client = broker.client();
    client.create_topic("pay", 2, 0).unwrap();
    let producer = Producer::new(client.clone(), ProducerConfig::default());
    let sent = producer.send("pay", &Message::new("poison").with_key("k").with_tag("T")).unwrap();

    // RocketMQ's schedule: retry n waits level n+2: 10s, 30s, 1m.
    let (mut topic, mut queue, mut offset) = ("pay".to_string(), sent.queue, sent.offset);
    for (n, delay) in [(1u32, 10u64), (2, 30), (3, 60)] {
        let back = client.send_back("billing", &topic, queue, offset, 3).unwrap();
        assert!(!back.dead_lettered);
        assert_eq!(back.reconsume_times, n);
        let mut retries = reader(&client, "%RETRY%billing");
        let earlier = common::consume(&mut retries, n as usize - 1, Duration::from_secs(10));
        assert_eq!(earlier.len(), n as usize - 1, "the earlier retries");
        client.advance_clock(Duration::from_secs(delay - 1)).unwrap();
        let early = poll_for(&mut retries, Duration::from_millis(400));
        assert!(early.is_empty(), "retry {n} arrived before its {delay}s delay: {early:?}");
        client.advance_clock(Duration::from_secs(1)).unwrap();
        let got = common::consume(&mut retries, 1, Duration::from_secs(10));
        assert_eq!(got.len(), 1, "retry {n} arrives once due");
        let m = &got[0];
        assert_eq!((m.message_id, m.value_or_empty(), m.tag.as_str()), (sent.message_id, &b"poison"[..], "T"));
        assert_eq!((m.reconsume_times(), m.origin_topic().as_str()), (n, "pay"));
        (topic, queue, offset) = (m.topic.clone(), m.queue, m.offset);
    }
    let back = client.send_back("billing", &topic, queue, offset, 3).unwrap();
    assert!(back.dead_lettered, "the fourth send-back is past max_retries 3");
    let dead = common::consume(&mut reader(&client, "%DLQ%billing"), 1, Duration::from_secs(10));
    assert_eq!(dead.len(), 1);
    assert_eq!((dead[0].message_id, dead[0].reconsume_times()), (sent.message_id, 4));
    assert_eq!(dead[0].header("ringmq.origin.offset"), Some(&sent.offset.to_le_bytes()[..]));
}

#[test]
fn pending_retries_survive_a_kill_and_arrive_when_due() {
    let dir = tempfile::tempdir().unwrap();
    let mut broker = manual_broker(dir.path());
    let client = broker.client();
    client.create_topic("pay", 1, 0).unwrap();
    let producer = Producer::new(client.clone(), ProducerConfig::default());
    let sent = producer.send("pay", &Message::new("later")).unwrap();
    client.send_back("billing", "pay", 0, sent.offset, 0).unwrap();
    drop(producer);
    broker.kill9();
    broker.restart();
    // The restarted broker's clock starts at the system time, past nothing:
    // the 10 s delay is still ahead until the clock is moved.
    let client = broker.client();
    let mut retries = reader(&client, "%RETRY%billing");
    assert!(poll_for(&mut retries, Duration::from_millis(300)).is_empty());
    client.advance_clock(Duration::from_secs(10)).unwrap();
    let got = common::consume(&mut retries, 1, Duration::from_secs(10));
    assert_eq!(got.len(), 1);
    assert_eq!((got[0].message_id, got[0].reconsume_times()), (sent.message_id, 1));
}

#[test]
fn a_push_consumer_retries_a_failing_message_then_dead_letters_it_and_processes_the_rest_once() {
    let dir = tempfile::tempdir().unwrap();
    let broker = manual_broker(dir.path());
    let client = broker.client();
    client.create_topic("pay", 2, 0).unwrap();
    let producer = Producer::new(client.clone(), ProducerConfig::default());
    let poison = producer.send("pay", &Message::new("poison")).unwrap();
    for i in 0..50 {
        producer.send("pay", &Message::new(format!("ok-{i}"))).unwrap();
    }
    let seen = Arc::new(Mutex::new(Vec::new()));
    let seen2 = seen.clone();
    let listener = Arc::new(move |m: &ConsumedMessage| {
        seen2.lock().unwrap().push((
            String::from_utf8_lossy(m.value_or_empty()).into_owned(),
            m.reconsume_times(),
            m.message_id,
        ));
        if m.value_or_empty() == b"poison" {
            ConsumeStatus::ReconsumeLater
        } else {
            ConsumeStatus::Success
        }
    });
    let group = GroupConfig { start_new: StartNew::Earliest, ..GroupConfig::new("billing", &["pay"]) };
    let push =
        PushConsumer::start(client.clone(), PushConfig { max_retries: 3, ..PushConfig::new(group) }, listener).unwrap();
    let mut dlq = None;
    let deadline = Instant::now() + Duration::from_secs(60);
    while dlq.is_none() && Instant::now() < deadline {
        // Manual time moves in 5 s steps while the consumer works in real time.
        client.advance_clock(Duration::from_secs(5)).unwrap();
        std::thread::sleep(Duration::from_millis(50));
        if client.topic("%DLQ%billing").is_ok() {
            dlq = common::consume(&mut reader(&client, "%DLQ%billing"), 1, Duration::from_millis(200)).pop();
        }
    }
    push.shutdown();
    let dead = dlq.expect("the poison message reaches the dead-letter topic");
    assert_eq!((dead.message_id, dead.reconsume_times()), (poison.message_id, 4));
    let seen = seen.lock().unwrap();
    let tries: Vec<u32> = seen.iter().filter(|(v, _, _)| v == "poison").map(|(_, n, _)| *n).collect();
    assert_eq!(tries, vec![0, 1, 2, 3], "the first delivery and three retries");
    assert!(seen.iter().filter(|(v, _, _)| v == "poison").all(|(_, _, id)| *id == poison.message_id));
    let mut ok: Vec<&str> = seen.iter().filter(|(v, _, _)| v.starts_with("ok-")).map(|(v, _, _)| v.as_str()).collect();
    ok.sort();
    ok.dedup();
    assert_eq!(ok.len(), 50, "every other message is processed");
}
