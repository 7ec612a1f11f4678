//! The Kafka listener with a stock Kafka client (kcat, librdkafka): its
//! metadata names one broker per shard and every queue as a partition led
//! by the shard that owns it.

mod common;

#[test]
fn kcat_lists_the_brokers_and_the_partitions_of_a_ringmq_topic() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, kafka) = common::kafka_broker(dir.path(), &[]);
    let client = broker.client();
    client.create_topic("orders", 4, 0).unwrap();
    let out = common::tools::command("kcat").args(["-b", &kafka, "-L", "-m", "10"]).output().expect("run kcat");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "kcat -L: {}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains(" 2 brokers:"), "{text}");
    let port: u16 = kafka.rsplit(':').next().unwrap().parse().unwrap();
    assert!(text.contains(&format!("broker 1 at 127.0.0.1:{}", port + 1)), "{text}");
    assert!(text.contains("topic \"orders\" with 4 partitions:"), "{text}");
    let topic = client.topic("orders").unwrap();
    for (q, shard) in topic.queue_shards.iter().enumerate() {
        assert!(text.contains(&format!("partition {q}, leader {shard},")), "queue {q} on shard {shard}: {text}");
    }
}

#[test]
fn kcat_produces_10_000_keyed_messages_that_kcat_and_the_native_sdk_read_back() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let (broker, kafka) = common::kafka_broker(dir.path(), &[]);
    let client = broker.client();
    client.create_topic("orders", 4, 0).unwrap();
    let mut producer = common::tools::command("kcat")
        .args(["-b", &kafka, "-P", "-t", "orders", "-K:"])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .expect("run kcat");
    let lines: String = (0..10_000).map(|i| format!("k{i}:v{i}\n")).collect();
    producer.stdin.take().unwrap().write_all(lines.as_bytes()).unwrap();
    assert!(producer.wait().unwrap().success(), "kcat -P");

    let out = common::tools::command("kcat")
        .args(["-b", &kafka, "-C", "-t", "orders", "-o", "beginning", "-e", "-f", "%p %o %k %s\\n"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let mut got: Vec<(u32, u64, String, String)> = text
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            (f[0].parse().unwrap(), f[1].parse().unwrap(), f[2].to_string(), f[3].to_string())
        })
        .collect();
    got.sort();
    assert_eq!(got.len(), 10_000, "kcat reads back every message");
    assert!(got.iter().all(|(_, _, k, v)| k[1..] == v[1..]), "keys and values belong together");

    // The native SDK sees the same messages at the same offsets.
    let mut consumer = ringmq::client::Consumer::new(client.clone(), None);
    consumer.assign_all("orders", ringmq::client::StartFrom::Earliest).unwrap();
    let native = common::consume(&mut consumer, 10_000, std::time::Duration::from_secs(30));
    let mut native: Vec<(u32, u64, String, String)> = native
        .iter()
        .map(|m| {
            (
                m.queue,
                m.offset,
                String::from_utf8_lossy(m.key.as_deref().unwrap_or_default()).into_owned(),
                String::from_utf8_lossy(m.value_or_empty()).into_owned(),
            )
        })
        .collect();
    native.sort();
    assert_eq!(native, got);
}

#[test]
fn kafka_python_creates_produces_consumes_and_deletes() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, kafka) = common::kafka_broker(dir.path(), &[]);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/kafka_clients/python_admin_produce_consume.py");
    let out = common::tools::python(&["kafka"]).args([script, &kafka]).output().expect("run python3");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("second create: TopicAlreadyExistsError"), "{text}");
    assert!(text.contains("consumed 30") && text.contains("deleted"), "{text}");
    assert!(!broker.client().list_topics().unwrap().contains(&"py".to_string()), "the topic is gone both ways");
}

/// kafka-python's consumer group on ringmq's groups: two members split the
/// partitions and commit, one leaves, the other takes over from its commits,
/// and the native SDK reads the same group's committed offsets.
#[test]
fn kafka_python_group_members_split_commit_and_take_over() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, kafka) = common::kafka_broker(dir.path(), &[]);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/kafka_clients/python_group.py");
    let out = common::tools::python(&["kafka"]).args([script, &kafka]).output().expect("run python3");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    let client = broker.client();
    let mut total = 0;
    for line in text.lines().filter_map(|l| l.strip_prefix("committed ")) {
        let (queue, offset): (u32, u64) = match line.split_once(' ') {
            Some((q, o)) => (q.parse().unwrap(), o.parse().unwrap()),
            None => panic!("{line}"),
        };
        let (_, end) = client.list_offsets("pg", queue).unwrap();
        assert_eq!(offset, end, "partition {queue}: the group committed everything it read");
        assert_eq!(client.fetch_offset("pyg", "pg", queue).unwrap(), Some(offset), "the same group natively");
        total += end;
    }
    assert_eq!(total, 1000, "{text}");
}

