//! Message lookup by id and by key against a real broker, through the SDK
//! and the command line, before and after a kill -9.

mod common;

use common::Broker;
use ringmq::client::{Message, Producer, ProducerConfig, SendResult};
use std::process::Command;

fn ringmq(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_ringmq")).args(args).env("RUST_LOG", "warn").output().unwrap()
}

#[test]
fn messages_are_found_by_id_and_key_and_unknown_ones_are_reported_plainly() {
    let dir = tempfile::tempdir().unwrap();
    let mut broker = Broker::start(dir.path(), &[]);
    let client = broker.client();
    client.create_topic("orders", 4, 0).unwrap();
    client.create_topic("audit", 2, 0).unwrap();
    let producer = Producer::new(client.clone(), ProducerConfig::default());
    // Batched sends: every stored batch mixes keys.
    let futures: Vec<_> = (0..600)
        .map(|i| {
            producer.send_async("orders", Message::new(format!("order-{i}")).with_key(format!("customer-{}", i % 7)))
        })
        .collect();
    let sent: Vec<SendResult> = futures.into_iter().map(|f| f.wait().unwrap()).collect();
    producer.send("audit", &Message::new("audit entry").with_key("customer-3")).unwrap();
    drop(producer);

    let check = |client: &std::sync::Arc<ringmq::client::Client>| {
        for i in [0usize, 1, 299, 599] {
            let found = client.find_by_id(sent[i].message_id).unwrap();
            assert_eq!(found.messages.len(), 1, "message {i}");
            let m = &found.messages[0];
            assert_eq!((m.topic.as_str(), m.queue, m.offset), ("orders", sent[i].queue, sent[i].offset));
            assert_eq!(m.value_or_empty(), format!("order-{i}").as_bytes());
        }
        let by_key = client.find_by_key("orders", b"customer-3").unwrap().messages;
        let mut values: Vec<String> =
            by_key.iter().map(|m| String::from_utf8(m.value_or_empty().to_vec()).unwrap()).collect();
        values.sort();
        let mut expected: Vec<String> = (0..600).filter(|i| i % 7 == 3).map(|i| format!("order-{i}")).collect();
        expected.sort();
        assert_eq!(values, expected, "exactly the orders with the key, not the audit entry");
        assert!(by_key.iter().all(|m| m.key.as_deref() == Some(b"customer-3")));
    };
    check(&client);
    broker.kill9();
    broker.restart();
    check(&broker.client());

    let b = broker.addr();
    let out = ringmq(&["message", "get", "--id", &sent[5].message_id.to_string(), "--broker", b]);
    let json = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        json.contains("\"topic\":\"orders\"") && json.contains(&format!("\"offset\":{}", sent[5].offset)),
        "{json}"
    );
    assert!(json.contains("\"timestamp_ms\":") && json.contains("\"value\":\"order-5\""), "{json}");
    let out = ringmq(&["message", "find", "--topic", "audit", "--key", "customer-3", "--broker", b]);
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 1);
    let out = ringmq(&["message", "get", "--id", "0123456789abcdef0123456789abcdef", "--broker", b]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no message with message id") && err.contains("removed by retention"), "{err}");
    let out = ringmq(&["message", "get", "--id", "xyz", "--broker", b]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("expected 32 hex digits"));
    let out = ringmq(&["message", "find", "--topic", "nowhere", "--key", "k", "--broker", b]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown topic"));
}
