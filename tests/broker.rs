//! The broker process: restarts, wrong-shard requests, and bad input that
//! gets a typed error while the broker keeps serving everyone else.

mod common;

use common::{batch, Broker, Raw};
use ringmq::client::{Consumer, Message, Producer, ProducerConfig, StartFrom};
use ringmq::protocol::messages::{Fetch, Produce, QueueRef, ACKS_DURABLE};
use ringmq::protocol::{ApiKey, ErrorCode, Writer};
use ringmq::shards::batch::BatchBuilder;
use ringmq::shards::Record;
use std::time::Duration;

fn produce_body(topic: &str, queue: u32, batch: &[u8]) -> Vec<u8> {
    let mut w = Writer::default();
    Produce { queue: QueueRef { topic: topic.into(), queue }, acks: ACKS_DURABLE, batches: vec![batch] }.encode(&mut w);
    w.buf
}

fn fetch_body(topic: &str, queue: u32, offset: u64) -> Vec<u8> {
    let mut w = Writer::default();
    Fetch {
        queue: QueueRef { topic: topic.into(), queue },
        offset,
        max_bytes: 1 << 20,
        max_wait_ms: 0,
        tags: String::new(),
    }
    .encode(&mut w);
    w.buf
}

/// Another client still gets served.
fn still_serves(broker: &Broker) {
    let topics = broker.client().list_topics().expect("the broker still serves other clients");
    assert!(topics.contains(&"t".to_string()));
}

#[test]
fn after_a_clean_restart_every_acked_message_is_readable_and_offsets_continue() {
    let dir = tempfile::tempdir().unwrap();
    let mut broker = Broker::start(dir.path(), &[]);
    let client = broker.client();
    client.create_topic("t", 4, 0).unwrap();
    let producer = Producer::new(client, ProducerConfig::default());
    let acked: Vec<_> = (0..40).map(|i| producer.send("t", &Message::new(format!("m{i}"))).unwrap()).collect();
    drop(producer);
    broker.stop();
    broker.restart();
    let client = broker.client();
    let mut consumer = Consumer::new(client.clone(), None);
    consumer.assign_all("t", StartFrom::Earliest).unwrap();
    let mut got = Vec::new();
    while got.len() < 40 {
        let batch = consumer.poll(Duration::from_secs(2)).unwrap();
        assert!(!batch.is_empty(), "all 40 messages come back");
        got.extend(batch);
    }
    for a in &acked {
        assert!(got.iter().any(|m| m.message_id == a.message_id && m.queue == a.queue && m.offset == a.offset));
    }
    let producer = Producer::new(client, ProducerConfig::default());
    let next = producer.send("t", &Message::new("after restart")).unwrap();
    assert_eq!(next.offset, 10, "queue {} continues after its 10 messages", next.queue);
}

#[test]
fn a_request_sent_to_the_wrong_shard_is_served_by_forwarding() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(dir.path(), &[]);
    let client = broker.client();
    client.create_topic("t", 4, 0).unwrap();
    let topic = client.topic("t").unwrap();
    for (queue, owner) in topic.queue_shards.iter().enumerate() {
        let wrong = &broker.addrs[1 - *owner as usize];
        let mut raw = Raw::connect(wrong);
        let (_, code, m, _) =
            raw.call(ApiKey::Produce as u16, 0, 7, &produce_body("t", queue as u32, &batch(b"via the wrong shard")));
        assert_eq!(code, ErrorCode::None, "{m}");
        let (_, code, _, body) = raw.call(ApiKey::Fetch as u16, 0, 8, &fetch_body("t", queue as u32, 0));
        assert_eq!(code, ErrorCode::None);
        assert!(body.windows(19).any(|w| w == b"via the wrong shard"));
        assert_eq!(client.list_offsets("t", queue as u32).unwrap(), (0, 1), "stored once, on the owner");
    }
}

