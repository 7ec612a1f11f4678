//! Delayed messages against a real broker whose clock the tests drive
//! (`serve --manual-clock`): levels and arbitrary times arrive in due order,
//! never before due; pending ones survive kill -9, and what fell due while
//! the broker was down arrives right after it starts.

mod common;

use common::Broker;
use ringmq::client::{ClientError, Consumer, Delay, Message, Producer, ProducerConfig, StartFrom};
use ringmq::duration::unix_ms;
use ringmq::protocol::ErrorCode;
use std::time::Duration;

fn reader(client: &std::sync::Arc<ringmq::client::Client>) -> Consumer {
    let mut c = Consumer::new(client.clone(), None);
    c.assign_all("later", StartFrom::Earliest).unwrap();
    c
}

/// Values of everything that arrives within `real` wall time.
fn arrivals(c: &mut Consumer, real: Duration) -> Vec<String> {
    common::poll_during(c, real).into_iter().map(|m| String::from_utf8(m.value.unwrap_or_default()).unwrap()).collect()
}

#[test]
fn levels_and_times_arrive_in_due_order_and_never_before_due() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(dir.path(), &["--manual-clock"]);
    let client = broker.client();
    client.create_topic("later", 2, 0).unwrap();
    let producer = Producer::new(client.clone(), ProducerConfig::default());
    let send = |name: &str, delay| producer.send_delayed("later", &Message::new(name.to_string()), delay).unwrap();
    let level3 = send("level-3 (10s)", Delay::Level(3));
    let sent_at = level3.due_ms - 10_000;
    send("level-1 (1s)", Delay::Level(1));
    send("at 2.5s", Delay::At(sent_at + 2_500));
    send("level-2 (5s)", Delay::Level(2));
    send("at 90s", Delay::At(sent_at + 90_000));
    send("at 2h", Delay::At(sent_at + 7_200_000));
    let mut c = reader(&client);
    // (advance to this many ms after sending, what must have arrived by then)
    let steps: [(u64, &[&str]); 11] = [
        (0, &[]),
        (999, &[]),
        (1_000, &["level-1 (1s)"]),
        (2_499, &[]),
        (2_500, &["at 2.5s"]),
        (5_000, &["level-2 (5s)"]),
        (9_999, &[]),
        (10_000, &["level-3 (10s)"]),
        (89_999, &[]),
        (90_000, &["at 90s"]),
        (7_200_000, &["at 2h"]),
    ];
    let mut at = 0;
    for (to, expected) in steps {
        client.advance_clock(Duration::from_millis(to - at)).unwrap();
        at = to;
        let wait = if expected.is_empty() { 300 } else { 2_000 };
        let got = arrivals(&mut c, Duration::from_millis(wait));
        assert_eq!(got, expected, "{to} ms after sending");
    }
}

#[test]
fn a_delayed_message_keeps_its_id_and_bad_delays_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(dir.path(), &["--manual-clock"]);
    let client = broker.client();
    client.create_topic("later", 1, 0).unwrap();
    let producer = Producer::new(client.clone(), ProducerConfig::default());
    let m = Message::new("keyed").with_key("k").with_tag("T").with_header("h", "v");
    let sent = producer.send_delayed("later", &m, Delay::After(Duration::from_secs(30))).unwrap();
    client.advance_clock(Duration::from_secs(31)).unwrap();
    let got = common::consume(&mut reader(&client), 1, Duration::from_secs(10));
    assert_eq!(got.len(), 1);
    let g = &got[0];
    assert_eq!((g.message_id, g.key.as_deref(), g.tag.as_str()), (sent.message_id, Some(&b"k"[..]), "T"));
    assert_eq!(g.headers, vec![("h".to_string(), Some(b"v".to_vec()))], "the schedule's own headers are gone");

    let code = |r: Result<ringmq::client::DelayedResult, ClientError>| match r {
        Err(ClientError::Broker { code, message }) => (code, message),
        other => panic!("expected a broker error, got {other:?}"),
    };
    let (c, m) =
        code(producer.send_delayed("later", &Message::new("x"), Delay::After(Duration::from_secs(8 * 86_400))));
    assert_eq!(c, ErrorCode::InvalidRequest);
    assert!(m.contains("delay_max"), "{m}");
    let (c, _) = code(producer.send_delayed("later", &Message::new("x"), Delay::Level(19)));
    assert_eq!(c, ErrorCode::InvalidRequest);
    assert!(matches!(
        producer.send_delayed("nowhere", &Message::new("x"), Delay::Level(1)),
        Err(ClientError::UnknownTopic(_))
    ));
}

#[test]
fn pending_delays_survive_kill_9_and_what_fell_due_meanwhile_arrives_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let mut broker = Broker::start(dir.path(), &["--manual-clock"]);
    let client = broker.client();
    client.create_topic("later", 2, 0).unwrap();
    let producer = Producer::new(client.clone(), ProducerConfig::default());
    // The restarted broker's manual clock starts at the system time.
    producer.send_delayed("later", &Message::new("soon"), Delay::At(unix_ms() + 1_000)).unwrap();
    producer.send_delayed("later", &Message::new("in an hour"), Delay::At(unix_ms() + 3_600_000)).unwrap();
    drop(producer);
    broker.kill9();
    std::thread::sleep(Duration::from_millis(1_200));
    broker.restart();
    let client = broker.client();
    let mut c = reader(&client);
    assert_eq!(arrivals(&mut c, Duration::from_millis(1_500)), vec!["soon"], "due while down: delivered at start");
    client.advance_clock(Duration::from_secs(3_600)).unwrap();
    assert_eq!(arrivals(&mut c, Duration::from_millis(1_500)), vec!["in an hour"]);
    // Delivered ones are not delivered again after another restart.
    broker.kill9();
    broker.restart();
    let client = broker.client();
    client.advance_clock(Duration::from_secs(2 * 3_600)).unwrap();
    let mut c = reader(&client);
    let all = arrivals(&mut c, Duration::from_millis(1_500));
    assert_eq!(all.len(), 2, "each delivered once: {all:?}");
}
