//! The Kafka listener in cluster mode: two broker groups on one etcd, a node
//! each, both with `--kafka-listen`. A Kafka client that knows one node sees
//! every leader's shards as brokers, produces to partitions of both groups,
//! reads them back, and a consumer group finds its coordinator in either.

mod common;

use common::{kafka_failover, one_cluster, shared_port_pair, Broker, ChildGuard};
use std::io::Write;
use std::process::Stdio;

const TOPIC: &str = "kc";
const MESSAGES: usize = 400;

#[test]
fn kafka_clients_of_one_node_reach_the_partitions_and_coordinators_of_every_group() {
    let dir = tempfile::tempdir().unwrap();
    let etcd = common::etcd::Etcd::start(&dir.path().join("etcd"));
    let ips = ["127.0.0.81", "127.0.0.82"];
    let (native, kafka) = (shared_port_pair(&ips), shared_port_pair(&ips));
    let node = |group: &str, name: &str, ip: &str| {
        let listen = format!("{ip}:{native}");
        let kafka_listen = format!("{ip}:{kafka}");
        let args = ["--cluster", &etcd.url, "--broker-group", group, "--node", name, "--lease-ms", "1000"];
        let mut args: Vec<&str> = args.to_vec();
        args.extend(["--insync-min", "1", "--kafka-listen", &kafka_listen]);
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
    assert_one_cluster_id(&etcd.url, &[&bootstrap, &format!("{}:{kafka}", ips[1])]);

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

/// Every node's Metadata and DescribeCluster give one cluster id, the one
/// `ringmq cluster status` reads from etcd, and DescribeCluster the four
/// shards.
fn assert_one_cluster_id(etcd_url: &str, nodes: &[&str]) {
    use common::kafka::{call, connect};
    use kafka_protocol::messages::{ApiKey, DescribeClusterRequest, DescribeClusterResponse};
    use kafka_protocol::messages::{MetadataRequest, MetadataResponse};
    let mut ids = Vec::new();
    for node in nodes {
        let mut stream = connect(node);
        let metadata: MetadataResponse = call(&mut stream, ApiKey::Metadata, 12, &MetadataRequest::default());
        let described: DescribeClusterResponse =
            call(&mut stream, ApiKey::DescribeCluster, 1, &DescribeClusterRequest::default().with_endpoint_type(1));
        assert_eq!(described.error_code, 0, "{described:?}");
        assert_eq!(described.brokers.len(), 4, "{described:?}");
        assert_eq!(metadata.cluster_id.as_deref(), Some(described.cluster_id.as_str()), "{node}");
        ids.push(described.cluster_id.to_string());
    }
    assert!(ids[0].len() == 22 && ids.iter().all(|id| *id == ids[0]), "one cluster, one id: {ids:?}");
    let status = common::etcd::cluster_status(etcd_url);
    assert_eq!(status.first(), Some(&format!("cluster_id={}", ids[0])), "{status:?}");
}

/// Group g1 of nodes a, b, c, one on each of `ips` at the same ports, each
/// with a Kafka listener: the nodes and the Kafka port of shard 0.
fn kafka_group(
    dir: &std::path::Path,
    etcd: &common::etcd::Etcd,
    ips: &[&str; 3],
    extra: &[&str],
) -> (Vec<Broker>, u16) {
    kafka_group_preferring(dir, etcd, ips, extra, None)
}

/// `kafka_group`, node `preferred` started with `--preferred-leader`.
fn kafka_group_preferring(
    dir: &std::path::Path,
    etcd: &common::etcd::Etcd,
    ips: &[&str; 3],
    extra: &[&str],
    preferred: Option<&str>,
) -> (Vec<Broker>, u16) {
    let (native, kafka) = (shared_port_pair(ips), shared_port_pair(ips));
    let start = |(name, ip): (&str, &&str)| {
        let (listen, kafka_listen) = (format!("{ip}:{native}"), format!("{ip}:{kafka}"));
        let mut args =
            vec!["--cluster", &etcd.url, "--broker-group", "g1", "--node", name, "--kafka-listen", &kafka_listen];
        args.extend(extra);
        if preferred == Some(name) {
            args.push("--preferred-leader");
        }
        Broker::start_listening(&dir.join(name), &listen, &args)
    };
    (["a", "b", "c"].into_iter().zip(ips).map(start).collect(), kafka)
}

/// The index in `names` of the node g1 elects after its first one (within 60 s).
fn successor(etcd: &common::etcd::Etcd, names: &[&str]) -> usize {
    let new_leader = |lines: &[String]| {
        let line = lines.iter().find(|l| l.starts_with("broker_group=g1 leader="))?;
        let leader = line.split(' ').nth(1)?.strip_prefix("leader=")?;
        names.iter().position(|n| *n == leader).filter(|&i| i != 0)
    };
    let limit = std::time::Duration::from_secs(60);
    let lines = common::etcd::wait_for_status(&etcd.url, limit, |l| new_leader(l).is_some());
    new_leader(&lines).unwrap_or_else(|| panic!("no new leader: {lines:?}"))
}

/// The answers on a raw Kafka connection, by correlation id, until it is
/// closed (true) or nothing came for 30 s (false: a request left hanging).
fn answers(stream: &mut std::net::TcpStream, version: i16) -> (Vec<i32>, bool) {
    use kafka_protocol::messages::{ApiKey, ResponseHeader};
    use kafka_protocol::protocol::Decodable;
    let mut got = Vec::new();
    loop {
        let mut frame = match common::kafka::next_frame(stream) {
            Ok(frame) => frame,
            Err(e) => {
                let hung = matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut);
                return (got, !hung);
            }
        };
        let header = ResponseHeader::decode(&mut frame, ApiKey::Produce.response_header_version(version)).unwrap();
        got.push(header.correlation_id);
    }
}

/// A leader paused past its lease, as Kafka clients see it: every Kafka
/// request it had read, or that waited in its sockets, is answered once it
/// runs again, or its connection is closed (a Kafka client retries both),
/// and the answers come in request order; a librdkafka producer (acks=all,
/// idempotent) carries on through the new leader, and every message it had
/// acknowledged is stored once, at the partition and offset of its ack.
#[test]
#[ignore = "fails about 1 run in 4: librdkafka can go 60 s without finding the new leader (it knows only the paused \
            leader's broker ids, and followers serve no Kafka listener to ask), and an idempotent message is \
            sometimes stored twice across the fail-over; both open in issue 34's note"]
fn a_paused_leaders_kafka_requests_are_answered_and_kafka_producers_carry_on() {
    use common::kafka::{batch, produce_body, records, request_numbered, send_frame};
    use kafka_protocol::messages::ApiKey;
    use std::collections::HashMap;
    use std::time::{Duration, SystemTime};
    const PAUSED: &str = "paused";
    const PRODUCE_VERSION: i16 = 9;
    let _cluster = one_cluster();
    let dir = tempfile::tempdir().unwrap();
    let etcd = common::etcd::Etcd::start(&dir.path().join("etcd"));
    let ips = ["127.0.0.84", "127.0.0.85", "127.0.0.86"];
    let extra = ["--lease-ms", "2000", "--replica-ack-timeout-ms", "3000"];
    let (nodes, kafka) = kafka_group(dir.path(), &etcd, &ips, &extra);
    let client = nodes[0].client();
    client.create_topic(PAUSED, 4, 0).unwrap();
    let shards = client.topic(PAUSED).unwrap().queue_shards;
    drop(client);
    common::etcd::wait_for_isr_of(&etcd.url, "g1", 3);

    let bootstrap = ips.map(|ip| format!("{ip}:{kafka}")).join(",");
    let (acked_file, read_file) = (dir.path().join("acked"), dir.path().join("read"));
    let mut producer = kafka_failover::produce(&bootstrap, PAUSED, 25, &acked_file);
    std::thread::sleep(Duration::from_secs(5));

    // Raw produce requests to the leader's shards: some it reads before
    // the pause, the rest wait in its sockets.
    let mut raw: Vec<std::net::TcpStream> = (0..4)
        .map(|partition| {
            let addr = format!("{}:{}", ips[0], kafka + shards[partition] as u16);
            common::kafka::connect(&addr)
        })
        .collect();
    let send = |stream: &mut std::net::TcpStream, partition: usize, correlations: std::ops::Range<i32>| {
        for c in correlations {
            let body = produce_body(PAUSED, partition as i32, batch(&records(1, None)));
            send_frame(stream, &request_numbered(ApiKey::Produce, PRODUCE_VERSION, c, &body));
        }
    };
    raw.iter_mut().enumerate().for_each(|(p, s)| send(s, p, 1..6));
    nodes[0].pause();
    raw.iter_mut().enumerate().for_each(|(p, s)| send(s, p, 6..11));
    // Past the 2 s lease (etcd's least): the others elect a new leader.
    std::thread::sleep(Duration::from_secs(4));
    nodes[0].resume();
    let resumed = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs_f64();

    let (mut answered, mut closed) = (0, 0);
    for stream in &mut raw {
        let (got, ended) = answers(stream, PRODUCE_VERSION);
        assert!(ended, "a request to the paused leader was left unanswered on an open connection: answers {got:?}");
        assert_eq!(got, (1..=got.len() as i32).collect::<Vec<_>>(), "answers in request order");
        answered += got.len();
        closed += usize::from(got.len() < 10);
    }

    kafka_failover::wait(&mut producer, Duration::from_secs(180));
    let acked = kafka_failover::acked(&acked_file);
    let after = acked.iter().filter(|a| a.at > resumed).count();
    assert!(after > 0, "no produce was acknowledged after the pause");

    let stored = kafka_failover::read(&bootstrap, PAUSED, &read_file);
    let mut places: HashMap<&str, Vec<(u32, u64)>> = HashMap::new();
    stored.iter().for_each(|(at, value)| places.entry(value).or_default().push(*at));
    for kafka_failover::Acked { value, partition, offset, .. } in &acked {
        let at = stored.get(&(*partition, *offset));
        let read = stored.len();
        assert_eq!(
            at,
            Some(value),
            "acknowledged {value} is at {partition}/{offset} (read {read}; found at {:?})",
            places.get(value.as_str())
        );
        let stored_at = &places[value.as_str()];
        assert_eq!(
            stored_at.len(),
            1,
            "the idempotent producer's {value} (acknowledged at {partition}/{offset}) is stored at {stored_at:?}"
        );
    }
    eprintln!(
        "raw requests to the paused leader: {answered} of 40 answered, {closed} of 4 connections closed for the rest; \
         librdkafka acknowledged {} messages, {after} after the resume, each stored once where acknowledged",
        acked.len()
    );
}

/// An idempotent producer's batch that a leader stored and acknowledged,
/// sent again to the leader elected after it is killed (a Kafka client
/// whose answer was lost retries so): it is answered with the offset it was
/// stored at and not stored twice, and the producer's next batch follows it.
#[test]
fn an_idempotent_kafka_retry_to_a_new_leader_is_answered_where_the_batch_was_stored() {
    use common::kafka::{batch, produce_body, read_frame, records, request, send_frame};
    use kafka_protocol::messages::{ApiKey, ProduceResponse, ResponseHeader};
    use kafka_protocol::protocol::Decodable;
    use std::time::{Duration, Instant};
    const TOPIC: &str = "retried";
    const PRODUCER: i64 = 0x4242_0000;
    let _cluster = one_cluster();
    let dir = tempfile::tempdir().unwrap();
    let etcd = common::etcd::Etcd::start(&dir.path().join("etcd"));
    let ips = ["127.0.0.87", "127.0.0.88", "127.0.0.89"];
    let names = ["a", "b", "c"];
    let (mut nodes, kafka) = kafka_group(dir.path(), &etcd, &ips, &["--lease-ms", "1000"]);
    let client = nodes[0].client();
    client.create_topic(TOPIC, 1, 0).unwrap();
    let port = kafka + client.topic(TOPIC).unwrap().queue_shards[0] as u16;
    drop(client);
    common::etcd::wait_for_isr_of(&etcd.url, "g1", 3);

    // (error code, base offset) of `first`'s batch of 3 sent to the node at
    // `ip`; None while the node does not take Kafka connections.
    let produce = |ip: &str, first: i32| {
        let body = produce_body(TOPIC, 0, batch(&records(3, Some((PRODUCER, 0, first)))));
        let mut stream = std::net::TcpStream::connect(format!("{ip}:{port}")).ok()?;
        send_frame(&mut stream, &request(ApiKey::Produce, 9, &body));
        let mut frame = read_frame(&mut stream)?;
        ResponseHeader::decode(&mut frame, ApiKey::Produce.response_header_version(9)).unwrap();
        let answer = ProduceResponse::decode(&mut frame, 9).unwrap();
        let p = &answer.responses[0].partition_responses[0];
        Some((p.error_code, p.base_offset))
    };
    assert_eq!(produce(ips[0], 0), Some((0, 0)), "the first batch is stored at 0");
    assert_eq!(produce(ips[0], 3), Some((0, 3)));
    nodes[0].kill9();

    let ip = ips[successor(&etcd, &names)];
    // The retry of the second batch, as the client repeats it until the new leader serves the partition.
    let deadline = Instant::now() + Duration::from_secs(60);
    let retried = loop {
        let answer = produce(ip, 3);
        if answer.is_some_and(|(code, _)| code == 0) || Instant::now() > deadline {
            break answer;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(retried, Some((0, 3)), "the retry is answered where the batch was stored");
    assert_eq!(produce(ip, 6), Some((0, 6)), "the next batch follows the stored ones");
    let survivor = nodes.iter().position(|n| n.addr().starts_with(ip)).unwrap();
    assert_eq!(nodes[survivor].client().list_offsets(TOPIC, 0).unwrap().1, 9, "three batches stored, none twice");
}

/// DeleteRecords on a leader moves the partition's start in the replicated
/// log: after the leader's kill -9 the new leader starts the partition
/// where the client asked, and the deleted records do not come back.
#[test]
fn records_deleted_on_a_leader_stay_deleted_after_a_fail_over() {
    use common::kafka::{batch, call, connect, produce_body, records};
    use kafka_protocol::messages::delete_records_request::{DeleteRecordsPartition, DeleteRecordsTopic};
    use kafka_protocol::messages::{ApiKey, DeleteRecordsRequest, DeleteRecordsResponse, ProduceResponse, TopicName};
    use kafka_protocol::protocol::StrBytes;
    use std::time::Duration;
    const TOPIC: &str = "trimmed";
    let _cluster = one_cluster();
    let dir = tempfile::tempdir().unwrap();
    let etcd = common::etcd::Etcd::start(&dir.path().join("etcd"));
    let ips = ["127.0.0.90", "127.0.0.91", "127.0.0.92"];
    let names = ["a", "b", "c"];
    let (mut nodes, kafka) = kafka_group(dir.path(), &etcd, &ips, &["--lease-ms", "1000"]);
    let client = nodes[0].client();
    client.create_topic(TOPIC, 2, 0).unwrap();
    let shard = client.topic(TOPIC).unwrap().queue_shards[0];
    drop(client);
    common::etcd::wait_for_isr_of(&etcd.url, "g1", 3);
    let mut leader = connect(&format!("{}:{}", ips[0], kafka + shard as u16));
    let produced: ProduceResponse =
        call(&mut leader, ApiKey::Produce, 9, &produce_body(TOPIC, 0, batch(&records(10, None))));
    assert_eq!(produced.responses[0].partition_responses[0].error_code, 0, "stored on every in-sync node");

    let partition = DeleteRecordsPartition::default().with_partition_index(0).with_offset(6);
    let topic = DeleteRecordsTopic::default()
        .with_name(TopicName(StrBytes::from_static_str(TOPIC)))
        .with_partitions(vec![partition]);
    let request = DeleteRecordsRequest::default().with_topics(vec![topic]).with_timeout_ms(10_000);
    let deleted: DeleteRecordsResponse = call(&mut leader, ApiKey::DeleteRecords, 2, &request);
    let answer = &deleted.topics[0].partitions[0];
    assert_eq!((answer.error_code, answer.low_watermark), (0, 6), "the start moved where asked");
    // The record of the new start reaches the followers with the log: a
    // produce after it is acknowledged only once they hold it.
    let produced: ProduceResponse =
        call(&mut leader, ApiKey::Produce, 9, &produce_body(TOPIC, 0, batch(&records(1, None))));
    assert_eq!(produced.responses[0].partition_responses[0].error_code, 0);
    nodes[0].kill9();

    let survivor = successor(&etcd, &names);
    // The new leader restarts in its role before it serves clients.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let offsets = loop {
        let config = ringmq::client::ClientConfig::new(nodes[survivor].addr());
        match ringmq::client::Client::connect(config).and_then(|c| c.list_offsets(TOPIC, 0)) {
            Ok(offsets) => break offsets,
            Err(e) => assert!(std::time::Instant::now() < deadline, "the new leader serves no clients: {e}"),
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(offsets, (6, 11), "the new leader starts the partition where DeleteRecords put it");
}

/// Kafka's preferred-leader election hands the group's lead to the node
/// started with `--preferred-leader`, once for all the partitions it
/// names; then none is needed, and an unclean one never is.
#[test]
fn a_preferred_leader_election_hands_the_groups_lead_to_its_preferred_node() {
    use common::kafka::{call, connect};
    use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
    use kafka_protocol::messages::{ApiKey, ElectLeadersRequest, ElectLeadersResponse, TopicName};
    use kafka_protocol::protocol::StrBytes;
    use std::time::{Duration, Instant};
    const TOPIC: &str = "elected";
    const NOT_NEEDED: i16 = 84;
    let _cluster = one_cluster();
    let dir = tempfile::tempdir().unwrap();
    let etcd = common::etcd::Etcd::start(&dir.path().join("etcd"));
    let ips = ["127.0.0.93", "127.0.0.94", "127.0.0.95"];
    let (nodes, kafka) = kafka_group_preferring(dir.path(), &etcd, &ips, &["--lease-ms", "1000"], Some("b"));
    nodes[0].client().create_topic(TOPIC, 2, 0).unwrap();
    common::etcd::wait_for_isr_of(&etcd.url, "g1", 3);
    let leader_is = |node: &str| {
        let lines = common::etcd::cluster_status(&etcd.url);
        lines.iter().any(|l| l.starts_with(&format!("broker_group=g1 leader={node} ")))
    };
    let status = common::etcd::cluster_status(&etcd.url);
    assert!(leader_is("a"), "the first node leads: {status:?}");
    assert!(status.iter().any(|l| l.starts_with("broker_group=g1 node=b ") && l.ends_with(" preferred_leader")));

    let elect = |ip: &str, election_type: i8| -> Vec<(i32, i16)> {
        let topic = TopicPartitions::default()
            .with_topic(TopicName(StrBytes::from_static_str(TOPIC)))
            .with_partitions(vec![0, 1]);
        let request = ElectLeadersRequest::default()
            .with_election_type(election_type)
            .with_topic_partitions(Some(vec![topic]))
            .with_timeout_ms(10_000);
        let answer: ElectLeadersResponse =
            call(&mut connect(&format!("{ip}:{kafka}")), ApiKey::ElectLeaders, 2, &request);
        assert_eq!(answer.error_code, 0);
        answer.replica_election_results[0].partition_result.iter().map(|p| (p.partition_id, p.error_code)).collect()
    };
    assert_eq!(elect(ips[0], 0), [(0, 0), (1, 0)], "the election is made for both partitions");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !leader_is("b") {
        assert!(Instant::now() < deadline, "b did not take the lead: {:?}", common::etcd::cluster_status(&etcd.url));
        std::thread::sleep(Duration::from_millis(100));
    }
    // The new leader serves Kafka clients once it has restarted in its role.
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::net::TcpStream::connect(format!("{}:{kafka}", ips[1])).is_err() {
        assert!(Instant::now() < deadline, "b serves no Kafka clients");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(elect(ips[1], 0), [(0, NOT_NEEDED), (1, NOT_NEEDED)], "the preferred node leads already");
    assert_eq!(elect(ips[1], 1), [(0, NOT_NEEDED), (1, NOT_NEEDED)], "an unclean election is never needed");
}

/// The node among `nodes` that serves clients now, once one does, and a client of it.
fn serving(nodes: &[Broker]) -> (usize, std::sync::Arc<ringmq::client::Client>) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        for (i, n) in nodes.iter().enumerate() {
            if let Ok(client) = ringmq::client::Client::connect(ringmq::client::ClientConfig::new(n.addr())) {
                return (i, client);
            }
        }
        assert!(std::time::Instant::now() < deadline, "no node serves clients within 60 s");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// Exactly-once across fail-overs: the consume-transform-produce loop of
/// `common/eos.rs`, killed at 20 random points, against a three-node broker
/// group whose leader is killed with kill -9 (and restarted as a follower)
/// while the loop runs, every fifth round: the transaction coordinator,
/// the open transactions and the pending offsets are taken over from the
/// replicated log, and the output holds every input record exactly once.
#[test]
fn a_transactional_loop_moves_every_record_exactly_once_across_leader_kills() {
    use common::eos::{assert_exactly_once, kill_and_restart, output, LoopClient, IN, OUT};
    let _cluster = one_cluster();
    let dir = tempfile::tempdir().unwrap();
    let etcd = common::etcd::Etcd::start(&dir.path().join("etcd"));
    let ips = ["127.0.0.87", "127.0.0.88", "127.0.0.89"];
    let extra = ["--lease-ms", "2000", "--replica-ack-timeout-ms", "5000"];
    let (mut nodes, kafka) = kafka_group(dir.path(), &etcd, &ips, &extra);
    let (_, client) = serving(&nodes);
    client.create_topic(IN, 2, 0).unwrap();
    client.create_topic(OUT, 2, 0).unwrap();
    drop(client);
    common::etcd::wait_for_isr_of(&etcd.url, "g1", 3);
    let bootstrap = ips.map(|ip| format!("{ip}:{kafka}")).join(",");
    let seed = 0x5eed_0002;
    eprintln!("kill points seeded {seed:#x}");
    let fed = kill_and_restart(LoopClient::Librdkafka, &bootstrap, seed, true, |round| {
        if round % 5 == 4 {
            let (leader, _) = serving(&nodes);
            eprintln!("round {round}: killing the leader, node {leader}");
            nodes[leader].kill9();
            nodes[leader].restart();
            serving(&nodes);
            common::etcd::wait_for_isr_of(&etcd.url, "g1", 3);
        }
    });
    let (_, client) = serving(&nodes);
    assert_exactly_once(&output(client, fed), fed);
}
