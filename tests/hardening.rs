//! Bad input is refused whole: a request answered with an error stored
//! nothing, a body that does not decode is answered at once, every wait has
//! a maximum, and a data directory refuses a start that would half-work.

mod common;

use common::{batch, consume, Broker, Raw};
use ringmq::client::{Consumer, StartFrom};
use ringmq::protocol::messages::{
    Fetch, FetchMany, GroupOffset, JoinGroup, Membership, Produce, ProduceDelayed, ProduceMany, QueueRef, ACKS_DURABLE,
    ACKS_NONE, NO_OFFSET,
};
use ringmq::protocol::{ApiKey, ErrorCode, Reader, Writer};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn body(encode: impl FnOnce(&mut Writer)) -> Vec<u8> {
    let mut w = Writer::default();
    encode(&mut w);
    w.buf
}

fn trailing(mut body: Vec<u8>) -> Vec<u8> {
    body.push(0);
    body
}

fn queue(topic: &str, queue: u32) -> QueueRef {
    QueueRef { topic: topic.into(), queue }
}

fn produce(acks: u8, batches: Vec<&[u8]>) -> Vec<u8> {
    body(|w| Produce { queue: queue("t", 0), acks, batches }.encode(w))
}

fn fetch(max_wait_ms: u32) -> Fetch {
    Fetch { queue: queue("t", 0), offset: 0, max_bytes: 1 << 20, max_wait_ms, tags: String::new() }
}

fn heartbeat(wait_ms: u32) -> Vec<u8> {
    body(|w| {
        Membership { group: "g".into(), generation: 1, member: "m".into() }.encode(w);
        w.u32(wait_ms);
    })
}

fn poll_checks(wait_ms: u32) -> Vec<u8> {
    body(|w| {
        w.string("p").u32(wait_ms);
    })
}

#[test]
fn a_produce_answered_with_an_error_stored_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(dir.path(), &[]);
    let client = broker.client();
    client.create_topic("t", 1, 0).unwrap();
    let good = batch(b"good");
    let mut bad_crc = good.clone();
    *bad_crc.last_mut().unwrap() ^= 1;
    let many = body(|w| ProduceMany { acks: ACKS_DURABLE, entries: vec![(queue("t", 0), good.as_slice())] }.encode(w));
    let cases: Vec<(ApiKey, Vec<u8>, ErrorCode, &str)> = vec![
        (ApiKey::Produce, trailing(produce(ACKS_DURABLE, vec![&good])), ErrorCode::Malformed, "trailing"),
        (ApiKey::ProduceMany, trailing(many), ErrorCode::Malformed, "trailing"),
        (ApiKey::Produce, produce(ACKS_DURABLE, vec![&good, &bad_crc]), ErrorCode::CrcMismatch, "CRC"),
        (ApiKey::Produce, produce(2, vec![&good]), ErrorCode::InvalidRequest, "acks must be 0"),
        (
            ApiKey::ProduceMany,
            body(|w| ProduceMany { acks: 9, entries: vec![] }.encode(w)),
            ErrorCode::InvalidRequest,
            "acks",
        ),
    ];
    let mut raw = Raw::connect(broker.addr());
    for (i, (api, request, want, says)) in cases.into_iter().enumerate() {
        let (_, code, message, _) = raw.call(api as u16, 0, 10 + i as u32, &request);
        assert_eq!(code, want, "case {i} {api:?}: {message}");
        assert!(message.contains(says), "case {i}: {message:?} should say {says:?}");
        assert_eq!(client.list_offsets("t", 0).unwrap(), (0, 0), "case {i} {api:?} stored nothing");
    }
    let (_, code, message, _) = raw.call(ApiKey::Produce as u16, 0, 99, &produce(ACKS_DURABLE, vec![&good, &good]));
    assert_eq!(code, ErrorCode::None, "{message}");
    assert_eq!(client.list_offsets("t", 0).unwrap(), (0, 2), "a good request stores all its batches");
}

