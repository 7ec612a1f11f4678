//! The `ringmq` command line against a real broker: what a script relies on.

mod common;

use common::Broker;
use ringmq::client::{Consumer, GroupConfig, StartNew};
use std::io::Write;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

fn ringmq(args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ringmq"))
        .args(args)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn topics_produce_and_consume_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(dir.path(), &[]);
    let b = broker.addr();
    let out = ringmq(&["topic", "create", "cli", "--queues", "3", "--broker", b], "");
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&ringmq(&["topic", "list", "--broker", b], "").stdout), "cli\n");
    let out = ringmq(&["produce", "cli", "--tag", "TagA", "--header", "h=v", "--broker", b], "one\ntwo\nthree\n");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = ringmq(&["produce", "cli", "--mode", "async", "--key", "k", "--broker", b], "four\n");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = ringmq(&["consume", "cli", "--count", "4", "--broker", b], "");
    let mut lines: Vec<String> = text(&out.stdout).lines().map(str::to_string).collect();
    lines.sort();
    assert_eq!(lines, vec!["four", "one", "three", "two"]);
    let out = ringmq(&["consume", "cli", "--count", "1", "--format", "json", "--from", "earliest", "--broker", b], "");
    let json = text(&out.stdout);
    assert!(json.starts_with("{\"queue\":") && json.contains("\"offset\":0") && json.contains("\"id\":\""), "{json}");
    let out = ringmq(&["topic", "describe", "cli", "--broker", b], "");
    assert!(text(&out.stdout).lines().count() == 6, "topic, configs, header + 3 queues:\n{}", text(&out.stdout));

    let out = ringmq(&["consume", "cli", "--group", "g", "--from", "committed", "--count", "2", "--broker", b], "");
    assert_eq!(text(&out.stdout).lines().count(), 2);
    let out =
        ringmq(&["consume", "cli", "--group", "g", "--from", "committed", "--idle-exit-ms", "1000", "--broker", b], "");
    assert_eq!(text(&out.stdout).lines().count(), 2, "the group resumes after the 2 it printed and committed");

    let out = ringmq(&["produce", "missing", "--broker", b], "x\n");
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("unknown topic"), "{}", text(&out.stderr));
    assert_eq!(ringmq(&["topic", "create"], "").status.code(), Some(2), "usage errors exit 2");
    let out = ringmq(&["topic", "delete", "cli", "--broker", b], "");
    assert!(out.status.success());
    assert_eq!(text(&ringmq(&["topic", "list", "--broker", b], "").stdout), "");
}

#[test]
fn help_describes_every_command_and_flag() {
    let out = ringmq(&["--help"], "");
    for cmd in ["serve", "topic", "produce", "consume", "doctor"] {
        assert!(text(&out.stdout).contains(cmd), "{cmd} missing from --help");
    }
    let serve = text(&ringmq(&["serve", "--help"], "").stdout);
    for flag in [
        "--data-dir",
        "--cores",
        "--listen",
        "--flush",
        "--segment-mib",
        "--cache-mib",
        "--flush-depth",
        "--frame-bytes-max",
        "--connections-max",
        "--config",
    ] {
        assert!(serve.contains(flag), "{flag} missing from serve --help");
    }
    let out = ringmq(&["serve", "--flush-depth", "0"], "");
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("--flush-depth must be at least 1"), "{}", text(&out.stderr));
}

