//! Moving a queue between broker groups while clients go on: `ringmq
//! cluster move` copies it to the target group, freezes it for a moment and
//! switches; every acknowledged record (native and Kafka producers) is on
//! the new group at its offset, a consumer group goes on from its committed
//! offset, a message delayed past the switch is delivered to the new group,
//! and the old group holds the queue no more; a drained group ends
//! with no queue; the Java AdminClient moves it back (Kafka's
//! AlterPartitionReassignments and ListPartitionReassignments). A move survives kill -9 of the source's leader while it
//! copies and of the target's leader while the queue is frozen. A
//! compacted queue moves with its compacted part, which the target's
//! follower holds too.

mod common;

use common::{
    assert_acked_present, connect_retrying, consume, free_port_pair, kafka_failover, one_cluster, shared_port_pair,
    Broker,
};
use ringmq::client::{
    Client, ConsumedMessage, Consumer, GroupConfig, Message, Producer, ProducerConfig, QueueSelector, SendResult,
    StartFrom, StartNew,
};
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const TOPIC: &str = "moving";
const QUEUES: u32 = 4;
/// Records produced to the moving queue before the move, and read and committed by a group.
const BEFORE: u32 = 200;

/// A one-node broker group `group` on `ip` at the `native`, `kafka` and
/// `admin` ports.
fn kafka_node(etcd: &common::etcd::Etcd, dir: &Path, group: &str, ports: (&str, u16, u16, u16)) -> Broker {
    let (ip, native, kafka, admin) = ports;
    let (listen, kafka_listen, admin) = (format!("{ip}:{native}"), format!("{ip}:{kafka}"), format!("{ip}:{admin}"));
    let args = ["--cluster", &etcd.url, "--broker-group", group, "--node", group, "--lease-ms", "1000"];
    let mut args: Vec<&str> = args.to_vec();
    args.extend(["--insync-min", "1", "--kafka-listen", &kafka_listen, "--admin-listen", &admin]);
    Broker::start_listening(&dir.join(group), &listen, &args)
}

/// Node `name` of broker group `group` on `ip` (its own ports), with `extra` flags.
fn group_node(etcd: &common::etcd::Etcd, dir: &Path, (group, name, ip): (&str, &str, &str), extra: &[&str]) -> Broker {
    let listen = format!("{ip}:{}", free_port_pair(ip));
    let args = ["--cluster", &etcd.url, "--broker-group", group, "--node", name, "--lease-ms", "1000"];
    let mut args: Vec<&str> = args.to_vec();
    args.extend(["--insync-min", "1"]);
    args.extend(extra);
    Broker::start_listening(&dir.join(name), &listen, &args)
}

fn connect(bootstrap: &str) -> Arc<Client> {
    connect_retrying(bootstrap, 1000)
}

/// Reads `queues` of `topic` (all if None) from their starts until
/// `count` records came; asserts that they did (`what`), and that every
/// acknowledged record is at its offset.
fn assert_reads(
    client: &Arc<Client>,
    topic: &str,
    queues: Option<&[u32]>,
    count: u64,
    acked: &[(String, SendResult)],
    what: &str,
) {
    let mut reader = Consumer::new(client.clone(), None);
    match queues {
        Some(queues) => reader.assign(topic, queues, StartFrom::Earliest).unwrap(),
        None => reader.assign_all(topic, StartFrom::Earliest).unwrap(),
    }
    let got = consume(&mut reader, count as usize, Duration::from_secs(60));
    assert_eq!(got.len() as u64, count, "{what}");
    assert_acked_present(&got, acked);
}

/// A producer that sends every message to queue `queue`.
fn producer_to(client: &Arc<Client>, queue: u32) -> Producer {
    let to = Arc::new(move |_: &Message, _: u32| queue);
    Producer::new(client.clone(), ProducerConfig { selector: QueueSelector::Custom(to), ..Default::default() })
}