#[test]
fn a_delayed_produce_with_trailing_bytes_schedules_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(dir.path(), &["--manual-clock"]);
    let client = broker.client();
    client.create_topic("t", 1, 0).unwrap();
    let delayed = |value: &'static [u8]| {
        let one = batch(value);
        body(|w| ProduceDelayed { queue: queue("t", 0), delay_level: 1, deliver_at_ms: 0, batch: &one }.encode(w))
    };
    let mut raw = Raw::connect(broker.addr());
    let (_, code, message, _) = raw.call(ApiKey::ProduceDelayed as u16, 0, 1, &trailing(delayed(b"refused")));
    assert_eq!(code, ErrorCode::Malformed, "{message}");
    let (_, code, message, _) = raw.call(ApiKey::ProduceDelayed as u16, 0, 2, &delayed(b"accepted"));
    assert_eq!(code, ErrorCode::None, "{message}");
    client.advance_clock(Duration::from_secs(2)).unwrap();
    let mut consumer = Consumer::new(client.clone(), None);
    consumer.assign_all("t", StartFrom::Earliest).unwrap();
    let got = consume(&mut consumer, 1, Duration::from_secs(20));
    assert_eq!(got.len(), 1, "the accepted message was delivered");
    assert_eq!(
        (got[0].offset, got[0].value_or_empty()),
        (0, &b"accepted"[..]),
        "nothing of the refused one came first"
    );
    assert_eq!(client.list_offsets("t", 0).unwrap(), (0, 1));
}

#[test]
fn a_parking_request_whose_body_does_not_decode_is_answered_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(dir.path(), &[]);
    broker.client().create_topic("t", 1, 0).unwrap();
    let owner = broker.client().owner("t", 0).unwrap();
    // Each asks to park for the broker's maximum (60 s), far past the raw
    // connection's 10 s read timeout: holding any of them fails the read.
    let cases: Vec<(ApiKey, Vec<u8>)> = vec![
        (ApiKey::Fetch, body(|w| fetch(60_000).encode(w))),
        (
            ApiKey::FetchMany,
            body(|w| FetchMany { max_wait_ms: 60_000, entries: vec![fetch(0)], consumer: None }.encode(w)),
        ),
        (ApiKey::Heartbeat, heartbeat(60_000)),
        (ApiKey::PollChecks, poll_checks(60_000)),
    ];
    let mut raw = Raw::connect(&owner);
    for (i, (api, request)) in cases.into_iter().enumerate() {
        let (corr, code, message, _) = raw.call(api as u16, 0, 1 + i as u32, &trailing(request));
        assert_eq!((corr, code), (1 + i as u32, ErrorCode::Malformed), "{api:?}: {message}");
        assert!(message.contains("trailing"), "{api:?}: {message}");
    }
}

#[test]
fn a_wait_above_the_broker_maximum_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(dir.path(), &["--fetch-wait-ms-max", "1000", "--group-wait-ms-max", "2000"]);
    broker.client().create_topic("t", 1, 0).unwrap();
    let join = |session_timeout_ms, rebalance_timeout_ms| {
        body(|w| {
            let (group, member, client_id, metadata) = ("g".into(), String::new(), "c".into(), Vec::new());
            JoinGroup { group, member, client_id, session_timeout_ms, rebalance_timeout_ms, metadata }.encode(w)
        })
    };
    let cases: Vec<(ApiKey, Vec<u8>, &str)> = vec![
        (ApiKey::Fetch, body(|w| fetch(1001).encode(w)), "--fetch-wait-ms-max of 1000 ms"),
        (
            ApiKey::FetchMany,
            body(|w| FetchMany { max_wait_ms: 1001, entries: vec![], consumer: None }.encode(w)),
            "--fetch-wait-ms-max",
        ),
        (ApiKey::PollChecks, poll_checks(1001), "--fetch-wait-ms-max"),
        (ApiKey::Heartbeat, heartbeat(2001), "--group-wait-ms-max of 2000 ms"),
        (ApiKey::JoinGroup, join(2001, 1000), "session_timeout_ms 2001"),
        (ApiKey::JoinGroup, join(1000, 2001), "rebalance_timeout_ms 2001"),
    ];
    let mut raw = Raw::connect(broker.addr());
    for (i, (api, request, says)) in cases.into_iter().enumerate() {
        let (_, code, message, _) = raw.call(api as u16, 0, 1 + i as u32, &request);
        assert_eq!(code, ErrorCode::InvalidRequest, "{api:?}: {message}");
        assert!(message.contains(says), "{api:?}: {message:?} should say {says:?}");
    }
    let (_, code, message, _) = raw.call(ApiKey::Fetch as u16, 0, 50, &body(|w| fetch(1000).encode(w)));
    assert_eq!(code, ErrorCode::None, "a wait at the maximum is served: {message}");
}