/// The offsets a produce response gives (one per batch).
fn produced(raw: &mut Raw, to_queue: u32, batch: &[u8]) -> Vec<(u64, u32)> {
    let (_, code, m, body) = raw.call(ApiKey::Produce as u16, 0, 1, &produce_body("t", to_queue, batch));
    assert_eq!(code, ErrorCode::None, "{m}");
    ringmq::protocol::messages::decode_produced(&mut ringmq::protocol::Reader::new(&body)).unwrap()
}

#[test]
fn a_produce_sent_again_is_answered_with_where_it_was_stored_and_stored_once() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(dir.path(), &[]);
    let client = broker.client();
    client.create_topic("t", 1, 0).unwrap();
    let owner = client.owner("t", 0).unwrap();
    let other = broker.addrs.iter().find(|a| **a != owner).unwrap();
    let retried = common::client_batch(9, b"answer lost");
    let first = produced(&mut Raw::connect(&owner), 0, &retried);
    assert_eq!(first, [(0, 1)]);
    // Again, on the owner and through the other shard: the same answer.
    assert_eq!(produced(&mut Raw::connect(&owner), 0, &retried), first);
    assert_eq!(produced(&mut Raw::connect(other), 0, &retried), first);
    assert_eq!(client.list_offsets("t", 0).unwrap(), (0, 1), "stored once");
    // The same id with other bytes is a new message.
    assert_eq!(produced(&mut Raw::connect(&owner), 0, &common::client_batch(9, b"new")), [(1, 1)]);

    let off = tempfile::tempdir().unwrap();
    let broker = Broker::start(off.path(), &["--idempotence-window", "0"]);
    let client = broker.client();
    client.create_topic("t", 1, 0).unwrap();
    let mut raw = Raw::connect(&client.owner("t", 0).unwrap());
    assert_eq!(produced(&mut raw, 0, &retried), [(0, 1)]);
    assert_eq!(produced(&mut raw, 0, &retried), [(1, 1)], "with the window off, a retry is stored again");
}

#[test]
fn bad_requests_get_typed_errors_and_the_connection_stays_open() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(dir.path(), &["--batch-bytes-max", "65536"]);
    broker.client().create_topic("t", 2, 0).unwrap();
    let mut raw = Raw::connect(broker.addr());
    let good = batch(b"good");
    let mut bad_crc = good.clone();
    *bad_crc.last_mut().unwrap() ^= 1;
    let huge = batch(&vec![1u8; 70_000]);
    let cases: Vec<(u16, u16, Vec<u8>, ErrorCode)> = vec![
        (99, 0, vec![], ErrorCode::UnknownApi),
        (ApiKey::Produce as u16, 7, vec![], ErrorCode::UnsupportedVersion),
        (ApiKey::Produce as u16, 0, vec![1, 2, 3], ErrorCode::Malformed),
        (ApiKey::Produce as u16, 0, produce_body("t", 0, &bad_crc), ErrorCode::CrcMismatch),
        (ApiKey::Produce as u16, 0, produce_body("t", 0, &huge), ErrorCode::BatchTooLarge),
        (ApiKey::Produce as u16, 0, produce_body("nope", 0, &good), ErrorCode::UnknownTopic),
        (ApiKey::Produce as u16, 0, produce_body("t", 9, &good), ErrorCode::UnknownQueue),
        (ApiKey::Fetch as u16, 0, fetch_body("t", 0, 5), ErrorCode::OffsetOutOfRange),
    ];
    for (i, (api, version, body, want)) in cases.into_iter().enumerate() {
        let (corr, code, message, _) = raw.call(api, version, 100 + i as u32, &body);
        assert_eq!((corr, code), (100 + i as u32, want), "case {i}: {message}");
        assert!(!message.is_empty(), "case {i} explains itself");
    }
    let mut w = Writer::default();
    ringmq::protocol::messages::CreateTopic { name: "bad name!".into(), queues: 1, flush: 0, configs: Vec::new() }
        .encode(&mut w, 0);
    assert_eq!(raw.call(ApiKey::CreateTopic as u16, 0, 1, &w.buf).1, ErrorCode::InvalidTopic);
    let mut w = Writer::default();
    ringmq::protocol::messages::CreateTopic { name: "t".into(), queues: 1, flush: 0, configs: Vec::new() }
        .encode(&mut w, 0);
    assert_eq!(raw.call(ApiKey::CreateTopic as u16, 0, 2, &w.buf).1, ErrorCode::TopicExists);
    let (_, code, _, _) = raw.call(ApiKey::Produce as u16, 0, 3, &produce_body("t", 0, &good));
    assert_eq!(code, ErrorCode::None, "the same connection still works");
    assert_eq!(broker.client().list_offsets("t", 0).unwrap(), (0, 1), "nothing bad was stored");
    still_serves(&broker);
}

