//! The admin listener of a real broker (`serve --admin-listen`): `/metrics`
//! scraped under a short load and parsed by an OpenMetrics parser that is
//! not ours; health and readiness; bad HTTP refused with the broker up.

mod common;

use common::{Broker, Raw};
use openmetrics_parser::{MetricsExposition, OpenMetricsType, OpenMetricsValue};
use ringmq::client::{Client, Consumer, Message, Producer, ProducerConfig, StartFrom};
use ringmq::protocol::messages::{Fetch, Produce, QueueRef, ACKS_DURABLE};
use ringmq::protocol::{ApiKey, ErrorCode, Writer};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

type Exposition = MetricsExposition<OpenMetricsType, OpenMetricsValue>;

/// Every family the broker must report on a single node (cluster ones are in tests/cluster.rs).
const FAMILIES: &[&str] = &[
    "ringmq_requests",
    "ringmq_request_errors",
    "ringmq_produce_requests",
    "ringmq_produce_messages",
    "ringmq_produce_bytes",
    "ringmq_produce_errors",
    "ringmq_fetch_requests",
    "ringmq_fetch_messages",
    "ringmq_fetch_bytes",
    "ringmq_fetch_errors",
    "ringmq_storage_append_seconds",
    "ringmq_storage_sync_seconds",
    "ringmq_storage_group_commit_records",
    "ringmq_cache_hits",
    "ringmq_cache_misses",
    "ringmq_cache_evictions",
    "ringmq_storage_segment_bytes",
    "ringmq_storage_zero_fill_bytes",
    "ringmq_connections",
    "ringmq_long_polls_parked",
    "ringmq_consumer_lag",
    "ringmq_delayed_pending",
    "ringmq_transactions_open",
    "ringmq_retries",
    "ringmq_dead_letters",
    "ringmq_stalls",
    "ringmq_shard_busy_seconds",
    "ringmq_request_seconds",
];

use common::{get, http};

fn scrape(addr: &str, path: &str) -> Exposition {
    let (status, body) = get(addr, path);
    assert_eq!(status, 200, "{path}: {body}");
    openmetrics_parser::openmetrics::parse_openmetrics(&body)
        .unwrap_or_else(|e| panic!("{path} does not parse: {e:?}\n{body}"))
}

/// Every sample of a family by its labels (`k=v` joined), with its value.
fn samples(e: &Exposition, family: &str) -> Vec<(BTreeMap<String, String>, OpenMetricsValue)> {
    let f = e.families.get(family).unwrap_or_else(|| panic!("no family {family}"));
    f.iter_samples()
        .map(|s| {
            let labels = s.get_labelset().unwrap().iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            (labels, s.value.clone())
        })
        .collect()
}

fn number(v: &OpenMetricsValue) -> f64 {
    match v {
        OpenMetricsValue::Counter(c) => c.value.as_f64(),
        OpenMetricsValue::Gauge(n) => n.as_f64(),
        other => panic!("not a number: {other:?}"),
    }
}

/// The sum of a family's samples whose labels include every `(k, v)` of `with`.
fn total(e: &Exposition, family: &str, with: &[(&str, &str)]) -> f64 {
    samples(e, family)
        .iter()
        .filter(|(labels, _)| with.iter().all(|(k, v)| labels.get(*k).map(String::as_str) == Some(*v)))
        .map(|(_, v)| number(v))
        .sum()
}

/// How many requests of `api` the request-time histogram counted.
fn timed(e: &Exposition, api: &str) -> f64 {
    samples(e, "ringmq_request_seconds")
        .into_iter()
        .filter(|(labels, _)| labels.get("api").map(String::as_str) == Some(api))
        .map(|(_, v)| match v {
            OpenMetricsValue::Histogram(h) => h.count.unwrap_or(0) as f64,
            other => panic!("not a histogram: {other:?}"),
        })
        .sum()
}

