//! Message trace against a real broker (`serve --trace-topics`): one
//! message followed through send, store, deliver, commit, retry and
//! dead-letter, as `ringmq trace ID` prints it; untraced topics leave none.

mod common;

use common::Broker;
use ringmq::client::{Client, Consumer, Message, MessageId, Producer, ProducerConfig, StartFrom};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The trace's events, once it holds at least `count` (traces are written every 100 ms).
fn events_of(client: &Client, id: MessageId, count: usize) -> Vec<serde_json::Value> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let events = client.trace(id).unwrap();
        if events.len() >= count || Instant::now() > deadline {
            return events;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn names(events: &[serde_json::Value]) -> Vec<String> {
    events.iter().map(|e| e["event"].as_str().unwrap().to_string()).collect()
}

fn reader(client: &Arc<Client>, topic: &str) -> Consumer {
    let mut c = Consumer::new(client.clone(), Some("billing".into()));
    c.assign_all(topic, StartFrom::Earliest).unwrap();
    c
}

#[test]
fn one_message_is_followed_from_send_to_the_dead_letter_topic() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(dir.path(), &["--trace-topics", "pay", "--manual-clock"]);
    let client = broker.client();
    client.create_topic("pay", 2, 0).unwrap();
    client.create_topic("quiet", 2, 0).unwrap();
    let producer = Producer::new(client.clone(), ProducerConfig::default());
    let sent = producer.send("pay", &Message::new("poison").with_key("order-1")).unwrap();
    let untraced = producer.send("quiet", &Message::new("not traced")).unwrap();

    let mut orders = reader(&client, "pay");
    let got = common::consume(&mut orders, 1, Duration::from_secs(10));
    assert_eq!(got[0].message_id, sent.message_id);
    orders.commit().unwrap();
    let back = client.send_back("billing", "pay", sent.queue, sent.offset, 1).unwrap();
    assert!(!back.dead_lettered);
    client.advance_clock(Duration::from_secs(10)).unwrap();
    let mut retries = reader(&client, "%RETRY%billing");
    let retry = common::consume(&mut retries, 1, Duration::from_secs(10)).pop().expect("the retry");
    assert_eq!(retry.message_id, sent.message_id);
    let dead = client.send_back("billing", &retry.topic, retry.queue, retry.offset, 1).unwrap();
    assert!(dead.dead_lettered, "past its one retry");

    let events = events_of(&client, sent.message_id, 7);
    assert_eq!(
        names(&events),
        ["send", "store", "deliver", "commit", "retry", "deliver", "dead_letter"],
        "{events:#?}"
    );
    let (send, store, deliver, commit) = (&events[0], &events[1], &events[2], &events[3]);
    assert!(send["client"].as_str().unwrap().starts_with("127.0.0.1:"), "{send}");
    assert_eq!(
        (store["topic"].as_str(), store["queue"].as_u64(), store["offset"].as_u64()),
        (Some("pay"), Some(u64::from(sent.queue)), Some(sent.offset))
    );
    assert!(store["shard"].as_u64().is_some());
    assert_eq!((deliver["group"].as_str(), deliver["topic"].as_str()), (Some("billing"), Some("pay")));
    assert_eq!(commit["committed"].as_u64(), Some(sent.offset + 1));
    assert_eq!((events[4]["reconsume_times"].as_u64(), events[5]["topic"].as_str()), (Some(1), Some("%RETRY%billing")));
    assert_eq!(events[6]["group"].as_str(), Some("billing"));
    assert!(client.trace(untraced.message_id).unwrap().is_empty(), "tracing is off for topic quiet");

    let id = sent.message_id.to_string();
    let out =
        Command::new(env!("CARGO_BIN_EXE_ringmq")).args(["trace", &id, "--broker", broker.addr()]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    let printed: Vec<&str> = text.lines().map(|l| l.split_whitespace().nth(3).unwrap_or("")).collect();
    assert_eq!(printed, ["send", "store", "deliver", "commit", "retry", "deliver", "dead_letter"], "{text}");
    let id = untraced.message_id.to_string();
    let out =
        Command::new(env!("CARGO_BIN_EXE_ringmq")).args(["trace", &id, "--broker", broker.addr()]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("tracing is off"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