/// Waits (bounded) until `ready` holds, reading each file again each time.
fn wait_for_files(files: &[&std::path::Path], what: &str, ready: impl Fn(&[String]) -> bool) -> Vec<String> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(90);
    loop {
        // Whole lines only: a line kcat is still writing is read next time
        // (counted as a line of its own, a message's first half was "read").
        let whole = |t: String| t.rfind('\n').map_or(String::new(), |end| t[..=end].to_string());
        let texts: Vec<String> = files.iter().map(|f| whole(std::fs::read_to_string(f).unwrap_or_default())).collect();
        if ready(&texts) {
            return texts;
        }
        if std::time::Instant::now() > deadline {
            let tails: Vec<&str> = texts.iter().map(|t| &t[t.len().saturating_sub(400)..]).collect();
            panic!("timed out waiting for {what}; the files end with {tails:?}");
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// The partitions of a kcat member's latest assignment, from its stderr.
fn kcat_assignment(stderr: &str) -> Option<Vec<u32>> {
    let line = stderr.lines().rev().find(|l| l.contains("rebalanced") && l.contains("assigned:"))?;
    let list = line.split("assigned:").nth(1)?;
    Some(list.split(',').filter_map(|p| p.trim().split(['[', ']']).nth(1)?.parse().ok()).collect())
}

/// Two `kcat -G` members of one group split a topic's partitions; what the
/// native SDK sends (keys, values, headers) reaches the member holding each
/// partition, at the offsets the SDK was told.
#[test]
fn two_kcat_group_members_split_the_partitions_of_what_the_native_sdk_sends() {
    use ringmq::client::{Message, Producer, ProducerConfig};
    let dir = tempfile::tempdir().unwrap();
    let (broker, kafka) = common::kafka_broker(dir.path(), &[]);
    let client = broker.client();
    client.create_topic("split", 4, 0).unwrap();
    let member = |name: &str| {
        let (out, err) = (dir.path().join(format!("{name}.out")), dir.path().join(format!("{name}.err")));
        let child = common::tools::command("kcat")
            .args(["-b", &kafka, "-G", "kg", "split", "-u", "-X", "auto.offset.reset=earliest"])
            .args(["-f", "%p %o %k %s %h\\n"])
            .stdout(std::fs::File::create(&out).unwrap())
            .stderr(std::fs::File::create(&err).unwrap())
            .spawn()
            .expect("run kcat");
        (common::ChildGuard(child), out, err)
    };
    let (_a, a_out, a_err) = member("a");
    wait_for_files(&[&a_err], "a's first assignment", |t| kcat_assignment(&t[0]).is_some_and(|p| p.len() == 4));
    let (_b, b_out, b_err) = member("b");
    wait_for_files(&[&a_err, &b_err], "a and b to split the partitions", |t| {
        let (Some(mut a), Some(b)) = (kcat_assignment(&t[0]), kcat_assignment(&t[1])) else { return false };
        a.extend(b);
        a.sort();
        a == [0, 1, 2, 3] && !t.iter().any(|e| e.lines().last().is_some_and(|l| l.contains("revoked")))
    });

    let producer = Producer::new(client, ProducerConfig::default());
    let mut sent = Vec::new();
    for i in 0..2000 {
        let message = Message::new(format!("v{i}")).with_key(format!("k{i}")).with_header("n", format!("{i}"));
        let r = producer.send("split", &message).unwrap();
        sent.push(format!("{} {} k{i} v{i} n={i}", r.queue, r.offset));
    }
    // Until every message was read (a message read twice does not count for another).
    let texts = wait_for_files(&[&a_out, &b_out], "both members to read 2,000 messages", |t| {
        t.iter().flat_map(|o| o.lines()).collect::<std::collections::HashSet<_>>().len() >= 2000
    });
    let mut got: Vec<String> = texts.iter().flat_map(|t| t.lines().map(str::to_string)).collect();
    got.sort();
    sent.sort();
    let missing: Vec<&String> = sent.iter().filter(|m| got.binary_search(m).is_err()).take(5).collect();
    assert!(missing.is_empty(), "not read (first five): {missing:?}");
    let twice: Vec<&String> = got.windows(2).filter(|w| w[0] == w[1]).map(|w| &w[0]).take(5).collect();
    let logs = [&a_err, &b_err].map(|e| std::fs::read_to_string(e).unwrap_or_default());
    assert_eq!(
        got.len(),
        sent.len(),
        "each message once, at the offset the SDK was told, with its key, value and header; read twice \
         (first five): {twice:?}; the members' logs: {logs:?}"
    );
    let partitions = |t: &str| -> std::collections::BTreeSet<String> {
        t.lines().map(|l| l.split(' ').next().unwrap().to_string()).collect()
    };
    let (pa, pb) = (partitions(&texts[0]), partitions(&texts[1]));
    assert!(!pa.is_empty() && !pb.is_empty() && pa.is_disjoint(&pb), "a read {pa:?}, b read {pb:?}");
}

/// Runs one phase of the confluent-kafka script against a fresh broker;
/// its output (what the phase checked).
fn confluent_phase(phase: &str) -> String {
    confluent_phase_with(phase, &[])
}

/// `confluent_phase` against a broker started with `extra` arguments.
fn confluent_phase_with(phase: &str, extra: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let (_broker, kafka) = common::kafka_broker(dir.path(), extra);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/kafka_clients/python_confluent.py");
    let modules = ["kafka", "snappy", "lz4", "zstandard", "confluent_kafka"];
    let out = common::tools::python(&modules).args([script, &kafka, phase]).output().expect("run python3");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    text
}

/// A compacted topic end to end with stock clients: configs described,
/// the compactor (on a broker with 2 MiB segments, looking every 200 ms)
/// keeps each live key's latest record at its offset and drops deleted keys;
/// both clients read the gaps.
#[test]
fn a_compacted_topic_keeps_each_keys_latest_record_for_stock_clients() {
    let extra = ["--segment-mib", "2", "--batch-bytes-max", "262144", "--compaction-check-ms", "200"];
    let text = confluent_phase_with("compaction", &extra);
    assert!(text.contains("5 deleted keys gone"), "{text}");
}

#[test]
fn confluent_idempotent_acks_all_producer_is_read_back_by_kafka_python_at_its_offsets() {
    assert!(confluent_phase("idempotent").contains("3000 acked"));
}

#[test]
fn gzip_snappy_lz4_and_zstd_batches_of_one_client_are_read_by_the_other() {
    let text = confluent_phase("compressed");
    for codec in ["gzip", "snappy", "lz4", "zstd"] {
        assert!(text.contains(&format!("compressed {codec}:")), "{text}");
    }
}

#[test]
fn kafka_python_and_confluent_seek_to_beginning_end_and_timestamp() {
    assert!(confluent_phase("seek").contains("timestamp -> 501"));
}

#[test]
fn confluent_group_members_split_commit_and_take_over() {
    assert!(confluent_phase("group").contains("1200 read once"));
}

#[test]
fn an_offset_commits_metadata_reads_back_through_both_clients_and_too_much_is_refused() {
    assert!(confluent_phase("metadata").contains("too large refused"));
}

/// As Kafka's default, a topic a producer names is created (one queue);
/// with `--auto-create-topics false` it is not, and the send fails.
#[test]
fn a_producer_to_a_missing_topic_creates_it_unless_auto_create_is_off() {
    assert!(confluent_phase("autocreate_on").contains("created with 1 partition"));
    let off = confluent_phase_with("autocreate_off", &["--auto-create-topics", "false"]);
    assert!(off.contains("not created"), "{off}");
}

/// KIP-345: a consumer with a `group.instance.id` that restarts within its
/// session gets its partition back, and the group does not rebalance.
#[test]
fn a_restarted_static_member_gets_its_partition_back_without_a_rebalance() {
    assert!(confluent_phase("static").contains("no rebalance for the other"));
}

#[test]
fn both_admin_clients_list_describe_and_delete_groups() {
    assert!(confluent_phase("groups_admin").contains("unknown not found"));
}

/// A topic's own configs are stored, described with their source, changed
/// by both alter APIs (bad ones refused whole) and enforced by the broker.
#[test]
fn a_topics_own_configs_are_set_described_altered_and_enforced() {
    let text = confluent_phase_with("topic_configs", &["--retention-check-ms", "200"]);
    assert!(text.contains("each enforced"), "{text}");
}

/// kafka-python's admin client on the same APIs the Java one uses.
#[test]
fn kafka_pythons_admin_adds_partitions_and_manages_acls() {
    assert!(confluent_phase("legacy_admin").contains("one host refused"));
}

#[test]
fn delete_records_moves_a_partitions_start_and_consumers_read_from_it() {
    assert!(confluent_phase("delete_records").contains("consumers read from the start"));
}

#[test]
fn confluent_and_kafka_python_describe_a_topics_configs_and_an_unknown_topic_is_refused() {
    assert!(confluent_phase("configs").contains("unknown topic refused"));
}

/// librdkafka's transactions: a committed transaction with a group's
/// offsets, an aborted one, and a read_committed consumer that reads
/// exactly the committed records in order.
#[test]
fn a_transactional_confluent_producer_commits_and_aborts_and_read_committed_sees_the_committed() {
    let text = confluent_phase("transactional");
    assert!(text.contains("read_committed read 12 of 16 in order, offsets committed"), "{text}");
}

/// Records come back as they were sent: null and empty keys and values,
/// repeated headers in order, null header values and timestamps before the
/// batch's first, uncompressed and in each codec, whichever client wrote
/// them; the native SDK reads the same records (a null value is a
/// tombstone, not an empty value).
#[test]
fn every_record_shape_reads_back_exactly_in_each_codec_through_both_clients_and_the_sdk() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, kafka) = common::kafka_broker(dir.path(), &[]);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/kafka_clients/python_confluent.py");
    let modules = ["kafka", "snappy", "lz4", "zstandard", "confluent_kafka"];
    let out = common::tools::python(&modules).args([script, &kafka, "exact"]).output().expect("run python3");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    for codec in ["none", "gzip", "snappy", "lz4", "zstd"] {
        assert!(text.contains(&format!("exact {codec}: 5 shapes")), "{text}");
        let topic = format!("x-c-{codec}");
        let mut consumer = ringmq::client::Consumer::new(broker.client(), None);
        consumer.assign(&topic, &[0], ringmq::client::StartFrom::Earliest).unwrap();
        let got = common::consume(&mut consumer, 5, std::time::Duration::from_secs(30));
        let shapes: Vec<_> = got.iter().map(|m| (m.key.as_deref(), m.value.as_deref(), m.timestamp_ms)).collect();
        let base = 1_700_000_000_000;
        let b = |s: &'static str| Some(s.as_bytes());
        let want = vec![
            (None, None, base),
            (b(""), b(""), base + 1),
            (b("k"), b("v"), base + 2),
            (None, b("x"), base - 5000),
            (b("t"), None, base + 86_400_000),
        ];
        assert_eq!(shapes, want, "{codec}");
        let headers = &got[2].headers;
        let want = [("a", Some(&b"1"[..])), ("a", Some(b"2")), ("n", None), ("e", Some(b""))];
        let want: Vec<(String, Option<Vec<u8>>)> =
            want.iter().map(|(n, v)| (n.to_string(), v.map(<[u8]>::to_vec))).collect();
        assert_eq!(headers, &want, "{codec}: repeated and null headers, in order");
    }
}

