//! A short embedded run writes a summary with zero lost messages, and two
//! runs compare into a chart.

use clap::Parser;
use ringmq_bench::{compare, run};

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    args: run::RunArgs,
}

fn short_run(out: &std::path::Path, rate: &str) -> run::Outcome {
    let cli = Cli::parse_from([
        "run",
        "--embedded",
        "--duration",
        "2s",
        "--warmup",
        "500ms",
        "--rate",
        rate,
        "--producers",
        "1",
        "--consumers",
        "1",
        "--queues",
        "4",
    ]);
    let outcome = run::run(cli.args).expect("the run completes");
    run::write_out(&outcome, out).unwrap();
    outcome
}

#[test]
fn an_embedded_run_reports_no_loss_and_runs_compare_into_a_chart() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("slow-rate"), dir.path().join("fast-rate"));
    let first = short_run(&a, "500");
    let s = &first.summary;
    assert_eq!((s.lost, s.duplicates, s.errors), (0, 0, 0));
    assert!(s.acked > 0 && s.received == s.acked, "{s:?}");
    assert!((s.msgs_per_s() - 500.0).abs() < 100.0, "open loop holds the rate: {}", s.msgs_per_s());
    let json = std::fs::read_to_string(a.join("summary.json")).unwrap();
    assert!(json.contains("\"lost\":0") && json.contains("\"p9999_us\""), "{json}");
    // Each measured message's send delay is part of its publish latency.
    let (delay, publish) = (&first.send_delay, &first.publish);
    assert_eq!(delay.len(), publish.len(), "one send delay per measured message");
    assert!(delay.max() <= publish.max() && delay.value_at_quantile(0.5) <= publish.value_at_quantile(0.5));
    assert!(a.join("send_delay.hgrm").exists());
    short_run(&b, "2000");
    let (svg, png) = compare::run(&[a.clone(), b.clone()], &[], dir.path()).unwrap();
    let png = std::fs::read(png).unwrap();
    assert_eq!(&png[1..4], b"PNG");
    let svg = std::fs::read_to_string(svg).unwrap();
    // plotters writes each text on a line of its own inside its element.
    for run in ["slow-rate", "fast-rate"] {
        let legend = format!(">\n{run}: ringmq native (durable acks, async sends)\n<");
        assert!(svg.contains(&legend), "each run in the legend, with its broker and durability: {svg}");
    }
    let table = compare::table(&[compare::load(&a).unwrap(), compare::load(&b).unwrap()]);
    assert!(table.starts_with("#1 slow-rate: ringmq native (durable acks, async sends), 5"), "{table}");
    assert!(table.contains("#2 fast-rate: ringmq native") && table.contains("#2/#1"), "{table}");
    let rates = table.lines().find(|l| l.trim_start().starts_with("msgs/s")).expect("a msgs/s row");
    let ratio: f64 = rates.split_whitespace().last().unwrap().parse().unwrap();
    assert!((3.0..5.0).contains(&ratio), "2000 msgs/s against 500: {rates}");
    assert!(
        !std::env::current_dir().unwrap().read_dir().unwrap().any(|e| e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .starts_with("ringmq-bench-data")),
        "the embedded broker's data directory is removed"
    );
}

#[test]
fn a_group_run_with_a_member_restart_reports_latency_during_and_outside_the_rebalance() {
    let dir = tempfile::tempdir().unwrap();
    let cli = Cli::parse_from([
        "run",
        "--embedded",
        "--duration",
        "3s",
        "--warmup",
        "500ms",
        "--rate",
        "1000",
        "--producers",
        "1",
        "--consumers",
        "2",
        "--queues",
        "4",
        "--group",
        "bench-group",
        "--restart-member-at",
        "1s",
    ]);
    let outcome = run::run(cli.args).expect("the run completes");
    let s = &outcome.summary;
    assert_eq!((s.lost, s.errors), (0, 0), "{s:?}");
    let r = outcome.rebalance.as_ref().expect("the member restarted");
    assert!(!r.during.is_empty() && !r.outside.is_empty());
    assert_eq!(r.during.len() + r.outside.len(), outcome.e2e.len(), "every measured message is in one of them");
    run::write_out(&outcome, dir.path()).unwrap();
    let json = std::fs::read_to_string(dir.path().join("summary.json")).unwrap();
    assert!(json.contains("\"rebalance\":{\"seconds\":") && json.contains("\"during\":{\"p50_us\""), "{json}");
}

