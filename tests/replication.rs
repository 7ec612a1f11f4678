//! A broker group of three nodes on etcd: the first node elected leads,
//! the others mirror its shards and send clients to it; produces are
//! acknowledged once two replicas hold them durably; after the leader is
//! killed, a follower is elected in a new epoch and serves every
//! acknowledged message at its queue and offset, and takes new produces. A
//! deposed leader that rejoins cuts back what it never replicated. The tests
//! run one cluster at a time (see `one_cluster`).

mod common;

use common::etcd::{isr_of, wait_for_status, Etcd};
use common::{assert_acked_present, consume, free_port_pair, one_cluster, Broker};
use ringmq::client::{
    Client, ClientConfig, ClientError, Consumer, Message, Producer, ProducerConfig, SendResult, StartFrom,
};
use ringmq::protocol::{ApiKey, ErrorCode};
use std::sync::Arc;
use std::time::{Duration, Instant};

const TOPIC: &str = "orders";
const QUEUES: u32 = 4;
const MESSAGES: u32 = 200;

fn node(etcd: &Etcd, dir: &std::path::Path, name: &str, ip: &str) -> Broker {
    node_with_lease(etcd, dir, name, ip, "1000")
}

fn node_with_lease(etcd: &Etcd, dir: &std::path::Path, name: &str, ip: &str, lease_ms: &str) -> Broker {
    node_with(etcd, dir, name, ip, lease_ms, &[])
}

/// For tests that expect every sync produce to be acknowledged: a 10 s ack
/// timeout, so a follower slowed by a loaded machine does not fail them.
const PATIENT: [&str; 2] = ["--replica-ack-timeout-ms", "10000"];

/// A node of g1 with two replicas for an ack and a 1 s ack timeout (unless
/// `extra` sets them) and more flags.
fn node_with(etcd: &Etcd, dir: &std::path::Path, name: &str, ip: &str, lease_ms: &str, extra: &[&str]) -> Broker {
    let listen = format!("{ip}:{}", free_port_pair(ip));
    let mut args = vec!["--cluster", &etcd.url, "--broker-group", "g1", "--node", name, "--lease-ms", lease_ms];
    if !extra.contains(&"--insync-min") {
        args.extend_from_slice(&["--insync-min", "2"]);
    }
    if !extra.contains(&"--replica-ack-timeout-ms") {
        args.extend_from_slice(&["--replica-ack-timeout-ms", "1000"]);
    }
    args.extend_from_slice(extra);
    Broker::start_listening(&dir.join(name), &listen, &args)
}

fn connect(addr: &str) -> Result<Arc<Client>, ClientError> {
    let mut cfg = ClientConfig::new(addr);
    cfg.request_timeout = Duration::from_secs(20);
    Client::connect(cfg)
}