fn admin_broker(dir: &std::path::Path) -> (Broker, String) {
    let port = common::free_port_pair("127.0.0.1");
    let admin = format!("127.0.0.1:{port}");
    let broker = Broker::start(dir, &["--admin-listen", &admin]);
    (broker, admin)
}

/// Topic `orders` with `queues` queues and `count` messages sent to it (keys k0, k1...).
fn orders(client: &Arc<Client>, queues: u32, count: usize) -> Producer {
    client.create_topic("orders", queues, 0).unwrap();
    let producer = Producer::new(client.clone(), ProducerConfig::default());
    for i in 0..count {
        producer.send("orders", &Message::new(format!("order {i}")).with_key(format!("k{i}"))).unwrap();
    }
    producer
}

#[test]
fn metrics_count_what_clients_did_and_counters_only_go_up() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, admin) = admin_broker(dir.path());
    let client = broker.client();
    orders(&client, 4, 300);
    let first = scrape(&admin, "/metrics");

    let mut consumer = Consumer::new(client.clone(), Some("billing".into()));
    consumer.assign_all("orders", StartFrom::Earliest).unwrap();
    let got = common::consume(&mut consumer, 300, Duration::from_secs(30));
    assert_eq!(got.len(), 300);
    consumer.commit().unwrap();
    let poison = &got[0];
    let back = client.send_back("billing", "orders", poison.queue, poison.offset, 3).unwrap();
    assert!(!back.dead_lettered);
    let dead = client.send_back_or_dead_letter("billing", ("orders", got[1].queue, got[1].offset), 3, true).unwrap();
    assert!(dead.dead_lettered);
    // Refused: a produce to a topic that does not exist (the broker's own
    // check, past the SDK's), and a fetch past the end of a queue.
    let mut raw = Raw::connect(broker.addr());
    let mut w = Writer::default();
    Produce {
        queue: QueueRef { topic: "nope".into(), queue: 0 },
        acks: ACKS_DURABLE,
        batches: vec![&common::batch(b"x")],
    }
    .encode(&mut w);
    let (_, code, _, _) = raw.call(ApiKey::Produce as u16, 0, 1, &w.buf);
    assert_eq!(code, ErrorCode::UnknownTopic);
    let mut owner = Raw::connect(&client.owner("orders", 0).unwrap());
    let mut w = Writer::default();
    let queue = QueueRef { topic: "orders".into(), queue: 0 };
    Fetch { queue, offset: 1 << 40, max_bytes: 1 << 20, max_wait_ms: 0, tags: String::new() }.encode(&mut w);
    let (_, code, _, _) = owner.call(ApiKey::Fetch as u16, 0, 2, &w.buf);
    assert_eq!(code, ErrorCode::OffsetOutOfRange);
    let second = scrape(&admin, "/metrics");

    for family in FAMILIES {
        assert!(second.families.contains_key(*family), "family {family} is missing");
    }
    assert_eq!(total(&second, "ringmq_produce_errors", &[("topic", "(unknown)")]), 1.0);
    assert_eq!(total(&second, "ringmq_request_errors", &[("api", "Produce"), ("code", "UnknownTopic")]), 1.0);
    assert!(total(&second, "ringmq_fetch_errors", &[("topic", "orders")]) >= 1.0);
    // What the test sent and read, counted where the queues live.
    assert_eq!(total(&first, "ringmq_produce_messages", &[("topic", "orders")]), 300.0);
    assert_eq!(total(&second, "ringmq_produce_messages", &[("topic", "orders")]), 300.0);
    assert_eq!(total(&second, "ringmq_produce_errors", &[("topic", "orders")]), 0.0);
    assert!(total(&second, "ringmq_produce_bytes", &[("topic", "orders")]) > 300.0 * 9.0);
    assert_eq!(total(&second, "ringmq_fetch_messages", &[("topic", "orders")]), 300.0);
    assert_eq!(total(&second, "ringmq_retries", &[("group", "billing")]), 1.0);
    assert_eq!(total(&second, "ringmq_dead_letters", &[("group", "billing")]), 1.0);
    assert_eq!(total(&second, "ringmq_consumer_lag", &[("group", "billing"), ("topic", "orders")]), 0.0);
    assert!(total(&second, "ringmq_storage_zero_fill_bytes", &[]) > 0.0);
    // Both shards did work (each serves requests), so both count busy time.
    for shard in ["0", "1"] {
        assert!(total(&second, "ringmq_shard_busy_seconds", &[("shard", shard)]) > 0.0, "shard {shard}");
    }
    // Counters only go up between scrapes.
    for (name, family) in &first.families {
        if family.family_type != OpenMetricsType::Counter {
            continue;
        }
        let later: HashMap<_, _> =
            samples(&second, name).into_iter().map(|(l, v)| (format!("{l:?}"), number(&v))).collect();
        for (labels, value) in samples(&first, name) {
            let key = format!("{labels:?}");
            let now = later.get(&key).unwrap_or_else(|| panic!("{name}{key} vanished"));
            assert!(*now >= number(&value), "{name}{key} went from {} down to {now}", number(&value));
        }
    }
    // Histograms: buckets cumulative, +Inf holds the count.
    let mut appends = 0;
    for (name, family) in &second.families {
        if family.family_type != OpenMetricsType::Histogram {
            continue;
        }
        for (labels, value) in samples(&second, name) {
            let OpenMetricsValue::Histogram(h) = value else { panic!("{name} is a histogram") };
            let counts: Vec<f64> = h.buckets.iter().map(|b| b.count.as_f64()).collect();
            assert!(counts.windows(2).all(|w| w[0] <= w[1]), "{name}{labels:?} buckets are not cumulative: {counts:?}");
            let last = h.buckets.last().expect("buckets");
            assert!(last.upper_bound.is_infinite(), "{name} ends with +Inf");
            assert_eq!(last.count.as_f64() as u64, h.count.expect("a count"), "{name}{labels:?}");
            if name == "ringmq_storage_append_seconds" {
                appends += h.count.unwrap_or(0);
            }
        }
    }
    assert!(appends >= 300, "{appends} appends timed for 300 messages");
    // Each request answered is timed under its API.
    assert_eq!(timed(&second, "Produce"), total(&second, "ringmq_requests", &[("api", "Produce")]));
    assert!(timed(&second, "Produce") >= 301.0, "the 300 sends and the refused one");

    // Every metric the shipped Grafana dashboard charts is one the broker exports
    // (the cluster's and the trace's are exported only in those modes).
    let dashboard =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/perf-scripts/grafana/ringmq-dashboard.json"))
            .unwrap();
    let dashboard: serde_json::Value = serde_json::from_str(&dashboard).unwrap();
    let mut charted = 0;
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().into_iter().flatten() {
            let expr = target["expr"].as_str().unwrap();
            for name in
                expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).filter(|w| w.starts_with("ringmq_"))
            {
                let family =
                    ["_total", "_bucket", "_sum", "_count"].iter().fold(name, |n, s| n.strip_suffix(s).unwrap_or(n));
                let elsewhere = family.starts_with("ringmq_replication_") || family.starts_with("ringmq_trace_");
                assert!(
                    elsewhere || second.families.contains_key(family),
                    "the dashboard charts {name}, which is not exported"
                );
                charted += 1;
            }
        }
    }
    assert!(charted > 20, "{charted} metrics charted");

    // The node's view: no shard label, the same totals.
    let node = scrape(&admin, "/public_metrics");
    assert!(samples(&node, "ringmq_produce_messages").iter().all(|(labels, _)| !labels.contains_key("shard")));
    assert_eq!(total(&node, "ringmq_produce_messages", &[("topic", "orders")]), 300.0);
    let segments = samples(&node, "ringmq_storage_segment_bytes");
    assert_eq!(segments.len(), 4, "one sample per state (active, spare, sealed, pooled): {segments:?}");
}