/// A one-shard broker on loopback in `dir`, with a Kafka listener on `kafka` if given.
fn one_shard_broker(dir: &std::path::Path, kafka: Option<std::net::SocketAddr>) -> ringmq::server::Server {
    let mut cfg = ringmq::server::ServerConfig::new(dir.join("data"));
    cfg.cores = vec![0];
    cfg.listen = "127.0.0.1:0".parse().unwrap();
    cfg.segment_bytes = 64 << 20;
    cfg.kafka_listen = kafka;
    ringmq::server::start(cfg).expect("a broker")
}

/// A native run with --delete-topic deletes the topic it created at its
/// end, and keeps one that existed before it.
#[test]
fn a_native_run_deletes_only_the_topic_it_created() {
    let dir = tempfile::tempdir().unwrap();
    let server = one_shard_broker(dir.path(), None);
    let addr = server.addrs[0].to_string();
    let native = ringmq::client::Client::connect(ringmq::client::ClientConfig::new(addr.clone())).unwrap();
    native.create_topic("existing", 2, 0).unwrap();
    for topic in ["existing", "made-by-the-run"] {
        let args = ["run", "--broker", &addr, "--topic", topic, "--delete-topic", "--duration", "1s"];
        let s = run::run(Cli::parse_from(args.into_iter().chain(["--warmup", "200ms"])).args).unwrap().summary;
        assert!(s.received > 0 && s.lost == 0, "{:?}", (s.received, s.lost));
    }
    assert_eq!(native.topic("existing").unwrap().queue_shards.len(), 2, "a topic that existed is kept");
    let gone = native.topic("made-by-the-run").map(|t| t.queue_shards.len());
    assert!(gone.is_err(), "the topic the run made is deleted: {gone:?}");
    server.stop();
}

/// Without the `kafka` feature (librdkafka), a Kafka run is refused with what to build.
#[cfg(not(feature = "kafka"))]
#[test]
fn a_kafka_run_without_the_feature_says_how_to_build_it() {
    let cli = Cli::parse_from(["run", "--embedded", "--protocol", "kafka", "--duration", "1s", "--warmup", "0s"]);
    let error = run::run(cli.args).err().expect("refused");
    assert!(error.contains("--features kafka"), "{error}");
}

/// With it, a short Kafka-protocol run against the embedded broker's Kafka
/// listener loses nothing (`cargo test -p ringmq-bench --features kafka`).
#[cfg(feature = "kafka")]
#[test]
fn a_kafka_protocol_run_reports_no_loss() {
    let args = ["run", "--embedded", "--protocol", "kafka", "--duration", "2s", "--warmup", "500ms"];
    let cli = Cli::parse_from(args.into_iter().chain(["--label", "ringmq 9092", "--durability", "fsync, then ack"]));
    let outcome = run::run(cli.args).expect("the run completes");
    let s = &outcome.summary;
    assert!(s.received > 0 && s.lost == 0 && s.errors == 0, "{:?}", (s.received, s.lost, s.errors));
    assert_eq!((s.broker.as_str(), s.durability.as_str()), ("ringmq 9092", "fsync, then ack"), "as the run was told");
}

/// A workload file drives the Kafka protocol as it does the native one:
/// its keys set the run, and each of its subscriptions (a consumer group of
/// its own) receives every message.
#[cfg(feature = "kafka")]
#[test]
fn a_workload_file_drives_a_kafka_run() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("fanout.toml");
    let workload = "name = \"2 subscriptions over Kafka\"\nqueues = 3\nmessage_size = 200\nproducers = 1\n\
                    rate = 1000\nconsumers_per_queue = 2\nconsumers = 1\nwarmup = \"300ms\"\nduration = \"1s\"\n";
    std::fs::write(&file, workload).unwrap();
    let cli = Cli::parse_from(["run", "--embedded", "--protocol", "kafka", "--workload", file.to_str().unwrap()]);
    let outcome = run::run(cli.args).expect("the run completes");
    let s = &outcome.summary;
    assert_eq!((s.lost, s.errors, s.duplicates), (0, 0, 0), "{s:?}");
    assert_eq!((s.message_size, s.consumers_per_queue, s.protocol.as_str()), (200, 2, "kafka"), "{s:?}");
    assert!(s.acked > 800, "about 1000 msgs/s for 1.3 s: {s:?}");
    assert_eq!(s.received, 2 * s.acked, "each of the 2 subscriptions received every message: {s:?}");
}