/// `ringmq ARGS` started, its output piped.
fn spawn_ringmq(args: &[&str]) -> std::process::Child {
    let mut command = Command::new(env!("CARGO_BIN_EXE_ringmq"));
    command.args(args).stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped());
    command.spawn().expect("run ringmq")
}

fn ringmq(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_ringmq")).args(args).output().expect("run ringmq")
}

#[test]
fn a_queue_moves_to_another_group_under_native_and_kafka_load_and_its_consumers_go_on() {
    let _cluster = one_cluster();
    let dir = tempfile::tempdir().unwrap();
    let etcd = common::etcd::Etcd::start(&dir.path().join("etcd"));
    let ips = ["127.0.0.91", "127.0.0.92"];
    let (native, kafka) = (shared_port_pair(&ips), shared_port_pair(&ips));
    let admin = shared_port_pair(&ips);
    let node = |group: &str, ip: &str| kafka_node(&etcd, dir.path(), group, (ip, native, kafka, admin));
    let mut east = node("east", ips[0]);
    let mut west = node("west", ips[1]);
    let client = connect(&format!("{},{}", east.addr(), west.addr()));
    client.create_topic(TOPIC, QUEUES, 0).unwrap();
    let on = |ip: &str| (0..QUEUES).find(|q| client.owner(TOPIC, *q).unwrap().starts_with(&format!("{ip}:")));
    let moving = on(ips[0]).expect("east holds a queue");
    let east_held = (0..QUEUES).filter(|q| client.owner(TOPIC, *q).unwrap().starts_with(ips[0])).count();

    // Before: records a consumer group reads and commits.
    let before = producer_to(&client, moving);
    let mut acked: Vec<(String, SendResult)> = (0..BEFORE)
        .map(|i| {
            let value = format!("before-{i}");
            (value.clone(), before.send(TOPIC, &Message::new(value)).unwrap())
        })
        .collect();
    drop(before);
    let group = GroupConfig { start_new: StartNew::Earliest, ..GroupConfig::new("readers", &[TOPIC]) };
    let mut member = Consumer::subscribe(client.clone(), group.clone());
    let got = consume(&mut member, BEFORE as usize, Duration::from_secs(30));
    assert_eq!(got.len(), BEFORE as usize);
    member.commit().unwrap();
    drop(member);

    // Native and Kafka producers go on through the move.
    let stop = Arc::new(AtomicBool::new(false));
    let native_load = {
        let (client, stop) = (client.clone(), stop.clone());
        std::thread::spawn(move || {
            let p = producer_to(&client, moving);
            let mut sent = Vec::new();
            for i in 0..20_000 {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let value = format!("during-{i}");
                let r = p.send(TOPIC, &Message::new(value.clone())).unwrap_or_else(|e| panic!("{value}: {e}"));
                sent.push((value, r));
                std::thread::sleep(Duration::from_millis(2));
            }
            sent
        })
    };
    let bootstrap = ips.map(|ip| format!("{ip}:{kafka}")).join(",");
    let (kafka_acked, kafka_read) = (dir.path().join("kafka-acked"), dir.path().join("kafka-read"));
    let mut kafka_producer = kafka_failover::produce(&bootstrap, TOPIC, 12, &kafka_acked);
    std::thread::sleep(Duration::from_secs(3));
    // Due after the switch: east's timer holds it and delivers it to west.
    let delayed = Message::new("delayed-1");
    let later = ringmq::client::Delay::After(Duration::from_secs(6));
    producer_to(&client, moving).send_delayed_batch(TOPIC, moving, &[delayed], later).unwrap();

    let moved = ringmq(&[
        "cluster",
        "move",
        "--cluster",
        &etcd.url,
        "--topic",
        TOPIC,
        "--queue",
        &moving.to_string(),
        "--to",
        "west",
    ]);
    let said = String::from_utf8_lossy(&moved.stdout);
    assert!(moved.status.success(), "{said}{}", String::from_utf8_lossy(&moved.stderr));
    assert!(said.contains("broker_group=west"), "{said}");
    let listed = ringmq(&["cluster", "moves", "--cluster", &etcd.url]);
    assert!(listed.status.success() && listed.stdout.is_empty(), "no move stands after the switch");
    let (_, metrics) = common::get(&format!("{}:{admin}", ips[1]), "/metrics");
    let switched =
        metrics.lines().filter(|l| l.starts_with("ringmq_queue_moves_switched")).map(|l| l.rsplit(' ').next().unwrap());
    assert_eq!(switched.map(|v| v.parse::<f64>().unwrap()).sum::<f64>(), 1.0, "{metrics}");
    assert!(
        metrics.lines().any(|l| l.starts_with("ringmq_queue_move_copied_bytes") && !l.ends_with(" 0")),
        "{metrics}"
    );
    let frozen = metrics.lines().filter(|l| l.starts_with("ringmq_queue_move_last_frozen_seconds"));
    let frozen = frozen.map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap()).fold(0.0, f64::max);
    assert!(frozen > 0.0, "the frozen window is measured: {metrics}");
    eprintln!("the move's appends were refused for at most {:.1} ms", frozen * 1e3);

    // Producers go on on the new group.
    std::thread::sleep(Duration::from_secs(2));
    stop.store(true, Ordering::Relaxed);
    acked.extend(native_load.join().unwrap());
    kafka_failover::wait(&mut kafka_producer, Duration::from_secs(120));
    let fresh = connect(&format!("{},{}", east.addr(), west.addr()));
    assert!(fresh.owner(TOPIC, moving).unwrap().starts_with(&format!("{}:", ips[1])), "west serves the queue now");
    let mut watcher = Consumer::new(fresh.clone(), None);
    watcher.assign(TOPIC, &[moving], StartFrom::Earliest).unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !watcher.poll(Duration::from_millis(200)).unwrap().iter().any(|m| m.value_or_empty() == b"delayed-1") {
        assert!(Instant::now() < deadline, "the delayed message did not reach the moved queue within a minute");
    }
    drop(watcher);
    let after_switch = acked.iter().filter(|(v, r)| v.starts_with("during-") && r.queue == moving).count();
    assert!(after_switch > 0, "the native producer was acknowledged during the move");

    // Every acknowledged record, native and Kafka, is at its offset.
    let ends: u64 = (0..QUEUES).map(|q| fresh.list_offsets(TOPIC, q).unwrap().1).sum();
    assert_reads(&fresh, TOPIC, None, ends, &acked, "every stored record is read");
    let stored = kafka_failover::read(&bootstrap, TOPIC, &kafka_read);
    let kafka_sent = kafka_failover::acked(&kafka_acked);
    assert!(kafka_sent.iter().any(|a| a.partition == moving), "Kafka records went to the moving queue");
    for kafka_failover::Acked { value, partition, offset, .. } in &kafka_sent {
        assert_eq!(stored.get(&(*partition, *offset)), Some(value), "Kafka's acked {value} at {partition}/{offset}");
    }

    // The group goes on from its committed offset, on the new group.
    let mut member = Consumer::subscribe(fresh.clone(), group);
    let rest = ends - u64::from(BEFORE);
    let got = consume(&mut member, rest as usize, Duration::from_secs(60));
    assert_eq!(got.len() as u64, rest, "the group reads what came after its commit, once");
    assert!(got.iter().all(|m| m.queue != moving || m.offset >= u64::from(BEFORE)), "from the committed offset on");
    drop(member);

    // Drained, east holds no queue; the topic is served whole by west.
    let drained = ringmq(&["cluster", "drain", "--cluster", &etcd.url, "--broker-group", "east"]);
    let said = String::from_utf8_lossy(&drained.stdout);
    assert!(drained.status.success(), "{said}{}", String::from_utf8_lossy(&drained.stderr));
    assert!(said.contains(&format!("queues_moved={}", east_held - 1)), "{said}");
    let after = connect(&format!("{},{}", east.addr(), west.addr()));
    for q in 0..QUEUES {
        assert!(after.owner(TOPIC, q).unwrap().starts_with(&format!("{}:", ips[1])), "queue {q} is west's");
    }
    assert_reads(&after, TOPIC, None, ends, &acked, "every record is read from west after the drain");
    drop((after, fresh, client));

    // The Java AdminClient moves it back: broker 0 is east's shard 0 (groups by name, shards in turn).
    let args = [bootstrap.split(',').next().unwrap(), "reassign", TOPIC, &moving.to_string(), "0"];
    let out = common::tools::java_kafka_client().args(args).output().expect("run java");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    for said in ["refused two replicas and a cancel of nothing", "reassigned to broker 0", "100 records read back"] {
        assert!(text.contains(said), "{text}");
    }
    east.stop();
    west.stop();
}