#[test]
fn health_and_readiness_answer_and_bad_http_is_refused_with_the_broker_up() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, admin) = admin_broker(dir.path());
    assert_eq!(get(&admin, "/healthz"), (200, "ok\n".to_string()));
    let (status, body) = get(&admin, "/readyz");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("2 shards serve"), "{body}");

    let (status, body) = get(&admin, "/nothing-here");
    assert_eq!(status, 404);
    assert!(body.contains("/metrics"), "the refusal says what is served: {body}");
    let (status, body) = http(&admin, "DELETE /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(status, 405, "{body}");
    let (status, _) = http(&admin, "POST /metrics HTTP/1.1\r\nContent-Length: 4\r\n\r\nbody");
    assert_eq!(status, 400);
    let huge = format!("GET /metrics HTTP/1.1\r\nX-Padding: {}\r\n\r\n", "x".repeat(20_000));
    assert_eq!(http(&admin, &huge).0, 431);
    assert_eq!(http(&admin, "\u{1}\u{2} garbage\r\n\r\n").0, 400);

    // Still serving, on both listeners.
    assert_eq!(get(&admin, "/healthz").0, 200);
    broker.client().create_topic("still-up", 1, 0).unwrap();
}

/// `curl` against the admin listener: the HTTP status and the body.
fn curl(args: &[&str]) -> (u16, String) {
    let out = common::tools::command("curl")
        .args(["-s", "-w", "\n%{http_code}"])
        .args(args)
        .output()
        .expect("curl (.ci/run installs it)");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, status) = text.rsplit_once('\n').unwrap_or(("", "0"));
    (status.trim().parse().unwrap_or(0), body.to_string())
}

