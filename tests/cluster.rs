//! Cluster mode's first piece: a node registers with etcd under a lease,
//! `ringmq cluster status` lists it, a clean stop removes it at once and a
//! kill -9 removes it when its lease runs out.

mod common;

use common::etcd::{cluster_status, wait_for_status, Etcd};
use common::Broker;
use std::process::Command;
use std::time::Duration;

/// The node lines of `ringmq cluster status` (the group lines follow them).
fn node_lines(lines: &[String]) -> Vec<String> {
    lines.iter().filter(|l| l.contains(" node=")).cloned().collect()
}

fn status(url: &str) -> Vec<String> {
    node_lines(&cluster_status(url))
}

/// Polls the node lines until `done` holds, for at most `limit`.
fn wait_for(url: &str, limit: Duration, done: impl Fn(&[String]) -> bool) -> Vec<String> {
    node_lines(&wait_for_status(url, limit, |lines| done(&node_lines(lines))))
}

#[test]
fn nodes_register_under_a_lease_and_leave_on_stop_or_when_it_runs_out() {
    let dir = tempfile::tempdir().unwrap();
    let etcd = Etcd::start(&dir.path().join("etcd"));
    let join = |node: &str, data: &str| {
        let args = ["--cluster", &etcd.url, "--broker-group", "g1", "--node", node, "--lease-ms", "1000"];
        let listen = format!("127.0.0.1:{}", common::free_port_pair("127.0.0.1"));
        Broker::start_listening(&dir.path().join(data), &listen, &args)
    };
    let mut a = join("a", "a");
    let mut b = join("b", "b");
    let lines = status(&etcd.url);
    assert_eq!(lines.len(), 2, "both nodes are registered once they serve: {lines:?}");
    assert!(lines[0].starts_with("broker_group=g1 node=a ") && lines[0].contains(&format!("advertise={}", a.addr())));
    assert!(lines[1].starts_with("broker_group=g1 node=b ") && lines[1].contains(&format!("advertise={}", b.addr())));

    a.stop();
    let lines = status(&etcd.url);
    assert_eq!(lines.len(), 1, "a clean stop revokes the lease at once: {lines:?}");
    assert!(lines[0].starts_with("broker_group=g1 node=b "));

    b.kill9();
    let lines = wait_for(&etcd.url, Duration::from_secs(30), |l| l.is_empty());
    assert!(lines.is_empty(), "a killed node is gone once its lease runs out: {lines:?}");
}

/// `ringmq serve` of a node whose broker group `flag` names, with an etcd
/// address where nothing listens: whether it started, and what it said.
fn serve_without_etcd(flag: &str) -> (bool, String) {
    let dir = tempfile::tempdir().unwrap();
    let port = common::ports::free_ports("127.0.0.1", 1);
    let out = Command::new(env!("CARGO_BIN_EXE_ringmq"))
        .args(["serve", "--listen", "127.0.0.1:9", "--cores", "0", "--segment-mib", "16", "--cache-mib", "16"])
        .arg("--data-dir")
        .arg(dir.path())
        .args(["--cluster", &format!("etcd://127.0.0.1:{port}"), flag, "g1", "--node", "a"])
        .output()
        .expect("run ringmq serve");
    (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn a_node_that_cannot_reach_etcd_refuses_to_start_and_says_why() {
    let (started, err) = serve_without_etcd("--broker-group");
    assert!(!started);
    assert!(err.contains("cannot register with etcd") && err.contains("is etcd running"), "{err}");
}

#[test]
fn the_old_group_flag_still_names_the_broker_group_and_says_its_new_name() {
    let (_, err) = serve_without_etcd("--group");
    assert!(err.contains("--group") && err.contains("--broker-group"), "the old flag is warned for: {err}");
    assert!(err.contains("cannot register with etcd"), "and taken as the broker group: {err}");
}