#[test]
fn an_acks_zero_produce_is_never_answered_even_when_it_fails() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(dir.path(), &[]);
    broker.client().create_topic("t", 1, 0).unwrap();
    let good = batch(b"x");
    let mut raw = Raw::connect(broker.addr());
    let unknown = body(|w| Produce { queue: queue("nope", 0), acks: ACKS_NONE, batches: vec![&good] }.encode(w));
    let bad_entry =
        body(|w| ProduceMany { acks: ACKS_NONE, entries: vec![(queue("t", 7), good.as_slice())] }.encode(w));
    use std::io::Write;
    raw.stream.write_all(&ringmq::protocol::frame::request(ApiKey::Produce as u16, 0, 1, &unknown)).unwrap();
    raw.stream.write_all(&ringmq::protocol::frame::request(ApiKey::ProduceMany as u16, 0, 2, &bad_entry)).unwrap();
    let (corr, code, _, _) = raw.call(ApiKey::ListTopics as u16, 0, 3, &[]);
    assert_eq!((corr, code), (3, ErrorCode::None), "the first answer on the connection is the ListTopics'");
}

#[test]
fn a_commit_for_an_unknown_topic_or_queue_is_refused_and_stores_no_offset() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(dir.path(), &[]);
    let client = broker.client();
    client.create_topic("t", 2, 0).unwrap();
    let commit = |q: QueueRef| {
        body(|w| {
            GroupOffset { member: Membership { group: "g".into(), ..Membership::default() }, queue: q, offset: 5 }
                .encode(w)
        })
    };
    let mut raw = Raw::connect(broker.addr());
    let (_, code, message, _) = raw.call(ApiKey::CommitOffset as u16, 0, 1, &commit(queue("nope", 0)));
    assert_eq!(code, ErrorCode::UnknownTopic, "{message}");
    let (_, code, message, _) = raw.call(ApiKey::CommitOffset as u16, 0, 2, &commit(queue("t", 2)));
    assert_eq!(code, ErrorCode::UnknownQueue, "{message}");
    for (i, q) in [queue("nope", 0), queue("t", 2)].into_iter().enumerate() {
        let request = body(|w| {
            w.string("g");
            q.encode(w);
        });
        let (_, code, message, reply) = raw.call(ApiKey::FetchOffset as u16, 0, 3 + i as u32, &request);
        assert_eq!(code, ErrorCode::None, "{message}");
        assert_eq!(Reader::new(&reply).u64().unwrap(), NO_OFFSET, "no offset was stored for {q:?}");
    }
    let (_, code, message, _) = raw.call(ApiKey::CommitOffset as u16, 0, 9, &commit(queue("t", 1)));
    assert_eq!(code, ErrorCode::None, "a commit of a real queue is stored: {message}");
}

#[test]
fn metadata_of_an_unknown_topic_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(dir.path(), &[]);
    broker.client().create_topic("t", 1, 0).unwrap();
    let names = |list: &[&str]| {
        body(|w| ringmq::protocol::messages::encode_names(&list.iter().map(|s| s.to_string()).collect::<Vec<_>>(), w))
    };
    let mut raw = Raw::connect(broker.addr());
    let (_, code, message, _) = raw.call(ApiKey::Metadata as u16, 0, 1, &names(&["t", "nope"]));
    assert_eq!(code, ErrorCode::UnknownTopic, "{message}");
    assert!(message.contains("\"nope\""), "the unknown topic is named: {message}");
    let (_, code, message, reply) = raw.call(ApiKey::Metadata as u16, 0, 2, &names(&["t"]));
    assert_eq!(code, ErrorCode::None, "{message}");
    let m = ringmq::protocol::messages::MetadataResponse::decode(&mut Reader::new(&reply)).unwrap();
    assert_eq!(m.topics.len(), 1);
}

#[test]
fn correlation_id_zero_is_refused_and_closes_the_connection() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(dir.path(), &[]);
    let mut raw = Raw::connect(broker.addr());
    let (corr, code, message, _) = raw.call(ApiKey::ListTopics as u16, 0, 0, &[]);
    assert_eq!((corr, code), (0, ErrorCode::Malformed), "{message}");
    assert!(message.contains("correlation id 0 is reserved"), "{message}");
    assert!(raw.is_closed(), "like any framing error, it closes the connection");
    let (_, code, _, _) = Raw::connect(broker.addr()).call(ApiKey::ListTopics as u16, 0, 1, &[]);
    assert_eq!(code, ErrorCode::None, "other connections are served");
}