#[test]
fn with_authentication_the_admin_listener_wants_a_user_over_tls() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    common::create_user(&data, "admin", "admin-secret");
    common::create_user(&data, "alice", "alice-secret");
    let ca = common::certs::Ca::new(dir.path(), "ca");
    let server = ca.issue("broker", "broker", 30);
    let port = common::free_port_pair("127.0.0.1");
    let admin = format!("127.0.0.1:{port}");
    let mut args: Vec<String> =
        ["--admin-listen", &admin, "--auth-required", "--super-users", "admin"].map(String::from).into();
    args.extend(server.serve_args());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let _broker = Broker::start(&data, &args);
    let ca_pem = common::certs::path(&ca.pem);
    let url = |path: &str| format!("https://{admin}{path}");

    assert_eq!(curl(&["--cacert", &ca_pem, &url("/healthz")]).0, 200, "health needs no login");
    let (status, body) = curl(&["--cacert", &ca_pem, &url("/metrics")]);
    assert_eq!(status, 401, "{body}");
    assert!(body.contains("log in"), "{body}");
    assert_eq!(curl(&["--cacert", &ca_pem, "-u", "admin:wrong", &url("/metrics")]).0, 401);
    assert_eq!(curl(&["--cacert", &ca_pem, "-u", "nobody:x", &url("/api/overview")]).0, 401);
    let (status, body) = curl(&["--cacert", &ca_pem, "-u", "admin:admin-secret", &url("/metrics")]);
    assert_eq!(status, 200);
    assert!(body.contains("ringmq_storage_appends_total"), "{body}");
    let (status, body) = curl(&["--cacert", &ca_pem, "-u", "alice:alice-secret", &url("/metrics")]);
    assert_eq!(status, 403, "alice has no ACL: {body}");
    assert!(body.contains("Describe on the cluster"), "{body}");
    assert_eq!(curl(&["--cacert", &ca_pem, "-u", "alice:alice-secret", &url("/")]).0, 200, "the page itself");

    // Without TLS the listener takes no password.
    let plain_dir = tempfile::tempdir().unwrap();
    let plain_data = plain_dir.path().join("data");
    common::create_user(&plain_data, "admin", "admin-secret");
    let plain_admin = format!("127.0.0.1:{}", common::free_port_pair("127.0.0.1"));
    let _plain =
        Broker::start(&plain_data, &["--admin-listen", &plain_admin, "--auth-required", "--super-users", "admin"]);
    let (status, body) = curl(&["-u", "admin:admin-secret", &format!("http://{plain_admin}/metrics")]);
    assert_eq!(status, 403);
    assert!(body.contains("only over TLS"), "{body}");
}