/// Sends to `queue` until `stop`, every 5 ms; the acknowledged sends (a
/// send that fails after the client's retries is not acknowledged).
fn keep_sending(
    client: Arc<Client>,
    queue: u32,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<Vec<(String, SendResult)>> {
    std::thread::spawn(move || {
        let p = producer_to(&client, queue);
        let mut acked = Vec::new();
        for i in 0..100_000 {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            let value = format!("load-{i}");
            if let Ok(r) = p.send(TOPIC, &Message::new(value.clone())) {
                acked.push((value, r));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        acked
    })
}

/// `len` letters no compression shrinks, from `seed`.
fn noise(seed: u64, len: usize) -> String {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            char::from(b'a' + (x % 26) as u8)
        })
        .collect()
}

/// The node that leads `group`, as `cluster status` says.
fn leader_of(etcd: &common::etcd::Etcd, group: &str) -> String {
    let lines = common::etcd::cluster_status(&etcd.url);
    let line = lines.iter().find(|l| l.starts_with(&format!("broker_group={group} leader="))).expect("the group");
    line.split(' ').nth(1).unwrap().trim_start_matches("leader=").to_string()
}

/// The lines of `cluster moves`.
fn moves(etcd: &common::etcd::Etcd) -> String {
    let listed = ringmq(&["cluster", "moves", "--cluster", &etcd.url]);
    assert!(listed.status.success(), "{}", String::from_utf8_lossy(&listed.stderr));
    String::from_utf8_lossy(&listed.stdout).into_owned()
}

/// Waits until `cluster moves` says what `done` looks for.
fn wait_for_moves(etcd: &common::etcd::Etcd, what: &str, done: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let listed = moves(etcd);
        if done(&listed) {
            return listed;
        }
        assert!(Instant::now() < deadline, "{what} within a minute: {listed:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_move_survives_kill_9_of_the_source_leader_mid_copy_and_of_the_target_leader_while_frozen() {
    let _cluster = one_cluster();
    let dir = tempfile::tempdir().unwrap();
    let etcd = common::etcd::Etcd::start(&dir.path().join("etcd"));
    // Copies at 1 MiB/s, so that the copy of the queue's 6 MiB lasts seconds.
    let node = |group: &str, name: &str, ip: &str| {
        group_node(&etcd, dir.path(), (group, name, ip), &["--move-bytes-per-sec", "1048576"])
    };
    let mut east = [node("east", "e1", "127.0.0.93"), node("east", "e2", "127.0.0.94")];
    let mut west = [node("west", "w1", "127.0.0.95"), node("west", "w2", "127.0.0.96")];
    let all: Vec<String> = east.iter().chain(west.iter()).map(|b| b.addr().to_string()).collect();
    let all = all.join(",");
    let client = connect(&all);
    client.create_topic(TOPIC, QUEUES, 0).unwrap();
    let moving = (0..QUEUES).find(|q| client.owner(TOPIC, *q).unwrap().starts_with("127.0.0.93:")).unwrap();
    let big = producer_to(&client, moving);
    let mut acked: Vec<(String, SendResult)> = (0..600)
        .map(|i| {
            let value = format!("big-{i}-{}", noise(i, 10 << 10));
            (value.clone(), big.send(TOPIC, &Message::new(value)).unwrap())
        })
        .collect();
    drop(big);
    common::etcd::wait_for_isr_of(&etcd.url, "east", 2);
    common::etcd::wait_for_isr_of(&etcd.url, "west", 2);

    // To west, its source's leader killed while it copies.
    let stop = Arc::new(AtomicBool::new(false));
    let load = keep_sending(client.clone(), moving, stop.clone());
    let queue = moving.to_string();
    let to_west = ["cluster", "move", "--cluster", &etcd.url, "--topic", TOPIC, "--queue", &queue, "--to", "west"];
    let mover = spawn_ringmq(&to_west);
    std::thread::sleep(Duration::from_secs(2));
    let listed = moves(&etcd);
    assert!(listed.contains("to=west/") && listed.contains("frozen=false"), "still copying: {listed:?}");
    east[0].kill9();
    east[0].restart();
    let moved = mover.wait_with_output().expect("run ringmq");
    assert!(moved.status.success(), "{}", String::from_utf8_lossy(&moved.stderr));
    assert!(String::from_utf8_lossy(&moved.stdout).contains("broker_group=west"));
    common::etcd::wait_for_isr_of(&etcd.url, "east", 2);

    // Back to east, its target's leader killed while the queue is frozen:
    // west's follower paused, west cannot commit the freeze, so the queue
    // stays frozen until west's leader drops it from the in-sync set.
    west[1].pause();
    let to_east = ["cluster", "move", "--cluster", &etcd.url, "--topic", TOPIC, "--queue", &queue, "--to", "east"];
    let mover = spawn_ringmq(&to_east);
    wait_for_moves(&etcd, "the move back freezes", |l| l.contains("to=east/") && l.contains("frozen=true"));
    let target = if leader_of(&etcd, "east") == "e1" { 0 } else { 1 };
    east[target].kill9();
    west[1].resume();
    east[target].restart();
    let moved = mover.wait_with_output().expect("run ringmq");
    assert!(moved.status.success(), "{}", String::from_utf8_lossy(&moved.stderr));
    assert!(String::from_utf8_lossy(&moved.stdout).contains("broker_group=east"));
    std::thread::sleep(Duration::from_secs(1));
    stop.store(true, Ordering::Relaxed);
    acked.extend(load.join().unwrap());
    assert!(acked.len() > 600, "the producer was acknowledged during the moves");

    // Every acknowledged record is on east, at its offset.
    let fresh = connect(&all);
    assert!(fresh.owner(TOPIC, moving).unwrap().starts_with("127.0.0.9"), "east serves it");
    let (start, end) = fresh.list_offsets(TOPIC, moving).unwrap();
    assert_eq!(start, 0);
    assert_reads(&fresh, TOPIC, Some(&[moving]), end, &acked, "every stored record is read once");
    drop((fresh, client));
    for b in east.iter_mut().chain(west.iter_mut()) {
        b.stop();
    }
}

/// Groups b and c join a cluster whose topic lives in group a alone: the
/// dry run plans each group a third of the load (stored bytes as group a's
/// leader reports them) and moves nothing; the rebalance then moves the
/// queues, and every record stays readable.
#[test]
fn a_rebalance_evens_out_groups_that_joined_after_a_topic_was_made() {
    let _cluster = one_cluster();
    let dir = tempfile::tempdir().unwrap();
    let etcd = common::etcd::Etcd::start(&dir.path().join("etcd"));
    let node = |group: &str, ip: &str| group_node(&etcd, dir.path(), (group, group, ip), &["--load-report-ms", "300"]);
    let mut a = node("a", "127.0.0.97");
    let client = connect(a.addr());
    client.create_topic("skew", 7, 0).unwrap();
    let mut acked = Vec::new();
    for q in 0..7 {
        let p = producer_to(&client, q);
        for i in 0..50 {
            let value = format!("q{q}-{i}-{}", noise(u64::from(q) * 100 + i, 1000));
            acked.push((value.clone(), p.send("skew", &Message::new(value)).unwrap()));
        }
    }
    // Queue 6 emptied: it holds no record, its offsets at 50.
    assert_eq!(client.delete_records("skew", 6, None).unwrap(), 50);
    acked.retain(|(_, r)| r.queue != 6);
    let mut b = node("b", "127.0.0.98");
    let mut c = node("c", "127.0.0.99");
    let plan = |dry: bool| {
        let mut args = vec!["cluster", "rebalance", "--cluster", &etcd.url];
        if dry {
            args.push("--dry-run");
        }
        let out = ringmq(&args);
        let said = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.status.success(), "{said}{}", String::from_utf8_lossy(&out.stderr));
        said
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    let planned = loop {
        let said = plan(true);
        // Group a's leader has reported what its queues hold, queue 6 emptied
        // (a report made before the DeleteRecords still counts its records).
        let reported = said.lines().any(|l| l.starts_with("broker_group=a ") && !l.contains(" bytes=0->"));
        if reported && said.contains("within_10%_of_mean=yes") {
            break said;
        }
        assert!(Instant::now() < deadline, "no even plan from fresh loads within a minute: {said}");
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(planned.contains("moves=4 planned within_10%_of_mean=yes"), "{planned}");
    for g in ["a", "b", "c"] {
        assert!(planned.contains(&format!("broker_group={g} queues=")), "{planned}");
    }
    let held = |g: &str| planned.lines().find(|l| l.starts_with(&format!("broker_group={g} "))).unwrap().to_string();
    assert!(held("a").contains("queues=7->3") && held("b").contains("queues=0->2"), "{planned}");
    let fresh = connect(&format!("{},{},{}", a.addr(), b.addr(), c.addr()));
    assert!((0..7).all(|q| fresh.owner("skew", q).unwrap().starts_with("127.0.0.97:")), "a dry run moves nothing");
    assert!(moves(&etcd).is_empty());

    let done = plan(false);
    assert!(done.contains("moves=4 moved within_10%_of_mean=yes"), "{done}");
    let after = connect(&format!("{},{},{}", a.addr(), b.addr(), c.addr()));
    let led = |ip: &str| (0..6).filter(|q| after.owner("skew", *q).unwrap().starts_with(&format!("{ip}:"))).count();
    assert_eq!((led("127.0.0.97"), led("127.0.0.98"), led("127.0.0.99")), (2, 2, 2), "{done}");

    // The empty queue moves too, its offsets going on from 50.
    let empty = ["cluster", "move", "--cluster", &etcd.url, "--topic", "skew", "--queue", "6", "--to", "c"];
    let moved = ringmq(&empty);
    assert!(moved.status.success(), "{}", String::from_utf8_lossy(&moved.stderr));
    let after = connect(&format!("{},{},{}", a.addr(), b.addr(), c.addr()));
    assert!(after.owner("skew", 6).unwrap().starts_with("127.0.0.99:"));
    assert_eq!(after.list_offsets("skew", 6).unwrap(), (50, 50));
    let sent = producer_to(&after, 6).send("skew", &Message::new("after-the-move")).unwrap();
    assert_eq!(sent.offset, 50);
    acked.push(("after-the-move".to_string(), sent));
    assert_reads(&after, "skew", None, acked.len() as u64, &acked, "every acknowledged record is read");
    drop((after, fresh, client));
    for n in [&mut a, &mut b, &mut c] {
        n.stop();
    }
}

/// Partitions that hold committed and aborted Kafka transactions move to a
/// broker group that joined later: read_committed readers of the new owner
/// still drop the aborted records and read the committed ones in order.
#[test]
fn partitions_holding_kafka_transactions_move_with_what_each_isolation_reads() {
    let _cluster = one_cluster();
    let dir = tempfile::tempdir().unwrap();
    let etcd = common::etcd::Etcd::start(&dir.path().join("etcd"));
    let ips = ["127.0.0.101", "127.0.0.102"];
    let (native, kafka) = (shared_port_pair(&ips), shared_port_pair(&ips));
    let admin = shared_port_pair(&ips);
    let node = |group: &str, ip: &str| kafka_node(&etcd, dir.path(), group, (ip, native, kafka, admin));
    let mut east = node("east", ips[0]);
    let bootstrap = format!("{}:{kafka}", ips[0]);
    let phase = |phase: &str, bootstrap: &str| {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/kafka_clients/python_confluent.py");
        let out = common::tools::python(&["confluent_kafka"]).args([script, bootstrap, phase]).output().unwrap();
        let said = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.status.success(), "{said}{}", String::from_utf8_lossy(&out.stderr));
        said
    };
    assert!(phase("transactional", &bootstrap).contains("read_committed read 12 of 16 in order"));

    let mut west = node("west", ips[1]);
    for partition in ["0", "1"] {
        let args =
            ["cluster", "move", "--cluster", &etcd.url, "--topic", "ctx-out", "--queue", partition, "--to", "west"];
        let moved = ringmq(&args);
        assert!(moved.status.success(), "{}", String::from_utf8_lossy(&moved.stderr));
    }
    let client = connect(&format!("{},{}", east.addr(), west.addr()));
    for q in 0..2 {
        assert!(client.owner("ctx-out", q).unwrap().starts_with(&format!("{}:", ips[1])), "west leads {q}");
    }
    let both = format!("{bootstrap},{}:{kafka}", ips[1]);
    assert!(phase("transactional_read", &both).contains("read_committed 12 of 16 in order"));
    drop(client);
    east.stop();
    west.stop();
}

/// Every record of queue 0 of `topic` from its start, read until `done`
/// says the read is what it waits for (within a minute).
fn read_until(
    client: &Arc<Client>,
    topic: &str,
    what: &str,
    done: impl Fn(&[ConsumedMessage]) -> bool,
) -> Vec<ConsumedMessage> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let mut reader = Consumer::new(client.clone(), None);
        let got = match reader.assign(topic, &[0], StartFrom::Earliest) {
            Ok(()) => consume(&mut reader, usize::MAX, Duration::from_secs(2)),
            Err(_) => Vec::new(),
        };
        if done(&got) {
            return got;
        }
        assert!(Instant::now() < deadline, "{what} within a minute: {} records read", got.len());
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// Sends keyed records `from..to` (20 keys) to queue 0 of "kv"; notes each at its offset in `sent`.
fn send(sent: &mut Vec<(u64, Message)>, from: u32, to: u32, producer: &Producer) {
    let pad = "x".repeat(900);
    for i in from..to {
        let m = Message::new(format!("v{i}-{pad}")).with_key(format!("k{}", i % 20));
        sent.push((producer.send("kv", &m).unwrap().offset, m));
    }
}

/// A compacted queue moves with its compacted part: the target reads it as
/// the source did, gaps and all, finds its keys, and so does the target's
/// follower once its leader is killed.
#[test]
fn a_compacted_queue_moves_with_its_compacted_part_which_the_targets_follower_holds_too() {
    let _cluster = one_cluster();
    let dir = tempfile::tempdir().unwrap();
    let etcd = common::etcd::Etcd::start(&dir.path().join("etcd"));
    let compacting = ["--segment-mib", "2", "--batch-bytes-max", "262144", "--compaction-check-ms", "200"];
    let node = |group: &str, name: &str, ip: &str| group_node(&etcd, dir.path(), (group, name, ip), &compacting);
    let mut east = node("east", "e1", "127.0.0.103");
    let client = connect(east.addr());
    let configs = [("cleanup.policy", "compact"), ("min.cleanable.dirty.ratio", "0.01"), ("delete.retention.ms", "0")]
        .map(|(n, v)| (n.to_string(), v.to_string()));
    client.create_topic_with_configs("kv", 1, 0, &configs).unwrap();
    let producer = producer_to(&client, 0);
    let mut sent: Vec<(u64, Message)> = Vec::new();
    send(&mut sent, 0, 3_000, &producer);
    // Compacted on east (the sealed segments: about a third of the records are left).
    let on_east = read_until(&client, "kv", "east compacts the queue", |got| {
        got.len() < 1_500 && got.last().is_some_and(|m| m.offset == 2_999)
    })
    .len();
    send(&mut sent, 3_000, 3_200, &producer);
    drop(producer);

    let mut west = [node("west", "w1", "127.0.0.104"), node("west", "w2", "127.0.0.105")];
    common::etcd::wait_for_isr_of(&etcd.url, "west", 2);
    let moved = ringmq(&["cluster", "move", "--cluster", &etcd.url, "--topic", "kv", "--queue", "0", "--to", "west"]);
    assert!(moved.status.success(), "{}", String::from_utf8_lossy(&moved.stderr));
    let all = [east.addr(), west[0].addr(), west[1].addr()].join(",");
    let client = connect(&all);
    assert!(client.owner("kv", 0).unwrap().starts_with("127.0.0.10"), "west serves it");
    send(&mut sent, 3_200, 3_300, &producer_to(&client, 0));
    assert_eq!(client.list_offsets("kv", 0).unwrap(), (0, 3_300), "the queue keeps its start and end");

    // As sent at each offset; every key's latest there; the part's gaps kept.
    let by_offset: std::collections::HashMap<u64, &Message> = sent.iter().map(|(o, m)| (*o, m)).collect();
    let mut latest = std::collections::HashMap::new();
    for (offset, m) in &sent {
        latest.insert(m.key.clone().unwrap(), *offset);
    }
    let whole = |got: &[ConsumedMessage]| {
        got.last().is_some_and(|m| m.offset == 3_299) && latest.values().all(|o| got.iter().any(|m| m.offset == *o))
    };
    let check = |got: &[ConsumedMessage], what: &str| {
        assert!(got.windows(2).all(|w| w[0].offset < w[1].offset), "{what}: offsets only go up");
        for m in got {
            let want = by_offset[&m.offset];
            assert_eq!((&m.key, &m.value), (&want.key, &want.value), "{what}: offset {} as sent", m.offset);
        }
        assert!(got.len() <= on_east + 300, "{what}: the compacted part's gaps are kept ({} records)", got.len());
    };
    let on_west = read_until(&client, "kv", "west serves the whole queue", whole);
    check(&on_west, "west's leader");
    let found = client.find_by_key("kv", b"k7").unwrap().messages;
    assert!(found.iter().any(|m| m.offset == latest[&b"k7".to_vec()]), "a key's latest is found on west: {found:?}");

    // West's follower built the part too: it serves the same once it leads.
    let led = if leader_of(&etcd, "west") == "w1" { 0 } else { 1 };
    west[led].kill9();
    let after = read_until(&client, "kv", "west's new leader serves the whole queue", whole);
    assert_eq!(
        after.iter().map(|m| m.offset).collect::<Vec<_>>(),
        on_west.iter().map(|m| m.offset).collect::<Vec<_>>(),
        "the same records after the fail-over"
    );
    check(&after, "west's new leader");
    drop(client);
    east.stop();
    west[1 - led].stop();
}