/// Runs `ringmq serve` on `dir` with `args` (on ports of the system's
/// choosing unless they name `--listen`, with 16 MiB segments unless they
/// name `--segment-mib`: the default 1 GiB would make the disk-space check
/// refuse the start on a machine with a few GiB free, before the check the
/// test is about); it must exit by itself within a minute (killed
/// otherwise). Returns (success, stderr).
fn serve_expecting_exit(dir: &std::path::Path, args: &[&str]) -> (bool, String) {
    let any_port: &[&str] = if args.contains(&"--listen") { &[] } else { &["--listen", "127.0.0.1:0"] };
    let small_segments: &[&str] = if args.contains(&"--segment-mib") { &[] } else { &["--segment-mib", "16"] };
    let mut child = Command::new(env!("CARGO_BIN_EXE_ringmq"))
        .arg("serve")
        .args(any_port)
        .args(small_segments)
        .args(["--cache-mib", "16", "--data-dir"])
        .arg(dir)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            child.kill().unwrap();
            panic!("ringmq serve did not exit by itself");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// A second broker started on ports a running one serves is refused
/// (address in use), instead of silently sharing them: clients would be
/// split between two brokers that hold different data.
#[test]
fn a_second_broker_on_the_ports_of_a_running_one_is_refused() {
    let (first, second) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let listen = format!("127.0.0.1:{}", common::free_port_pair("127.0.0.1"));
    let running = Broker::start_listening(first.path(), &listen, &[]);
    let (ok, stderr) = serve_expecting_exit(second.path(), &["--listen", &listen]);
    assert!(!ok, "the second broker does not start");
    assert!(stderr.contains(&listen) && stderr.contains("in use"), "says which address is taken: {stderr}");
    running.client().create_topic("still", 1, 0).expect("the running broker serves on");
}

/// A Kafka listener that cannot bind stops the broker at start, as the
/// native one does, saying which listener and address.
#[test]
fn a_kafka_listener_that_cannot_bind_stops_the_broker() {
    let dir = tempfile::tempdir().unwrap();
    let port = common::free_port_pair("127.0.0.1");
    let _taken = std::net::TcpListener::bind(("127.0.0.1", port)).expect("hold shard 0's Kafka port");
    let kafka = format!("127.0.0.1:{port}");
    let (ok, stderr) = serve_expecting_exit(dir.path(), &["--kafka-listen", &kafka]);
    assert!(!ok, "the broker does not serve without its Kafka listener");
    assert!(stderr.contains("Kafka listener") && stderr.contains(&kafka), "says which listener: {stderr}");
}

#[test]
fn a_data_dir_refuses_a_start_with_another_shard_count_or_segment_size() {
    let dir = tempfile::tempdir().unwrap();
    let mut broker = Broker::start(dir.path(), &[]);
    broker.client().create_topic("t", 4, 0).unwrap();
    broker.stop();
    let (ok, stderr) = serve_expecting_exit(dir.path(), &["--cores", "0", "--segment-mib", "16"]);
    assert!(!ok, "a start with one core refuses");
    assert!(stderr.contains("holds 2 shards") && stderr.contains("--cores"), "says what to do: {stderr}");
    let (ok, stderr) = serve_expecting_exit(dir.path(), &["--cores", "0,1", "--segment-mib", "32"]);
    assert!(!ok, "a start with other segments refuses");
    assert!(stderr.contains("--segment-mib 16"), "says what to do: {stderr}");
    broker.restart();
    assert_eq!(broker.client().topic("t").unwrap().queue_shards.len(), 4, "the right layout still starts");
}

#[test]
fn a_segment_cut_short_is_recovered_and_the_broker_serves_and_stops() {
    let dir = tempfile::tempdir().unwrap();
    let mut broker = Broker::start(dir.path(), &[]);
    let client = broker.client();
    client.create_topic("t", 2, 0).unwrap();
    let producer = ringmq::client::Producer::new(client, ringmq::client::ProducerConfig::default());
    let msg = ringmq::client::Message::new;
    let acked: Vec<_> =
        (0..20).map(|i| (format!("m{i}"), producer.send("t", &msg(format!("m{i}"))).unwrap())).collect();
    drop(producer);
    broker.stop();
    // Cut each shard's segment where its written part ends: the next header
    // read (recovery's check for the clean end) then lies past the file's end.
    for shard in ["shard-0", "shard-1"] {
        let seg = dir.path().join(shard).join("00000000000000000000.log");
        let bytes = std::fs::read(&seg).unwrap();
        // The last record ends with its value and a zero u16 header count.
        let written = bytes.iter().rposition(|&b| b != 0).map_or(0, |last| last + 1 + 2);
        let cut = written as u64;
        std::fs::OpenOptions::new().write(true).open(&seg).unwrap().set_len(cut).unwrap();
    }
    broker.restart();
    let client = broker.client();
    let mut consumer = Consumer::new(client.clone(), None);
    consumer.assign_all("t", StartFrom::Earliest).unwrap();
    let got = consume(&mut consumer, acked.len(), Duration::from_secs(20));
    common::assert_acked_present(&got, &acked);
    let producer = ringmq::client::Producer::new(client, ringmq::client::ProducerConfig::default());
    producer.send("t", &msg("after".to_string())).expect("appends continue after the repair");
    drop(producer);
    broker.stop();
    let len = std::fs::metadata(dir.path().join("shard-0/00000000000000000000.log")).unwrap().len();
    assert_eq!(len, 16 << 20, "the segment has its preallocated length back");
}

#[test]
fn join_group_gives_the_members_to_the_leader_alone() {
    use ringmq::protocol::messages::Joined;
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(dir.path(), &[]);
    let join = |member: &str| {
        body(|w| {
            let (group, client_id, metadata) = ("g".into(), "c".into(), b"sub".to_vec());
            let (session_timeout_ms, rebalance_timeout_ms) = (30_000, 30_000);
            JoinGroup { group, member: member.into(), client_id, session_timeout_ms, rebalance_timeout_ms, metadata }
                .encode(w)
        })
    };
    let joined = |reply: &[u8]| Joined::decode(&mut Reader::new(reply)).unwrap();
    let (mut a, mut b) = (Raw::connect(broker.addr()), Raw::connect(broker.addr()));
    let (_, code, message, reply) = a.call(ApiKey::JoinGroup as u16, 0, 1, &join(""));
    assert_eq!(code, ErrorCode::None, "{message}");
    let first = joined(&reply);
    // B's join parks the next generation until A joins again.
    use std::io::Write;
    b.stream.write_all(&ringmq::protocol::frame::request(ApiKey::JoinGroup as u16, 0, 1, &join(""))).unwrap();
    let (_, code, message, reply) = a.call(ApiKey::JoinGroup as u16, 0, 2, &join(&first.member));
    assert_eq!(code, ErrorCode::None, "{message}");
    let (_, code, message, other) = b.read_response().expect("B's join is answered");
    assert_eq!(code, ErrorCode::None, "{message}");
    let answers = [joined(&reply), joined(&other)];
    let leader = &answers[0].leader;
    for answer in &answers {
        let want = if &answer.member == leader { 2 } else { 0 };
        assert_eq!(answer.members.len(), want, "{} (leader {leader}) gets {want} members", answer.member);
    }
}

/// Queue index directories over every shard of the broker in `dir`.
fn index_dirs(dir: &std::path::Path) -> usize {
    (0..2).map(|s| std::fs::read_dir(dir.join(format!("shard-{s}/index"))).map_or(0, |d| d.count())).sum()
}

#[test]
fn deleting_a_topic_reclaims_its_queues_storage() {
    let dir = tempfile::tempdir().unwrap();
    let mut broker = Broker::start(dir.path(), &[]);
    let client = broker.client();
    let internal = index_dirs(dir.path());
    let producer = ringmq::client::Producer::new(client.clone(), ringmq::client::ProducerConfig::default());
    for cycle in 0..2 {
        client.create_topic("big", 4096, 0).unwrap();
        assert_eq!(index_dirs(dir.path()), internal + 4096);
        assert_eq!(client.list_offsets("big", 7).unwrap(), (0, 0), "a topic made again starts empty");
        for i in 0..20 {
            producer.send("big", &ringmq::client::Message::new(format!("m{i}"))).unwrap();
        }
        client.delete_topic("big").unwrap();
        assert_eq!(index_dirs(dir.path()), internal, "cycle {cycle}: the deleted topic's index directories are gone");
    }
    drop(producer);
    broker.kill9();
    broker.restart();
    assert_eq!(index_dirs(dir.path()), internal, "recovery passes over the deleted queues' batches");
    assert!(broker.client().list_topics().unwrap().is_empty());
}