/// A topic's own configs set at creation, described, altered all or none,
/// and enforced; more queues; records deleted below an offset. Bad configs
/// are refused with their name, and nothing of a refused request is stored.
#[test]
fn a_topics_configs_queues_and_records_are_managed_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(dir.path(), &[]);
    let b = broker.addr();
    let ok = |args: &[&str]| {
        let out = ringmq(&[args, &["--broker", b]].concat(), "");
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
        text(&out.stdout)
    };
    let refused = |args: &[&str]| {
        let out = ringmq(&[args, &["--broker", b]].concat(), "");
        assert_eq!(out.status.code(), Some(1), "{args:?} refused: {}", text(&out.stdout));
        text(&out.stderr)
    };
    let e = refused(&["topic", "create", "bad", "--queues", "2", "--config", "retention.ms=soon"]);
    assert!(e.contains("retention.ms"), "{e}");
    assert!(!ok(&["topic", "list"]).contains("bad"), "a refused creation makes no topic");

    ok(&[
        "topic",
        "create",
        "tc",
        "--queues",
        "2",
        "--config",
        "max.message.bytes=2000",
        "--config",
        "retention.ms=3600000",
    ]);
    let described = ok(&["topic", "describe", "tc"]);
    assert!(described.contains("config max.message.bytes=2000") && described.contains("config retention.ms=3600000"));
    let out = ringmq(&["produce", "tc", "--broker", b], &format!("{}\n", "x".repeat(3000)));
    assert!(text(&out.stderr).contains("max.message.bytes"), "the topic's limit is enforced: {}", text(&out.stderr));

    let e = refused(&["topic", "alter", "tc", "--set", "retention.ms=1000", "--set", "no.such=1"]);
    assert!(e.contains("no.such"), "{e}");
    assert!(ok(&["topic", "describe", "tc"]).contains("config retention.ms=3600000"), "nothing of it changed");
    ok(&["topic", "alter", "tc", "--unset", "max.message.bytes", "--append", "cleanup.policy=compact"]);
    let described = ok(&["topic", "describe", "tc"]);
    assert!(
        !described.contains("max.message.bytes") && described.contains("config cleanup.policy=compact,delete"),
        "{described}"
    );

    ok(&["topic", "add-queues", "tc", "--queues", "3"]);
    assert_eq!(broker.client().topic("tc").unwrap().queue_shards.len(), 3);
    assert!(refused(&["topic", "add-queues", "tc", "--queues", "2"]).contains('3'), "never fewer");

    let first: ringmq::client::SelectorFn = std::sync::Arc::new(|_, _| 0);
    let config =
        ringmq::client::ProducerConfig { selector: ringmq::client::QueueSelector::Custom(first), ..Default::default() };
    let producer = ringmq::client::Producer::new(broker.client(), config);
    for i in 0..5 {
        // Keyed: the topic compacts now (compact,delete), and a compacted topic keeps records by key.
        producer.send("tc", &ringmq::client::Message::new(format!("m{i}")).with_key(format!("k{i}"))).unwrap();
    }
    assert!(ok(&["topic", "delete-records", "tc", "--queue", "0", "--before", "3"]).contains("starts at 3"));
    assert_eq!(broker.client().list_offsets("tc", 0).unwrap(), (3, 5));
    assert!(refused(&["topic", "delete-records", "tc", "--queue", "0", "--before", "9"]).contains("9"));
    assert!(ok(&["topic", "delete-records", "tc", "--queue", "0"]).contains("starts at 5"), "all of it");
}

/// A compacted topic from the command line: created with
/// --cleanup-policy, a record without a key refused and nothing stored, a
/// tombstone sent for a key and read back as a null value, DeleteRecords
/// refused (the topic only compacts).
#[test]
fn a_compacted_topic_refuses_keyless_records_and_takes_tombstones() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(dir.path(), &[]);
    let b = broker.addr();
    let create = ringmq(&["topic", "create", "kv", "--queues", "1", "--cleanup-policy", "compact", "--broker", b], "");
    assert!(create.status.success(), "{}", text(&create.stderr));
    let described = text(&ringmq(&["topic", "describe", "kv", "--broker", b], "").stdout);
    assert!(described.contains("config cleanup.policy=compact"), "{described}");
    let keyless = ringmq(&["produce", "kv", "--broker", b], "no key\n");
    assert!(!keyless.status.success() && text(&keyless.stderr).contains("no key"), "{}", text(&keyless.stderr));
    assert_eq!(broker.client().list_offsets("kv", 0).unwrap(), (0, 0), "nothing of it stored");
    let keyed = ringmq(&["produce", "kv", "--key", "user-1", "--broker", b], "v1\n");
    assert!(keyed.status.success(), "{}", text(&keyed.stderr));
    let tombstone = ringmq(&["produce", "kv", "--key", "user-1", "--tombstone", "--broker", b], "");
    assert!(tombstone.status.success() && text(&tombstone.stderr).contains("tombstone"), "{}", text(&tombstone.stderr));
    let read = text(&ringmq(&["consume", "kv", "--count", "2", "--format", "json", "--broker", b], "").stdout);
    let lines: Vec<&str> = read.lines().collect();
    assert_eq!(lines.len(), 2, "{read}");
    assert!(lines[0].contains("\"v1\"") && lines[1].contains("\"value\":null"), "the tombstone reads as null: {read}");
    let delete = ringmq(&["topic", "delete-records", "kv", "--queue", "0", "--before", "1", "--broker", b], "");
    assert!(!delete.status.success() && text(&delete.stderr).contains("only compacts"), "{}", text(&delete.stderr));
    assert_eq!(broker.client().list_offsets("kv", 0).unwrap(), (0, 2), "DeleteRecords refused, nothing removed");
}