#[test]
fn top_shows_each_topic_with_its_rates_stored_messages_and_lag() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, admin) = admin_broker(dir.path());
    let client = broker.client();
    let producer = orders(&client, 2, 20);
    let mut consumer = Consumer::new(client.clone(), Some("billing".into()));
    consumer.assign_all("orders", StartFrom::Earliest).unwrap();
    assert_eq!(common::consume(&mut consumer, 20, Duration::from_secs(30)).len(), 20);
    consumer.commit().unwrap();
    for i in 0..5 {
        producer.send("orders", &Message::new(format!("late{i}"))).unwrap();
    }
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ringmq"))
        .args(["top", "--admin", &admin, "--count", "2", "--interval-ms", "200"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    let rows: Vec<Vec<&str>> =
        text.lines().filter(|l| l.starts_with("orders ")).map(|l| l.split_whitespace().collect()).collect();
    assert_eq!(rows.len(), 2, "one row per redraw:\n{text}");
    let last = &rows[1];
    assert_eq!((last[1], last[5], last[6]), ("2", "25", "5"), "queues, stored, lag:\n{text}");
    assert!(last[2].parse::<f64>().is_ok(), "a produce rate once two overviews were seen:\n{text}");
    // The node line's busy share: a percentage once two overviews were seen.
    let busy: Vec<&str> = text.lines().filter_map(|l| l.split("  busy ").nth(1)?.split_whitespace().next()).collect();
    assert_eq!(busy.len(), 2, "{text}");
    assert_eq!(busy[0], "-", "{text}");
    let share: f64 = busy[1].strip_suffix('%').and_then(|p| p.parse().ok()).unwrap_or(-1.0);
    assert!((0.0..=100.0).contains(&share), "busy {}:\n{text}", busy[1]);

    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ringmq"))
        .args(["top", "--admin", "127.0.0.1:1", "--count", "1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--admin-listen"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn an_admin_address_on_a_shards_port_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let port = common::free_port_pair("127.0.0.1");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ringmq"))
        .args(["serve", "--cores", "0,1", "--listen", &format!("127.0.0.1:{port}")])
        .args(["--segment-mib", "16", "--cache-mib", "16"])
        .args(common::SHARED_HOST)
        .args(["--admin-listen", &format!("127.0.0.1:{}", port + 1), "--data-dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("one of the shards' listen addresses"), "{out:?}");
}

#[test]
fn kafka_requests_are_counted_and_timed_by_api() {
    let dir = tempfile::tempdir().unwrap();
    let admin = format!("127.0.0.1:{}", common::free_port_pair("127.0.0.1"));
    let (broker, kafka) = common::kafka_broker(dir.path(), &["--admin-listen", &admin]);
    broker.client().create_topic("orders", 2, 0).unwrap();
    let lines: String = (0..100).map(|i| format!("v{i}\n")).collect();
    let out =
        common::output_with_stdin(common::tools::command("kcat").args(["-b", &kafka, "-P", "-t", "orders"]), &lines);
    assert!(out.status.success(), "kcat -P: {}", String::from_utf8_lossy(&out.stderr));

    let e = scrape(&admin, "/metrics");
    assert_eq!(total(&e, "ringmq_produce_messages", &[("api", "kafka_Produce"), ("topic", "orders")]), 100.0);
    for api in ["kafka_ApiVersions", "kafka_Metadata", "kafka_Produce"] {
        let requests = total(&e, "ringmq_requests", &[("api", api)]);
        assert!(requests >= 1.0, "{api}: {requests} requests");
        assert_eq!(timed(&e, api), requests, "{api}: every request answered is timed");
    }
}
