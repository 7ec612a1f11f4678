//! A program that only produces and consumes depends on `ringmq-client`
//! alone, and that crate does not bring the broker with it: no storage
//! engine, async runtime, etcd client, Kafka codec, metrics exposition or
//! server-side TLS, with or without its `tls` feature.

use std::collections::BTreeSet;
use std::process::Command;

/// Crates of the broker that a client-only build must not compile.
const BROKER_ONLY: &[&str] = &[
    "ringmq",
    "ringmq-shards",
    "glommio",
    "tokio",
    "etcd-client",
    "tonic",
    "kafka-protocol",
    "prometheus-client",
    "futures-rustls",
    "x509-cert",
];

/// The names of the crates `ringmq-client` builds with `args` (normal and build dependencies).
fn client_crates(args: &[&str]) -> BTreeSet<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(["tree", "-p", "ringmq-client", "-e", "normal,build", "--prefix", "none"])
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run cargo tree");
    assert!(out.status.success(), "cargo tree: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).expect("cargo tree prints UTF-8");
    text.lines().filter_map(|line| line.split_whitespace().next()).map(str::to_string).collect()
}

fn assert_client_only(crates: &BTreeSet<String>) {
    let broker: Vec<&&str> = BROKER_ONLY.iter().filter(|c| crates.contains(**c)).collect();
    assert!(broker.is_empty(), "ringmq-client builds broker crates {broker:?}; all it builds: {crates:?}");
    for needed in ["ringmq-client", "ringmq-protocol", "ringmq-format"] {
        assert!(crates.contains(needed), "{needed} missing from {crates:?}");
    }
}

#[test]
fn the_client_crate_builds_none_of_the_brokers_dependencies() {
    let crates = client_crates(&[]);
    assert_client_only(&crates);
    assert!(!crates.contains("rustls"), "TLS is the tls feature's: {crates:?}");
}

#[test]
fn with_tls_the_client_crate_adds_rustls_and_still_none_of_the_brokers_dependencies() {
    let crates = client_crates(&["--features", "tls"]);
    assert_client_only(&crates);
    assert!(crates.contains("rustls") && crates.contains("ring"), "{crates:?}");
}