#[test]
fn framing_errors_close_only_that_connection() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(dir.path(), &["--frame-bytes-max", "100000"]);
    broker.client().create_topic("t", 1, 0).unwrap();
    let mut bystander = Raw::connect(broker.addr());
    for len in [3u32, 2_000_000_000] {
        let mut raw = Raw::connect(broker.addr());
        use std::io::Write;
        raw.stream.write_all(&len.to_le_bytes()).unwrap();
        let (corr, code, message, _) = raw.read_response().expect("an error frame before closing");
        let want = if len < 8 { ErrorCode::Malformed } else { ErrorCode::FrameTooLarge };
        assert_eq!((corr, code), (0, want), "{message}");
        assert!(raw.is_closed(), "the broken connection is closed");
    }
    let (_, code, _, _) = bystander.call(ApiKey::ListTopics as u16, 0, 1, &[]);
    assert_eq!(code, ErrorCode::None, "other connections are untouched");
    still_serves(&broker);
}

#[test]
fn connections_past_the_limit_are_refused_and_the_slot_frees_on_close() {
    let dir = tempfile::tempdir().unwrap();
    // No other client connects first: its close would race with the count.
    let broker = Broker::start(dir.path(), &["--connections-max", "2"]);
    let first = Raw::connect(broker.addr());
    let _second = Raw::connect(broker.addr());
    std::thread::sleep(Duration::from_millis(100));
    let mut third = Raw::connect(broker.addr());
    let (corr, code, message, _) = third.read_response().expect("a refusal");
    assert_eq!((corr, code), (0, ErrorCode::TooManyConnections), "{message}");
    assert!(third.is_closed());
    drop(first);
    std::thread::sleep(Duration::from_millis(200));
    let mut fourth = Raw::connect(broker.addr());
    let (_, code, _, _) = fourth.call(ApiKey::ListTopics as u16, 0, 1, &[]);
    assert_eq!(code, ErrorCode::None, "a closed connection frees its slot");
}

/// Parks a fetch, then sends a produce of kind `api` with `body` (one message
/// "pipelined" for queue 0 of "t") on the same connection.
fn a_parked_fetch_does_not_hold_up(api: ApiKey, body: impl Fn() -> Vec<u8>) {
    let dir = tempfile::tempdir().unwrap();
    // One request of each kind in flight per connection.
    let broker = Broker::start(dir.path(), &["--inflight-per-connection-max", "1"]);
    broker.client().create_topic("t", 1, 0).unwrap();
    let owner = broker.client().owner("t", 0).unwrap();
    let mut raw = Raw::connect(&owner);
    use std::io::Write;
    let mut w = Writer::default();
    Fetch {
        queue: QueueRef { topic: "t".into(), queue: 0 },
        offset: 0,
        max_bytes: 1 << 20,
        max_wait_ms: 10_000,
        tags: String::new(),
    }
    .encode(&mut w);
    raw.stream.write_all(&ringmq::protocol::frame::request(ApiKey::Fetch as u16, 0, 1, &w.buf)).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let started = std::time::Instant::now();
    raw.stream.write_all(&ringmq::protocol::frame::request(api as u16, 0, 2, &body())).unwrap();
    let mut answered = std::collections::HashMap::new();
    for _ in 0..2 {
        let (corr, code, message, body) = raw.read_response().expect("a response");
        assert_eq!(code, ErrorCode::None, "{message}");
        answered.insert(corr, (started.elapsed(), body));
    }
    let (produce_after, _) = &answered[&2];
    assert!(
        *produce_after < Duration::from_secs(5),
        "the produce was not held behind the parked fetch: {produce_after:?}"
    );
    let (_, fetched) = &answered[&1];
    assert!(fetched.windows(9).any(|w| w == b"pipelined"), "the parked fetch woke with the produced message");
}