/// The node among `nodes` that serves clients, once one does (within `limit`).
fn leader_of(nodes: &[&Broker], limit: Duration) -> (usize, Arc<Client>) {
    let deadline = Instant::now() + limit;
    loop {
        for (i, n) in nodes.iter().enumerate() {
            if let Ok(client) = connect(n.addr()) {
                return (i, client);
            }
        }
        assert!(Instant::now() < deadline, "no node serves clients within {limit:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn acknowledged_messages_survive_the_leaders_death_and_the_new_leader_takes_produces() {
    let _cluster = one_cluster();
    let dir = tempfile::tempdir().unwrap();
    let etcd = Etcd::start(&dir.path().join("etcd"));
    let mut a = node_with(&etcd, dir.path(), "a", "127.0.0.21", "1000", &PATIENT);
    let mut b = node_with(&etcd, dir.path(), "b", "127.0.0.22", "1000", &PATIENT);
    let mut c = node_with(&etcd, dir.path(), "c", "127.0.0.23", "1000", &PATIENT);
    let client = connect(a.addr()).expect("the first node leads");

    // A follower sends clients to the leader.
    match connect(b.addr()) {
        Err(ClientError::Broker { code: ErrorCode::NotLeader, message }) => {
            assert!(message.contains("follows a"), "{message}")
        }
        Err(other) => panic!("a follower answered {other}"),
        Ok(_) => panic!("a follower served a client"),
    }

    client.create_topic(TOPIC, QUEUES, 0).expect("create a sync topic");
    // Sync produces need a second replica in the in-sync set (1 s ack timeout): wait for the followers to join it.
    assert_eq!(isr_becomes(&etcd, "a,b,c"), "a,b,c");
    let producer = Producer::new(client.clone(), ProducerConfig::default());
    let mut acked = Vec::new();
    for i in 0..MESSAGES {
        let value = format!("m{i}");
        let sent = producer.send(TOPIC, &Message::new(value.clone())).expect("a sync produce with two replicas");
        acked.push((value, sent));
    }
    drop(producer);
    // A produce whose answer the client never saw: it sends the same bytes again after the fail-over.
    let retried = common::client_batch(7, b"retried across the fail-over");
    let first = produce_raw(&client.owner(TOPIC, 0).unwrap(), &retried);
    let stored_end = client.list_offsets(TOPIC, 0).unwrap();
    let message_id = ringmq::client::MessageId([7; 16]);
    acked.push(("retried across the fail-over".into(), SendResult { message_id, queue: 0, offset: first.0 }));
    drop(client);
    let mut cfg = ClientConfig::new(format!("{},{},{}", a.addr(), b.addr(), c.addr()));
    cfg.retries = 100;
    let following = Producer::new(Client::connect(cfg).expect("bootstrap from the group"), ProducerConfig::default());

    a.kill9();
    let (leader, client) = leader_of(&[&b, &c], Duration::from_secs(60));
    let mut consumer = Consumer::new(client.clone(), None);
    consumer.assign_all(TOPIC, StartFrom::Earliest).unwrap();
    let got = consume(&mut consumer, acked.len(), Duration::from_secs(30));
    assert_eq!(got.len(), acked.len(), "the new leader serves exactly the acknowledged messages");
    assert_acked_present(&got, &acked);
    // The new leader recognises the retry: the first attempt's offset, stored once.
    assert_eq!(produce_raw(&client.owner(TOPIC, 0).unwrap(), &retried), first);
    assert_eq!(client.list_offsets(TOPIC, 0).unwrap(), stored_end);
    drop((consumer, client));
    // A producer made before the fail-over, bootstrapped with every node,
    // follows the group to its new leader; the new leader and the other
    // follower make two replicas again.
    let sent = following.send(TOPIC, &Message::new("after fail-over")).expect("produce to the new leader");
    assert!(sent.offset >= (MESSAGES / QUEUES) as u64, "{sent:?}");
    drop(following);
    if leader == 0 {
        c.stop();
        b.stop();
    } else {
        b.stop();
        c.stop();
    }
}

/// Produces `batch` to queue 0 at `addr`; its (offset, count).
fn produce_raw(addr: &str, batch: &[u8]) -> (u64, u32) {
    produce_raw_answer(addr, batch).unwrap_or_else(|(code, message)| panic!("{code:?}: {message}"))
}

/// Produces `batch` to queue 0 at `addr`: its (offset, count), or the error and its message.
fn produce_raw_answer(addr: &str, batch: &[u8]) -> Result<(u64, u32), (ErrorCode, String)> {
    use ringmq::protocol::messages::{decode_produced, Produce, QueueRef, ACKS_DURABLE};
    let mut w = ringmq::protocol::Writer::default();
    let queue = QueueRef { topic: TOPIC.into(), queue: 0 };
    Produce { queue, acks: ACKS_DURABLE, batches: vec![batch] }.encode(&mut w);
    let (_, code, message, body) = common::Raw::connect(addr).call(ApiKey::Produce as u16, 0, 1, &w.buf);
    if code != ErrorCode::None {
        return Err((code, message));
    }
    Ok(decode_produced(&mut ringmq::protocol::Reader::new(&body)).unwrap()[0])
}

/// Sends `value` until an attempt is acknowledged (attempts refused with
/// NotEnoughReplicas stay stored on the leader: their outcome is unknown).
fn send_until_acked(producer: &Producer, value: &str, limit: Duration) -> ringmq::client::SendResult {
    let deadline = Instant::now() + limit;
    loop {
        match producer.send(TOPIC, &Message::new(value.to_string())) {
            Ok(sent) => return sent,
            Err(ClientError::Broker { code: ErrorCode::NotEnoughReplicas, .. }) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(200));
            }
            Err(e) => panic!("sending {value}: {e}"),
        }
    }
}