#[test]
fn dead_letters_are_listed_shown_and_redriven_to_their_topic() {
    use ringmq::client::{Consumer, Message, Producer, ProducerConfig, StartFrom};
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(dir.path(), &["--manual-clock"]);
    let b = broker.addr();
    let client = broker.client();
    client.create_topic("orders", 2, 0).unwrap();
    let producer = Producer::new(client.clone(), ProducerConfig::default());
    let sent = producer.send("orders", &Message::new("bad order").with_key("k-1").with_tag("T")).unwrap();
    // One retry allowed: the retry's send-back dead-letters it.
    client.send_back("billing", "orders", sent.queue, sent.offset, 1).unwrap();
    client.advance_clock(Duration::from_secs(10)).unwrap();
    let mut retries = Consumer::new(client.clone(), None);
    retries.assign_all("%RETRY%billing", StartFrom::Earliest).unwrap();
    let retry = common::consume(&mut retries, 1, Duration::from_secs(10)).pop().expect("the retry");
    assert!(client.send_back("billing", &retry.topic, retry.queue, retry.offset, 1).unwrap().dead_lettered);

    let out = ringmq(&["dlq", "list", "--group", "billing", "--broker", b], "");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let listed = text(&out.stdout);
    assert!(listed.starts_with("offset=0 id=") && listed.contains("origin=orders tries=2 tag=\"T\""), "{listed}");
    let shown = text(&ringmq(&["dlq", "show", "--group", "billing", "--offset", "0", "--broker", b], "").stdout);
    assert!(
        shown.contains(&format!("\"id\":\"{}\"", sent.message_id)) && shown.contains("\"reconsume_times\":2"),
        "{shown}"
    );
    let missing = ringmq(&["dlq", "show", "--group", "billing", "--offset", "5", "--broker", b], "");
    assert_eq!(missing.status.code(), Some(1));
    assert!(text(&missing.stderr).contains("no message at offset 5"), "{}", text(&missing.stderr));
    assert_eq!(ringmq(&["dlq", "redrive", "--group", "billing", "--broker", b], "").status.code(), Some(2));

    let out = ringmq(&["dlq", "redrive", "--group", "billing", "--all", "--broker", b], "");
    assert!(text(&out.stdout).starts_with("redrove offset=0"), "{}{}", text(&out.stdout), text(&out.stderr));
    let mut orders = Consumer::new(client, None);
    orders.assign_all("orders", StartFrom::Earliest).unwrap();
    let got = common::consume(&mut orders, 2, Duration::from_secs(10));
    assert_eq!(got.len(), 2, "the original and the redriven copy");
    let again = got.iter().find(|m| m.offset != sent.offset || m.queue != sent.queue).unwrap();
    assert_eq!(
        (again.message_id, again.value_or_empty(), again.tag.as_str()),
        (sent.message_id, &b"bad order"[..], "T")
    );
    assert_eq!(again.reconsume_times(), 0, "a redriven message starts over");
}

#[test]
fn consume_subscribe_joins_the_group_and_commits_as_a_member() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(dir.path(), &[]);
    let b = broker.addr();
    assert!(ringmq(&["topic", "create", "jobs", "--queues", "4", "--broker", b], "").status.success());
    let lines: String = (0..8).map(|i| format!("job-{i}\n")).collect();
    assert!(ringmq(&["produce", "jobs", "--broker", b], &lines).status.success());
    let member = |count: &str| {
        let args = ["consume", "jobs", "--group", "workers", "--subscribe", "--count", count, "--idle-exit-ms", "3000"];
        let out = ringmq(&[&args[..], &["--broker", b]].concat(), "");
        assert!(out.status.success(), "{}", text(&out.stderr));
        text(&out.stdout).lines().map(str::to_string).collect::<Vec<_>>()
    };
    let first = member("5");
    assert_eq!(first.len(), 5, "a lone member holds every queue");
    let rest = member("8");
    assert_eq!(
        first.len() + rest.len(),
        8,
        "the next member resumes after what the first committed: {first:?} {rest:?}"
    );
    let out = ringmq(&["consume", "jobs", "--subscribe", "--broker", b], "");
    assert_eq!(out.status.code(), Some(2), "--subscribe needs --group");
}