#[test]
fn a_parked_fetch_does_not_hold_up_a_produce_on_the_same_connection() {
    a_parked_fetch_does_not_hold_up(ApiKey::Produce, || produce_body("t", 0, &batch(b"pipelined")));
    a_parked_fetch_does_not_hold_up(ApiKey::ProduceMany, || {
        let (mut w, one) = (Writer::default(), batch(b"pipelined"));
        let entries = vec![(QueueRef { topic: "t".into(), queue: 0 }, one.as_slice())];
        ringmq::protocol::messages::ProduceMany { acks: ACKS_DURABLE, entries }.encode(&mut w);
        w.buf
    });
}

#[test]
fn bad_requests_to_the_group_delay_transaction_and_lookup_apis_get_typed_errors() {
    use ringmq::protocol::messages::{JoinGroup, LookupQuery, Membership, SendBack, Transactional};
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(dir.path(), &[]);
    broker.client().create_topic("t", 2, 0).unwrap();
    let q = |queue| QueueRef { topic: "t".into(), queue };
    let mut raw = Raw::connect(broker.addr());
    let mut cases: Vec<(ApiKey, Vec<u8>, ErrorCode, &str)> = Vec::new();
    let body = |f: &dyn Fn(&mut Writer)| {
        let mut w = Writer::default();
        f(&mut w);
        w.buf
    };
    let two = {
        let mut b = BatchBuilder::new(0);
        b.push(&Record { value: Some(b"a"), ..Record::default() })
            .push(&Record { value: Some(b"b"), ..Record::default() });
        b.finish()
    };
    let join = |session, rebalance| JoinGroup {
        group: "g".into(),
        member: String::new(),
        client_id: "c".into(),
        session_timeout_ms: session,
        rebalance_timeout_ms: rebalance,
        metadata: Vec::new(),
    };
    cases.push((ApiKey::JoinGroup, body(&|w| join(0, 1000).encode(w)), ErrorCode::InvalidRequest, "timeouts"));
    cases.push((
        ApiKey::JoinGroup,
        body(&|w| join(1000, 999_999_999).encode(w)),
        ErrorCode::InvalidRequest,
        "--group-wait-ms-max",
    ));
    let stranger = Membership { group: "g".into(), generation: 1, member: "nobody".into() };
    cases.push((
        ApiKey::Heartbeat,
        body(&|w| {
            stranger.encode(w);
            w.u32(0);
        }),
        ErrorCode::UnknownMember,
        "no member",
    ));
    cases.push((ApiKey::LeaveGroup, body(&|w| stranger.encode(w)), ErrorCode::UnknownMember, "no member"));
    let send_back = |group: &str, offset| SendBack {
        group: group.into(),
        queue: q(0),
        offset,
        max_retries: 0,
        delay_level: 0,
        dead_letter: false,
    };
    cases.push((
        ApiKey::SendBack,
        body(&|w| send_back("bad group!", 0).encode(w)),
        ErrorCode::InvalidRequest,
        "not a valid name",
    ));
    cases.push((ApiKey::SendBack, body(&|w| send_back("g", 5).encode(w)), ErrorCode::OffsetOutOfRange, "offset"));
    fn half(batch: &[u8], half: u64) -> Transactional<'_> {
        let queue = QueueRef { topic: "t".into(), queue: 0 };
        Transactional { queue, group: "p".into(), batch, half, commit: true }
    }
    cases.push((
        ApiKey::ProduceHalf,
        body(&|w| half(&two, 0).encode(w)),
        ErrorCode::InvalidRequest,
        "exactly one message",
    ));
    cases.push((
        ApiKey::EndTransaction,
        body(&|w| half(&[], 42).encode(w)),
        ErrorCode::InvalidRequest,
        "no transaction at half offset 42",
    ));
    cases.push((
        ApiKey::AdvanceClock,
        body(&|w| {
            w.u64(1000);
        }),
        ErrorCode::InvalidRequest,
        "not manual",
    ));
    cases.push((
        ApiKey::LookupMessages,
        body(&|w| {
            w.u8(7);
        }),
        ErrorCode::Malformed,
        "lookup kind",
    ));
    cases.push((
        ApiKey::LookupMessages,
        body(&|w| LookupQuery::Key { topic: "t".into(), key: b"k".to_vec() }.encode(w)),
        ErrorCode::None,
        "",
    ));
    for (i, (api, body, code, says)) in cases.into_iter().enumerate() {
        let (_, got, message, _) = raw.call(api as u16, 0, 500 + i as u32, &body);
        assert_eq!(got, code, "{api:?}: {message}");
        assert!(message.contains(says), "{api:?}: {message:?} should say {says:?}");
    }
    still_serves(&broker);
    assert_eq!(broker.client().list_offsets("t", 0).unwrap(), (0, 0), "nothing was stored");
}