#[test]
fn a_deposed_leader_that_rejoins_cuts_back_what_it_never_replicated() {
    let _cluster = one_cluster();
    let dir = tempfile::tempdir().unwrap();
    let etcd = Etcd::start(&dir.path().join("etcd"));
    let mut a = node(&etcd, dir.path(), "a", "127.0.0.31");
    // Leases that outlast a short pause: the followers stay registered and in sync.
    let mut b = node_with_lease(&etcd, dir.path(), "b", "127.0.0.32", "10000");
    let mut c = node_with_lease(&etcd, dir.path(), "c", "127.0.0.33", "10000");
    let client = connect(a.addr()).expect("the first node leads");
    client.create_topic(TOPIC, 2, 0).expect("create a sync topic");
    let producer = Producer::new(client.clone(), ProducerConfig::default());
    let mut acked: Vec<_> =
        (0..20).map(|i| (format!("m{i}"), send_until_acked(&producer, &format!("m{i}"), Duration::ZERO))).collect();

    // With its followers hung, the leader stores a produce it cannot replicate: refused, but in its log.
    b.pause();
    c.pause();
    // Their parked fetches are answered (empty) before the produce, so no answer in a socket carries it.
    std::thread::sleep(Duration::from_secs(2));
    match producer.send(TOPIC, &Message::new("unreplicated")) {
        Err(ClientError::Broker { code: ErrorCode::NotEnoughReplicas, .. }) => {}
        other => panic!("a produce with no follower answered {other:?}"),
    }
    drop((producer, client));
    a.kill9();
    b.resume();
    c.resume();

    // The followers, still in the in-sync set, elect one of them; it takes produces.
    let (leader, client) = leader_of(&[&b, &c], Duration::from_secs(60));
    let producer = Producer::new(client.clone(), ProducerConfig::default());
    for i in 20..30 {
        let value = format!("m{i}");
        acked.push((value.clone(), send_until_acked(&producer, &value, Duration::from_secs(30))));
    }

    // The old leader rejoins as a follower. With the other follower gone,
    // an acknowledged produce proves it is in sync (min-insync 2).
    a.restart();
    let other = if leader == 0 { &mut c } else { &mut b };
    other.kill9();
    acked.push(("probe".to_string(), send_until_acked(&producer, "probe", Duration::from_secs(60))));
    drop((producer, client));
    if leader == 0 {
        b.kill9();
    } else {
        c.kill9();
    }

    // Now it leads (it is in the in-sync set), and serves exactly what the group acknowledged.
    let (_, client) = leader_of(&[&a], Duration::from_secs(60));
    let mut consumer = Consumer::new(client.clone(), None);
    consumer.assign_all(TOPIC, StartFrom::Earliest).unwrap();
    let got = consume(&mut consumer, acked.len(), Duration::from_secs(30));
    let more = common::poll_during(&mut consumer, Duration::from_millis(500));
    let got: Vec<_> = got.into_iter().chain(more).collect();
    assert_acked_present(&got, &acked);
    for m in &got {
        let value = String::from_utf8_lossy(m.value_or_empty());
        assert_ne!(value, "unreplicated", "the deposed leader's unreplicated tail is gone");
        assert!(acked.iter().any(|(v, _)| *v == value), "only acknowledged messages or probe attempts: {value}");
    }
    drop((consumer, client));
    a.stop();
}

/// True if a file under `dir` holds `bytes` (a node's log, read as it lies on disk).
fn on_disk(dir: &std::path::Path, bytes: &str) -> bool {
    let grep = std::process::Command::new("grep").args(["-rqaF", bytes]).arg(dir).status().expect("run grep");
    grep.success()
}

