//! The Kafka listener in cluster mode: two broker groups on one etcd, a node
//! each, both with `--kafka-listen`. A Kafka client that knows one node sees
//! every leader's shards as brokers, produces to partitions of both groups,
//! reads them back, and a consumer group finds its coordinator in either.

mod common;

use common::{free_port_pair, Broker, ChildGuard};
use std::io::Write;
use std::process::Stdio;

const TOPIC: &str = "kc";
const MESSAGES: usize = 400;

/// A port pair free on every one of `ips` (each node listens on its own IP
/// at the same ports, so Kafka and native ports keep one distance).
fn shared_port_pair(ips: &[&str]) -> u16 {
    loop {
        let port = free_port_pair(ips[0]);
        let free = |ip: &str| (0..2).all(|k| std::net::TcpListener::bind((ip, port + k)).is_ok());
        if ips.iter().all(|ip| free(ip)) {
            return port;
        }
    }
}

#[test]
fn kafka_clients_of_one_node_reach_the_partitions_and_coordinators_of_every_group() {
    let dir = tempfile::tempdir().unwrap();
    let etcd = common::etcd::Etcd::start(&dir.path().join("etcd"));
    let ips = ["127.0.0.81", "127.0.0.82"];
    let (native, kafka) = (shared_port_pair(&ips), shared_port_pair(&ips));
    let node = |group: &str, name: &str, ip: &str| {
        let listen = format!("{ip}:{native}");
        let kafka_listen = format!("{ip}:{kafka}");
        let args = ["--cluster", &etcd.url, "--group", group, "--node", name, "--lease-ms", "1000"];
        let mut args: Vec<&str> = args.to_vec();
        args.extend(["--min-insync", "1", "--kafka-listen", &kafka_listen]);
        Broker::start_listening(&dir.path().join(name), &listen, &args)
    };
    let east = node("east", "e1", ips[0]);
    let _west = node("west", "w1", ips[1]);
    east.client().create_topic(TOPIC, 8, 0).unwrap();
    let bootstrap = format!("{}:{kafka}", ips[0]);

    let out = common::tools::command("kcat").args(["-b", &bootstrap, "-L", "-t", TOPIC]).output().expect("run kcat");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains(" 4 brokers:"), "{text}");
    for ip in ips {
        for port in [kafka, kafka + 1] {
            assert!(text.contains(&format!("at {ip}:{port}")), "the shards of both leaders are brokers: {text}");
        }
    }
    assert!(text.contains(&format!("topic \"{TOPIC}\" with 8 partitions:")), "{text}");

    let mut producer = common::tools::command("kcat")
        .args(["-b", &bootstrap, "-P", "-t", TOPIC, "-K:", "-X", "acks=all"])
        .stdin(Stdio::piped())
        .spawn()
        .expect("run kcat");
    let lines: String = (0..MESSAGES).map(|i| format!("k{i}:v{i}\n")).collect();
    producer.stdin.take().unwrap().write_all(lines.as_bytes()).unwrap();
    assert!(producer.wait().unwrap().success(), "kcat -P");

    let read = common::tools::command("kcat")
        .args(["-b", &bootstrap, "-C", "-t", TOPIC, "-o", "beginning", "-e", "-f", "%p %k %s\\n"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&read.stdout);
    let partitions: std::collections::BTreeSet<&str> = text.lines().filter_map(|l| l.split(' ').next()).collect();
    assert_eq!(text.lines().count(), MESSAGES, "every message read back");
    assert_eq!(partitions.len(), 8, "spread over the partitions of both groups: {partitions:?}");
    let total: u64 = (0..8).map(|q| east.client().list_offsets(TOPIC, q).unwrap().1).sum();
    assert_eq!(total, MESSAGES as u64, "the native SDK counts the same messages");

    // A group member: its coordinator is one shard of the cluster, in either group.
    let (out_file, err_file) = (dir.path().join("g.out"), dir.path().join("g.err"));
    let _member = ChildGuard(
        common::tools::command("kcat")
            .args(["-b", &bootstrap, "-G", "kc-group", TOPIC, "-u", "-X", "auto.offset.reset=earliest"])
            .args(["-f", "%p %o\\n"])
            .stdout(std::fs::File::create(&out_file).unwrap())
            .stderr(std::fs::File::create(&err_file).unwrap())
            .spawn()
            .expect("run kcat"),
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(90);
    while std::fs::read_to_string(&out_file).unwrap_or_default().lines().count() < MESSAGES {
        let err = std::fs::read_to_string(&err_file).unwrap_or_default();
        assert!(std::time::Instant::now() < deadline, "the group member read too little; stderr ends {:?}", {
            &err[err.len().saturating_sub(600)..]
        });
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}