#[test]
fn produce_many_appends_each_entry_in_order_and_fails_only_the_bad_ones() {
    use ringmq::protocol::messages::{decode_produced_many, ProduceMany};
    use ringmq::protocol::Reader;
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(dir.path(), &["--batch-bytes-max", "65536"]);
    let client = broker.client();
    client.create_topic("t", 4, 0).unwrap();
    let shards = client.topic("t").unwrap().queue_shards;
    let (good, huge) = (batch(b"good"), batch(&vec![1u8; 70_000]));
    let mut bad_crc = good.clone();
    *bad_crc.last_mut().unwrap() ^= 1;
    let queue = |topic: &str, queue: u32| QueueRef { topic: topic.into(), queue };
    // Queue 0 twice (in order), every queue once, whichever shard owns it
    // (entries of the other shard's queues are forwarded), and four bad entries.
    let mut entries = vec![(queue("t", 0), good.as_slice()), (queue("t", 0), good.as_slice())];
    entries.extend((1..4).map(|q| (queue("t", q), good.as_slice())));
    entries.extend([
        (queue("t", 1), bad_crc.as_slice()),
        (queue("t", 2), huge.as_slice()),
        (queue("nope", 0), good.as_slice()),
        (queue("t", 9), good.as_slice()),
    ]);
    let mut w = Writer::default();
    ProduceMany { acks: ACKS_DURABLE, entries }.encode(&mut w);
    let mut raw = Raw::connect(&broker.addrs[shards[0] as usize]);
    let (_, code, message, body) = raw.call(ApiKey::ProduceMany as u16, 0, 1, &w.buf);
    assert_eq!(code, ErrorCode::None, "{message}");
    let outcomes = decode_produced_many(&mut Reader::new(&body)).unwrap();
    let codes: Vec<ErrorCode> = outcomes.iter().map(|o| o.as_ref().map_or_else(|e| e.0, |_| ErrorCode::None)).collect();
    use ErrorCode::*;
    assert_eq!(codes, [None, None, None, None, None, CrcMismatch, BatchTooLarge, UnknownTopic, UnknownQueue]);
    assert_eq!(outcomes[0], Ok((0, 1)));
    assert_eq!(outcomes[1], Ok((1, 1)), "entries of one queue are appended in request order");
    assert!(outcomes[7].as_ref().unwrap_err().1.contains("create it first"), "each error explains itself");
    for q in 1..4 {
        assert_eq!(client.list_offsets("t", q).unwrap(), (0, 1), "queue {q}: only its good entry was stored");
    }
    let (_, code, _, _) = raw.call(ApiKey::ProduceMany as u16, 0, 2, &[0, 255, 255, 255, 255]);
    assert_eq!(code, ErrorCode::Malformed, "a count larger than the body is refused");
    let (_, code, _, _) = raw.call(ApiKey::ProduceMany as u16, 0, 3, &w.buf[..w.buf.len() - 3]);
    assert_eq!(code, ErrorCode::Malformed, "a truncated body is refused");
    assert_eq!(client.list_offsets("t", 0).unwrap(), (0, 2), "nothing of the refused requests was stored");
    still_serves(&broker);
}