/// What an old leader stored and only one of its in-sync followers copied
/// is not committed: a new leader serves it to consumers, and acknowledges
/// a client's retry of it, only once every follower etcd lists as in sync
/// holds it or has left the set, so no later election can pick a node that
/// lacks it. (A new leader used to count its whole log as committed: the retry
/// was acknowledged at once, the follower that missed it was elected next,
/// and the acknowledged message was gone; the twenty-kill loop caught it.)
#[test]
fn a_retry_the_new_leader_recognises_waits_for_every_in_sync_follower() {
    let _cluster = one_cluster();
    let dir = tempfile::tempdir().unwrap();
    let etcd = Etcd::start(&dir.path().join("etcd"));
    // One replica makes an ack, but a follower stays in the set for 20 s
    // without fetching, and c stays registered for a minute while hung:
    // a leader must wait for c all that time.
    let flags = ["--insync-min", "1", "--replica-lag-ms-max", "20000"];
    let mut a = node_with(&etcd, dir.path(), "a", "127.0.0.41", "1000", &flags);
    let mut b = node_with(&etcd, dir.path(), "b", "127.0.0.42", "1000", &flags);
    let mut c = node_with(&etcd, dir.path(), "c", "127.0.0.43", "60000", &flags);
    connect(a.addr()).expect("the first node leads").create_topic(TOPIC, 1, 0).unwrap();
    assert_eq!(isr_becomes(&etcd, "a,b,c"), "a,b,c");

    // c hangs; a stores the batch, b copies it, c cannot: not acknowledged.
    c.pause();
    let value = "copied by one follower of two";
    let retried = common::client_batch(9, value.as_bytes());
    let refused = produce_raw_answer(a.addr(), &retried);
    assert!(matches!(refused, Err((ErrorCode::NotEnoughReplicas, _))), "{refused:?}");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !on_disk(&b.dir, value) {
        assert!(Instant::now() < deadline, "b never copied the batch");
        std::thread::sleep(Duration::from_millis(100));
    }

    // b leads; consumers do not see the batch yet, and the client's retry,
    // recognised there, is acknowledged only once c (and the dead a) left
    // the in-sync set.
    a.kill9();
    let (_, client) = leader_of(&[&b], Duration::from_secs(60));
    assert!(!visible_now(&client, TOPIC, value), "a consumer read what a node that may be elected lacks");
    let deadline = Instant::now() + Duration::from_secs(90);
    let acked = loop {
        match produce_raw_answer(b.addr(), &retried) {
            Ok((offset, _)) => break offset,
            Err((ErrorCode::NotEnoughReplicas, _)) if Instant::now() < deadline => {}
            Err(other) => panic!("the retry on the new leader: {other:?}"),
        }
    };
    let lines = common::etcd::cluster_status(&etcd.url);
    assert_eq!(isr_of(&lines, "g1"), "b", "acknowledged once the followers that lack it left the set");
    assert!(visible_now(&client, TOPIC, value), "committed, it is read");
    drop(client);

    // c runs again, out of the set (it lacks an acknowledged batch); after
    // a restart of the others, b leads again and serves the batch.
    c.resume();
    b.kill9();
    b.restart();
    a.restart();
    let (_, client) = leader_of(&[&b], Duration::from_secs(60));
    let mut consumer = Consumer::new(client.clone(), None);
    consumer.assign_all(TOPIC, StartFrom::Earliest).unwrap();
    let got = consume(&mut consumer, 1, Duration::from_secs(30));
    let at = got.iter().find(|m| m.value_or_empty() == value.as_bytes()).map(|m| m.offset);
    assert_eq!(at, Some(acked), "the acknowledged batch is at its offset: {got:?}");
    drop((consumer, client));
    for node in [&mut a, &mut b, &mut c] {
        node.kill9();
    }
}