/// kcat (Debian's librdkafka 2.0) compresses only for a broker that
/// advertises Produce v0 (librdkafka #4956): the broker advertises it, as
/// Kafka 4.0 does, so `-z lz4` arrives and is stored as lz4, and reads back.
#[test]
fn kcats_lz4_batches_are_stored_as_lz4_and_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, kafka) = common::kafka_broker(dir.path(), &[]);
    broker.client().create_topic("z", 1, 0).unwrap();
    let lines: String = (0..200).map(|i| format!("{{\"order\":{i},\"state\":\"shipped\"}}\n")).collect();
    let mut produce = common::tools::command("kcat");
    produce.args(["-b", &kafka, "-P", "-t", "z", "-p", "0", "-z", "lz4", "-X", "linger.ms=100"]);
    let out = common::output_with_stdin(&mut produce, &lines);
    assert!(out.status.success(), "kcat -P: {}", String::from_utf8_lossy(&out.stderr));
    let fetched = common::kafka::fetch(&kafka, "z", 0);
    let attributes = i16::from_be_bytes([fetched[21], fetched[22]]);
    assert_eq!(attributes & 7, 3, "the first stored batch is lz4, as kcat sent it");
    let read = common::tools::command("kcat")
        .args(["-b", &kafka, "-C", "-t", "z", "-p", "0", "-o", "beginning", "-c", "200", "-e"])
        .output()
        .expect("run kcat");
    let got = String::from_utf8_lossy(&read.stdout);
    assert_eq!(got, lines, "kcat reads back every line in order");
}