#[test]
fn fetch_many_parks_until_any_queue_has_data_and_fails_only_the_bad_entries() {
    use ringmq::protocol::messages::{decode_fetched_many, FetchMany};
    use ringmq::protocol::Reader;
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(dir.path(), &[]);
    let client = broker.client();
    client.create_topic("t", 8, 0).unwrap();
    let shards = client.topic("t").unwrap().queue_shards;
    let here: Vec<u32> = (0..8).filter(|q| shards[*q as usize] == shards[0]).collect();
    let elsewhere = (0..8).find(|q| shards[*q as usize] != shards[0]).unwrap();
    let entry = |topic: &str, queue: u32, tags: &str| Fetch {
        queue: QueueRef { topic: topic.into(), queue },
        offset: 0,
        max_bytes: 1 << 20,
        max_wait_ms: 0,
        tags: tags.into(),
    };
    let request = |max_wait_ms: u32, entries: Vec<Fetch>| {
        let mut w = Writer::default();
        FetchMany { max_wait_ms, entries, consumer: None }.encode(&mut w);
        w.buf
    };
    let mut raw = Raw::connect(&broker.addrs[shards[0] as usize]);
    raw.call(ApiKey::Produce as u16, 0, 1, &produce_body("t", here[0], &batch(b"ready")));
    // One queue with data, one empty, and bad entries: answered at once.
    let entries = vec![
        entry("t", here[0], ""),
        entry("t", here[1], ""),
        entry("nope", 0, ""),
        entry("t", elsewhere, ""),
        entry("t", here[1], "A ||"),
    ];
    let (_, code, message, body) = raw.call(ApiKey::FetchMany as u16, 0, 2, &request(60_000, entries));
    assert_eq!(code, ErrorCode::None, "{message}");
    let outcomes = decode_fetched_many(&mut Reader::new(&body)).unwrap();
    assert!(outcomes[0].as_ref().unwrap().batches.windows(5).any(|w| w == b"ready"));
    assert_eq!(outcomes[0].as_ref().unwrap().next_offset, 1);
    assert!(outcomes[1].as_ref().unwrap().batches.is_empty());
    let codes: Vec<ErrorCode> = outcomes[2..].iter().map(|o| o.as_ref().unwrap_err().code).collect();
    assert_eq!(codes, [ErrorCode::UnknownTopic, ErrorCode::InvalidRequest, ErrorCode::InvalidRequest]);
    assert!(outcomes[3].as_ref().unwrap_err().message.contains("lives on shard"), "the wrong shard is named");
    // Two empty queues park until a produce to either wakes the poll.
    let producer_addr = broker.addrs[shards[0] as usize].clone();
    let woken_by = here[1];
    let sender = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        let mut raw = Raw::connect(&producer_addr);
        raw.call(ApiKey::Produce as u16, 0, 1, &produce_body("t", woken_by, &batch(b"wake")));
    });
    let parked = vec![Fetch { offset: 1, ..entry("t", here[0], "") }, entry("t", woken_by, "")];
    let (_, code, message, body) = raw.call(ApiKey::FetchMany as u16, 0, 3, &request(60_000, parked));
    sender.join().unwrap();
    assert_eq!(code, ErrorCode::None, "{message}");
    let outcomes = decode_fetched_many(&mut Reader::new(&body)).unwrap();
    assert!(outcomes[0].as_ref().unwrap().batches.is_empty(), "the other queue had nothing");
    assert!(outcomes[1].as_ref().unwrap().batches.windows(4).any(|w| w == b"wake"), "woken by the produce");
    let (_, code, _, _) = raw.call(ApiKey::FetchMany as u16, 0, 4, &[0, 0, 0, 0, 255, 255, 255, 255]);
    assert_eq!(code, ErrorCode::Malformed, "a count larger than the body is refused");
    still_serves(&broker);
}