#[test]
fn group_offsets_delayed_messages_retries_and_open_transactions_fail_over_with_the_log() {
    let _cluster = one_cluster();
    use ringmq::client::{Delay, GroupConfig, StartNew, TransactionProducer, TxState};
    let dir = tempfile::tempdir().unwrap();
    let etcd = Etcd::start(&dir.path().join("etcd"));
    let start = |name: &str, ip: &str| {
        let listen = format!("{ip}:{}", free_port_pair(ip));
        let mut args = vec!["--cluster", &etcd.url, "--broker-group", "g1", "--node", name, "--lease-ms", "1000"];
        args.push("--manual-clock");
        Broker::start_listening(&dir.path().join(name), &listen, &args)
    };
    let mut a = start("a", "127.0.0.41");
    let b = start("b", "127.0.0.42");
    let c = start("c", "127.0.0.43");
    let client = connect(a.addr()).expect("the first node leads");
    client.create_topic("orders", 2, 0).unwrap();
    client.create_topic("pay", 2, 0).unwrap();
    let producer = Producer::new(client.clone(), ProducerConfig::default());
    for i in 0..10 {
        producer.send("orders", &Message::new(format!("o{i}"))).unwrap();
    }
    // A group consumes and commits its positions.
    let group = GroupConfig { start_new: StartNew::Earliest, ..GroupConfig::new("billing", &["orders"]) };
    let mut member = Consumer::subscribe(client.clone(), group);
    let got = consume(&mut member, 10, Duration::from_secs(20));
    assert_eq!(got.len(), 10);
    let committed = member.positions();
    member.commit().unwrap();
    drop(member);
    // A delayed message due in an hour, a retry due in seconds, an open transaction.
    producer.send_delayed("orders", &Message::new("delayed"), Delay::After(Duration::from_secs(3600))).unwrap();
    let retry_me = producer.send("orders", &Message::new("retry-me")).unwrap();
    client.send_back("billing", "orders", retry_me.queue, retry_me.offset, 3).unwrap();
    let quiet: ringmq::client::CheckFn = Arc::new(|_| TxState::Unknown);
    let tp = TransactionProducer::start(client.clone(), "payments", ProducerConfig::default(), quiet);
    tp.send_half_only("pay", &Message::new("open-tx")).unwrap();
    drop((tp, producer, client));

    a.kill9();
    let (_, client) = leader_of(&[&b, &c], Duration::from_secs(60));
    for (topic, queue, position) in &committed {
        assert_eq!(client.fetch_offset("billing", topic, *queue).unwrap(), Some(*position), "{topic}/{queue}");
    }
    assert!(!visible_now(&client, "pay", "open-tx"), "the half message is not visible");
    let commit: ringmq::client::CheckFn =
        Arc::new(|m| if m.value_or_empty() == b"open-tx" { TxState::Commit } else { TxState::Unknown });
    let _tp = TransactionProducer::start(client.clone(), "payments", ProducerConfig::default(), commit);
    // The new leader's clock moves two hours; on a loaded machine its timers
    // may load after the first move, so the clock moves on until all three
    // are delivered (each move only brings them further past due), at most a minute.
    let mut missing = vec![("orders", "delayed"), ("%RETRY%billing", "retry-me"), ("pay", "open-tx")];
    let deadline = Instant::now() + Duration::from_secs(60);
    while !missing.is_empty() && Instant::now() < deadline {
        client.advance_clock(Duration::from_secs(7200)).unwrap();
        missing.retain(|(topic, value)| !visible_now(&client, topic, value));
    }
    assert!(
        missing.is_empty(),
        "the delayed message, the retry and the checked-back transaction are delivered by the new leader; missing: {missing:?}"
    );
}

/// True if `value` is in `topic` now.
fn visible_now(client: &Arc<Client>, topic: &str, value: &str) -> bool {
    let mut consumer = Consumer::new(client.clone(), None);
    consumer.assign_all(topic, StartFrom::Earliest).unwrap();
    common::poll_during(&mut consumer, Duration::from_millis(500))
        .iter()
        .any(|m| m.value_or_empty() == value.as_bytes())
}

/// The in-sync set of group g1 once it is `isr` (or the last one seen, after a minute).
fn isr_becomes(etcd: &Etcd, isr: &str) -> String {
    let lines = wait_for_status(&etcd.url, Duration::from_secs(60), |lines| isr_of(lines, "g1") == isr);
    isr_of(&lines, "g1")
}

