//! Transactional messages against a real broker whose clock the tests drive
//! (`serve --manual-clock`): commit, rollback, check-back answering commit
//! and rollback, no answer until the check limit, and crashes of the broker
//! and of the producer; consumers only ever see committed messages, once.

mod common;

use common::Broker;
use ringmq::client::{
    Client, ConsumedMessage, Consumer, Message, ProducerConfig, StartFrom, TransactionProducer, TxState,
};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A checker answering by message value, counting its calls.
fn checker(calls: Arc<Mutex<HashMap<String, u32>>>) -> ringmq::client::CheckFn {
    Arc::new(move |m: &ConsumedMessage| {
        let v = String::from_utf8_lossy(m.value_or_empty()).into_owned();
        *calls.lock().unwrap().entry(v.clone()).or_default() += 1;
        match v.as_str() {
            v if v.starts_with("check-commit") => TxState::Commit,
            v if v.starts_with("check-rollback") => TxState::Rollback,
            _ => TxState::Unknown,
        }
    })
}

fn visible(client: &Arc<Client>) -> Vec<String> {
    let mut c = Consumer::new(client.clone(), None);
    c.assign_all("pay", StartFrom::Earliest).unwrap();
    let mut got: Vec<String> = common::poll_during(&mut c, Duration::from_millis(600))
        .into_iter()
        .map(|m| String::from_utf8(m.value.unwrap_or_default()).unwrap())
        .collect();
    got.sort();
    got
}

/// Waits (real time) until `cond` holds.
fn until(what: &str, cond: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn calls_of(calls: &Mutex<HashMap<String, u32>>, value: &str) -> u32 {
    calls.lock().unwrap().get(value).copied().unwrap_or(0)
}

#[test]
fn local_answers_and_check_backs_decide_and_unanswered_ones_roll_back_at_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(dir.path(), &["--manual-clock"]);
    let client = broker.client();
    client.create_topic("pay", 2, 0).unwrap();
    let calls = Arc::new(Mutex::new(HashMap::new()));
    let tp = TransactionProducer::start(client.clone(), "payments", ProducerConfig::default(), checker(calls.clone()));
    let send = |v: &str, state| tp.send_in_transaction("pay", &Message::new(v.to_string()), |_| state).unwrap();
    send("local-commit", TxState::Commit);
    send("local-rollback", TxState::Rollback);
    send("check-commit", TxState::Unknown);
    send("check-rollback", TxState::Unknown);
    send("never answered", TxState::Unknown);
    assert_eq!(visible(&client), vec!["local-commit"], "half messages are invisible until committed");

    client.advance_clock(Duration::from_secs(6)).unwrap(); // the transaction timeout
    until("the first checks", || calls_of(&calls, "never answered") == 1 && calls_of(&calls, "check-rollback") == 1);
    until("the check-back commit", || visible(&client) == vec!["check-commit", "local-commit"]);
    for n in 2..=15 {
        client.advance_clock(Duration::from_secs(60)).unwrap(); // the check interval
        until("another check", || calls_of(&calls, "never answered") == n);
    }
    client.advance_clock(Duration::from_secs(60)).unwrap();
    std::thread::sleep(Duration::from_millis(400));
    assert_eq!(calls_of(&calls, "never answered"), 15, "15 checks, then the broker rolls back");
    assert_eq!(calls_of(&calls, "check-commit"), 1, "a decided transaction is not checked again");
    client.advance_clock(Duration::from_secs(600)).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(calls_of(&calls, "never answered"), 15);
    assert_eq!(visible(&client), vec!["check-commit", "local-commit"]);
}

#[test]
fn crashes_of_the_broker_and_of_the_producer_still_end_in_one_outcome() {
    let dir = tempfile::tempdir().unwrap();
    let mut broker = Broker::start(dir.path(), &["--manual-clock"]);
    let client = broker.client();
    client.create_topic("pay", 2, 0).unwrap();
    let calls = Arc::new(Mutex::new(HashMap::new()));
    let quiet: ringmq::client::CheckFn = Arc::new(|_| TxState::Unknown);
    {
        let tp = TransactionProducer::start(client.clone(), "payments", ProducerConfig::default(), quiet.clone());
        tp.send_in_transaction("pay", &Message::new("committed before crash"), |_| TxState::Commit).unwrap();
        // Both of these producers "die" before they end their transactions.
        tp.send_half_only("pay", &Message::new("check-commit after broker crash")).unwrap();
        tp.send_half_only("pay", &Message::new("check-rollback after broker crash")).unwrap();
    }
    broker.kill9();
    broker.restart();
    let client = broker.client();
    assert_eq!(visible(&client), vec!["committed before crash"], "exactly once after the crash");
    // Another producer of the group answers the checks.
    let tp = TransactionProducer::start(client.clone(), "payments", ProducerConfig::default(), checker(calls.clone()));
    client.advance_clock(Duration::from_secs(6)).unwrap();
    until("the checks after the restart", || calls_of(&calls, "check-rollback after broker crash") == 1);
    until("the check-back commit", || visible(&client).len() == 2);
    assert_eq!(visible(&client), vec!["check-commit after broker crash", "committed before crash"]);
    // Outcomes survive another crash; nothing is checked or delivered again.
    drop(tp);
    broker.kill9();
    broker.restart();
    let client = broker.client();
    let _tp = TransactionProducer::start(client.clone(), "payments", ProducerConfig::default(), checker(calls.clone()));
    client.advance_clock(Duration::from_secs(3600)).unwrap();
    std::thread::sleep(Duration::from_millis(400));
    assert_eq!(visible(&client), vec!["check-commit after broker crash", "committed before crash"]);
    assert_eq!(calls_of(&calls, "check-commit after broker crash"), 1);
}