/// A Kafka run given only a Kafka listener (no native one, as against a
/// broker that is not ringmq): the topic is created through Kafka's admin
/// API with the partitions asked for, the run loses nothing, and its
/// --kafka-config settings are in summary.json. With --delete-topic a
/// topic the run created is deleted through DeleteTopics at its end, and
/// one that existed before it is kept.
#[cfg(feature = "kafka")]
#[test]
fn a_kafka_run_sets_its_topic_up_through_the_admin_api_with_no_native_listener() {
    let dir = tempfile::tempdir().unwrap();
    let kafka = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let server = one_shard_broker(dir.path(), Some(kafka));
    let kafka = kafka.to_string();
    let args = ["run", "--protocol", "kafka", "--kafka-broker", &kafka, "--topic", "admin-made", "--queues", "3"];
    let mut args: Vec<&str> = args.to_vec();
    args.extend([
        "--kafka-config",
        "acks=all",
        "--kafka-config",
        "linger.ms=1",
        "--duration",
        "2s",
        "--warmup",
        "500ms",
    ]);
    let cli = Cli::parse_from(args);
    let outcome = run::run(cli.args).expect("the run completes");
    let s = &outcome.summary;
    assert!(s.received > 0 && s.lost == 0 && s.errors == 0, "{:?}", (s.received, s.lost, s.errors));
    let native =
        ringmq::client::Client::connect(ringmq::client::ClientConfig::new(server.addrs[0].to_string())).unwrap();
    assert_eq!(native.topic("admin-made").unwrap().queue_shards.len(), 3, "created with the partitions asked for");
    let out = dir.path().join("out");
    run::write_out(&outcome, &out).unwrap();
    let json = std::fs::read_to_string(out.join("summary.json")).unwrap();
    assert!(json.contains(r#""protocol":"kafka""#), "{json}");
    assert!(json.contains(r#""kafka_config":{"acks":"all","linger.ms":"1"}"#), "{json}");
    let broker = format!(r#""kafka_broker":{{"bootstrap":"{kafka}","#);
    assert!(json.contains(&broker) && json.contains(r#""brokers":1}"#), "the broker its metadata describes: {json}");
    // Named by the cluster id its Metadata gives: the one the data directory keeps.
    let id = std::fs::read_to_string(dir.path().join("data/cluster-id")).unwrap();
    assert!(json.contains(&format!(r#""cluster_id":"{id}""#)), "{json}");
    let named = format!(r#""broker":"Kafka cluster {id}","durability":"acks=all""#);
    assert!(json.contains(&named), "{json}");

    let deleting = |topic: &str| {
        let args = ["run", "--protocol", "kafka", "--kafka-broker", &kafka, "--topic", topic, "--delete-topic"];
        let cli = Cli::parse_from(args.into_iter().chain(["--duration", "1s", "--warmup", "200ms"]));
        let s = run::run(cli.args).expect("the run completes").summary;
        assert!(s.received > 0 && s.lost == 0, "{:?}", (s.received, s.lost));
    };
    deleting("admin-made");
    assert!(native.topic("admin-made").is_ok(), "a topic that existed before the run is kept");
    deleting("made-and-deleted");
    let gone = native.topic("made-and-deleted").map(|t| t.queue_shards.len());
    assert!(gone.is_err(), "the topic the run made is deleted: {gone:?}");
    server.stop();
}

/// The tansu broker on `port`, stopped when dropped.
#[cfg(feature = "kafka")]
struct Tansu(std::process::Child);

#[cfg(feature = "kafka")]
impl Drop for Tansu {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `tansu` on PATH or in cargo's bin directory, where `cargo install tansu` puts it.
#[cfg(feature = "kafka")]
fn tansu_binary() -> Option<std::path::PathBuf> {
    let cargo_bin = std::env::var_os("HOME").map(|h| std::path::Path::new(&h).join(".cargo/bin"));
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path).chain(cargo_bin).map(|dir| dir.join("tansu")).find(|p| p.is_file())
}

/// A librdkafka newer than Debian's 2.0.2, which cannot read tansu 0.6.0's
/// ApiVersions v3 answer (it stops in the answer's tagged fields): the one
/// the confluent-kafka wheel ships (tests/prerequisites.txt installs it),
/// as a directory holding `librdkafka.so.1` to put on LD_LIBRARY_PATH.
#[cfg(feature = "kafka")]
fn newer_librdkafka(into: &std::path::Path) -> Option<std::path::PathBuf> {
    let script = "import confluent_kafka, os; print(os.path.join(os.path.dirname(confluent_kafka.__file__), '..', 'confluent_kafka.libs'))";
    let out = std::process::Command::new("/usr/bin/python3").args(["-c", script]).output().ok()?;
    let libs = std::path::PathBuf::from(String::from_utf8(out.stdout).ok()?.trim());
    let lib = std::fs::read_dir(libs).ok()?.flatten().map(|e| e.path()).find(|p| {
        p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("librdkafka") && n.ends_with(".so.1"))
    })?;
    std::os::unix::fs::symlink(lib, into.join("librdkafka.so.1")).ok()?;
    Some(into.to_path_buf())
}

/// Against a broker that is not ringmq: tansu (a Kafka-compatible broker in
/// Rust, `cargo install tansu --locked --features dynostore`), in memory on
/// loopback, driven by the ringmq-bench binary with --kafka-broker alone:
/// it creates its topic through tansu's admin API and loses nothing.
/// Skipped, saying so, where tansu or a new enough librdkafka is missing
/// (failed instead with RINGMQ_REQUIRE_TANSU set, as CI sets it).
#[cfg(feature = "kafka")]
#[test]
fn a_kafka_run_drives_tansu_a_broker_that_is_not_ringmq() {
    let skip = |why: &str| {
        assert!(std::env::var_os("RINGMQ_REQUIRE_TANSU").is_none(), "RINGMQ_REQUIRE_TANSU is set, and {why}");
        eprintln!("skipped: {why}");
    };
    let Some(binary) = tansu_binary() else {
        return skip("tansu is not installed (cargo install tansu --locked --features dynostore)");
    };
    let dir = tempfile::tempdir().unwrap();
    let Some(librdkafka) = newer_librdkafka(dir.path()) else {
        return skip("no librdkafka newer than 2.0.2 (pip install confluent-kafka ships one)");
    };
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let url = format!("tcp://127.0.0.1:{port}");
    let child = std::process::Command::new(&binary)
        .args(["broker", "--listener-url", &url, "--advertised-listener-url", &url])
        .args(["--storage-engine", "memory://tansu/"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start tansu");
    let mut tansu = Tansu(child);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if let Some(status) = tansu.0.try_wait().unwrap() {
            let mut said = String::new();
            std::io::Read::read_to_string(tansu.0.stderr.as_mut().unwrap(), &mut said).unwrap();
            panic!("tansu exited ({status}); it needs the dynostore feature for memory:// storage:\n{said}");
        }
        assert!(std::time::Instant::now() < deadline, "tansu listens within 30 s");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let kafka = format!("127.0.0.1:{port}");
    let out = dir.path().join("out");
    let run = std::process::Command::new(env!("CARGO_BIN_EXE_ringmq-bench"))
        .env("LD_LIBRARY_PATH", &librdkafka)
        .args(["run", "--protocol", "kafka", "--kafka-broker", &kafka, "--topic", "on-tansu", "--queues", "3"])
        .args(["--rate", "1000", "--duration", "3s", "--warmup", "500ms", "--producers", "1", "--consumers", "1"])
        .arg("--out")
        .arg(&out)
        .output()
        .expect("run ringmq-bench");
    let said = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "the run against tansu completes:\n{said}");
    let summary: serde_json::Value = serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    assert!(summary["received"].as_u64() > Some(0), "{summary}");
    assert_eq!((summary["lost"].as_u64(), summary["errors"].as_u64()), (Some(0), Some(0)), "{summary}");
    assert_eq!(summary["kafka_broker"]["bootstrap"], kafka.as_str());
    assert_eq!(summary["kafka_broker"]["cluster_id"], "tansu_cluster", "the broker is tansu: {summary}");
    assert_eq!(
        (summary["broker"].as_str(), summary["durability"].as_str()),
        (Some("Kafka cluster tansu_cluster"), Some("acks=all"))
    );
    drop(tansu);
}