#[test]
fn consume_stops_at_a_damaged_batch_and_skip_corrupt_reads_past_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut broker = Broker::start(dir.path(), &[]);
    let b = broker.addr().to_string();
    assert!(ringmq(&["topic", "create", "t", "--queues", "1", "--broker", &b], "").status.success());
    for value in ["first", "damaged-one", "last"] {
        assert!(ringmq(&["produce", "t", "--broker", &b], &format!("{value}\n")).status.success());
    }
    broker.stop();
    // One bit flips in the middle message's stored bytes.
    let shard = (0..2).map(|s| dir.path().join(format!("shard-{s}/00000000000000000000.log")));
    let (seg, mut bytes, at) = shard
        .filter_map(|p| {
            let bytes = std::fs::read(&p).unwrap();
            let at = bytes.windows(11).position(|w| w == b"damaged-one")?;
            Some((p, bytes, at))
        })
        .next()
        .expect("the message is stored");
    bytes[at] ^= 4;
    std::fs::write(&seg, bytes).unwrap();
    broker.restart();
    let b = broker.addr().to_string();
    let out = ringmq(&["consume", "t", "--count", "3", "--broker", &b], "");
    assert_eq!(out.status.code(), Some(1), "consume stops at the damage");
    assert_eq!(text(&out.stdout), "first\n", "what came before it was printed");
    let err = text(&out.stderr);
    assert!(err.contains("CorruptData") && err.contains("[1, 2)"), "the damaged offsets are named: {err}");
    let out = ringmq(&["consume", "t", "--count", "2", "--skip-corrupt", "--broker", &b], "");
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "first\nlast\n");
    assert!(text(&out.stderr).contains("skipped 1 damaged offsets"), "{}", text(&out.stderr));
}

/// `ringmq group describe --format json`: (total lag, members, queues held by a member).
fn described(b: &str, group: &str) -> (u64, usize, usize) {
    let out = ringmq(&["group", "describe", group, "--format", "json", "--broker", b], "");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let held = v["queues"].as_array().unwrap().iter().filter(|q| !q["member"].is_null()).count();
    (v["total_lag"].as_u64().unwrap(), v["members"].as_array().unwrap().len(), held)
}

#[test]
fn group_describe_shows_the_lag_left_by_producing_without_consuming() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(dir.path(), &[]);
    let b = broker.addr();
    assert!(ringmq(&["topic", "create", "lagged", "--queues", "3", "--broker", b], "").status.success());
    let lines: String = (0..30).map(|i| format!("m{i}\n")).collect();
    assert!(ringmq(&["produce", "lagged", "--broker", b], &lines).status.success());
    let config = GroupConfig {
        start_new: StartNew::Earliest,
        heartbeat_interval: Duration::from_millis(200),
        ..GroupConfig::new("billing", &["lagged"])
    };
    let mut member = Consumer::subscribe(broker.client(), config);
    assert_eq!(common::consume(&mut member, 30, Duration::from_secs(30)).len(), 30);
    member.commit().unwrap();
    assert_eq!(described(b, "billing"), (0, 1, 3), "everything consumed; one member holds the 3 queues");

    let more: String = (0..12).map(|i| format!("late{i}\n")).collect();
    assert!(ringmq(&["produce", "lagged", "--broker", b], &more).status.success());
    assert_eq!(described(b, "billing").0, 12, "produced, not consumed");
    let out = ringmq(&["group", "describe", "billing", "--broker", b], "");
    let table = text(&out.stdout);
    assert!(table.contains("state Stable") && table.contains("total lag 12"), "{table}");

    assert_eq!(common::consume(&mut member, 12, Duration::from_secs(30)).len(), 12);
    member.commit().unwrap();
    assert_eq!(described(b, "billing").0, 0, "consumed and committed");
    let list = text(&ringmq(&["group", "list", "--broker", b], "").stdout);
    assert!(list.lines().any(|l| l.split_whitespace().collect::<Vec<_>>() == ["billing", "Stable", "1"]), "{list}");

    let out = ringmq(&["group", "describe", "nobody", "--broker", b], "");
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("no members and no committed offsets"), "{}", text(&out.stderr));
}