#[test]
fn a_crashed_follower_leaves_the_in_sync_set_through_etcd_and_rejoins_it_once_caught_up() {
    let _cluster = one_cluster();
    let dir = tempfile::tempdir().unwrap();
    let etcd = Etcd::start(&dir.path().join("etcd"));
    // The admin listener on an address no shard listens on: glommio binds
    // with SO_REUSEPORT, so a shared port would split its connections.
    let admin = format!("127.0.0.59:{}", free_port_pair("127.0.0.59"));
    let mut a =
        node_with(&etcd, dir.path(), "a", "127.0.0.51", "1000", &["--admin-listen", &admin, PATIENT[0], PATIENT[1]]);
    let b = node_with(&etcd, dir.path(), "b", "127.0.0.52", "1000", &PATIENT);
    let mut c = node_with(&etcd, dir.path(), "c", "127.0.0.53", "1000", &PATIENT);
    let client = connect(a.addr()).expect("the first node leads");
    client.create_topic(TOPIC, QUEUES, 0).unwrap();
    assert_eq!(isr_becomes(&etcd, "a,b,c"), "a,b,c", "followers join the set once caught up");
    // The leader's metrics: its epoch, the in-sync set's size, each follower's lag per shard.
    let (status, metrics) = common::get(&admin, "/metrics");
    assert_eq!(status, 200);
    let line = |prefix: &str| metrics.lines().find(|l| l.starts_with(prefix)).map(str::to_string);
    let isr = line("ringmq_replication_isr_size{shard=\"0\",broker_group=\"g1\"}").expect("the in-sync set's size");
    assert!(isr.ends_with(" 3.0"), "{isr}");
    let epoch = line("ringmq_replication_leader_epoch{shard=\"0\",broker_group=\"g1\"}").expect("the epoch");
    assert!(!epoch.ends_with(" 0.0"), "{epoch}");
    for f in ["b", "c"] {
        let lag = format!("ringmq_replication_lag_bytes{{shard=\"1\",broker_group=\"g1\",follower=\"{f}\"}}");
        assert!(line(&lag).is_some(), "{f}'s lag on shard 1:\n{metrics}");
    }
    assert!(line("ringmq_shard_role{shard=\"0\",role=\"leader\"} 1.0").is_some());
    let producer = Producer::new(client.clone(), ProducerConfig::default());
    let mut acked = Vec::new();
    let mut send = |i: u32| {
        let value = format!("m{i}");
        acked.push((value.clone(), send_until_acked(&producer, &value, Duration::ZERO)));
    };
    (0..50).for_each(&mut send);

    c.kill9();
    assert_eq!(isr_becomes(&etcd, "a,b"), "a,b", "a crashed follower leaves the set");
    (50..100).for_each(&mut send); // min-insync 2 still holds
    c.restart();
    assert_eq!(isr_becomes(&etcd, "a,b,c"), "a,b,c", "it catches up and rejoins");
    // The leader reports each follower's lag in bytes and the time since its last fetch.
    let lines = wait_for_status(&etcd.url, Duration::from_secs(60), |lines| {
        ["b", "c"]
            .iter()
            .all(|f| lines.iter().any(|l| l.starts_with(&format!("broker_group=g1 follower={f} lag_bytes="))))
    });
    for f in ["b", "c"] {
        let line = lines.iter().find(|l| l.starts_with(&format!("broker_group=g1 follower={f} "))).expect("a lag line");
        let fields: Vec<u64> =
            line.split(' ').skip(2).map(|kv| kv.split_once('=').unwrap().1.parse().unwrap()).collect();
        assert_eq!(fields.len(), 2, "lag_bytes and since_fetch_ms: {line}");
    }
    (100..110).for_each(&mut send);
    drop((producer, client));

    a.kill9();
    let (_, client) = leader_of(&[&b, &c], Duration::from_secs(60));
    let mut consumer = Consumer::new(client.clone(), None);
    consumer.assign_all(TOPIC, StartFrom::Earliest).unwrap();
    let got = consume(&mut consumer, acked.len(), Duration::from_secs(30));
    assert_eq!(got.len(), acked.len());
    assert_acked_present(&got, &acked);
}

#[test]
fn a_follower_that_stops_keeping_up_leaves_the_in_sync_set_while_registered_and_returns() {
    let _cluster = one_cluster();
    let dir = tempfile::tempdir().unwrap();
    let etcd = Etcd::start(&dir.path().join("etcd"));
    // Leases that outlast the pause, and a lag limit well inside it.
    let lag = ["--replica-lag-ms-max", "1000"];
    let a = node_with(&etcd, dir.path(), "a", "127.0.0.54", "10000", &lag);
    let b = node_with(&etcd, dir.path(), "b", "127.0.0.55", "10000", &lag);
    let _c = node_with(&etcd, dir.path(), "c", "127.0.0.56", "10000", &lag);
    let client = connect(a.addr()).expect("the first node leads");
    client.create_topic(TOPIC, QUEUES, 0).unwrap();
    assert_eq!(isr_becomes(&etcd, "a,b,c"), "a,b,c");
    let producer = Producer::new(client.clone(), ProducerConfig::default());

    // b hangs: it stays registered, but fetches nothing.
    b.pause();
    let lines = wait_for_status(&etcd.url, Duration::from_secs(60), |lines| isr_of(lines, "g1") == "a,c");
    assert_eq!(isr_of(&lines, "g1"), "a,c", "a follower past the lag limit leaves the set");
    assert!(lines.iter().any(|l| l.starts_with("broker_group=g1 node=b ")), "b is still registered: {lines:?}");
    for i in 0..20 {
        send_until_acked(&producer, &format!("while b lags {i}"), Duration::from_secs(30));
    }
    b.resume();
    assert_eq!(isr_becomes(&etcd, "a,b,c"), "a,b,c", "it catches up and returns");
}
