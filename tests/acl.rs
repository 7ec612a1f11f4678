//! Authorization on the native protocol: with authentication on, a user
//! may do only what an ACL allows (deny wins, prefixes match, `User:*`
//! speaks for everyone), super users may do everything, a principal sees
//! only the topics it may describe, and each refusal is `NotAuthorized`
//! naming the operation and resource; rules are managed with `ringmq acl`.

mod common;

use common::Broker;
use ringmq::client::{Client, ClientError, Consumer, Message, Producer, ProducerConfig, StartFrom};
use ringmq::protocol::ErrorCode;
use ringmq::security::acl::{Acl, AclFilter, Operation, PatternType, Permission, ResourceType};
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

fn ringmq(args: &[&str], stdin: &str, password: &str) -> std::process::Output {
    common::output_with_stdin(
        Command::new(env!("CARGO_BIN_EXE_ringmq")).args(args).env("RINGMQ_PASSWORD", password),
        stdin,
    )
}

/// A broker with authentication on, super user admin, users alice and bob.
fn broker(dir: &Path) -> Broker {
    let data = dir.join("data");
    for user in ["admin", "alice", "bob"] {
        common::create_user(&data, user, &format!("{user}-pw"));
    }
    Broker::start(&data, &["--auth-required", "--super-users", "admin"])
}

fn allow(principal: &str, resource: ResourceType, pattern: PatternType, name: &str, operation: Operation) -> Acl {
    let (principal, name) = (principal.to_string(), name.to_string());
    Acl { principal, resource, pattern, name, operation, permission: Permission::Allow }
}

fn deny(principal: &str, resource: ResourceType, name: &str, operation: Operation) -> Acl {
    Acl { permission: Permission::Deny, ..allow(principal, resource, PatternType::Literal, name, operation) }
}

/// The refusal's message, asserting it is NotAuthorized.
fn refused<T: std::fmt::Debug>(result: Result<T, ClientError>) -> String {
    match result {
        Err(ClientError::Broker { code: ErrorCode::NotAuthorized, message }) => message,
        other => panic!("expected NotAuthorized, got {other:?}"),
    }
}

fn send(client: &Arc<Client>, topic: &str) -> Result<(), ClientError> {
    Producer::new(client.clone(), ProducerConfig::default()).send(topic, &Message::new(b"m".to_vec())).map(|_| ())
}

fn read(client: &Arc<Client>, topic: &str, group: &str) -> Result<usize, ClientError> {
    let mut consumer = Consumer::new(client.clone(), Some(group.to_string()));
    consumer.assign_all(topic, StartFrom::Earliest)?;
    let got = consumer.poll(Duration::from_secs(2))?.len();
    consumer.commit()?;
    Ok(got)
}

#[test]
fn each_operation_needs_an_acl_that_allows_it_and_a_deny_beats_an_allow() {
    use Operation::*;
    use PatternType::*;
    use ResourceType::*;
    let dir = tempfile::tempdir().unwrap();
    let broker = broker(dir.path());
    let admin = broker.client_as("admin", "admin-pw");
    for topic in ["orders", "orders-eu", "secret"] {
        admin.create_topic(topic, 2, 0).unwrap();
    }
    let alice = broker.client_as("alice", "alice-pw");
    assert!(alice.list_topics().unwrap().is_empty(), "no Describe: no topic is listed");
    let m = refused(send(&alice, "orders"));
    assert!(m.contains("User:alice may not Describe Topic \"orders\""), "names the operation and resource: {m}");

    admin
        .create_acls(&[
            allow("User:alice", Topic, Literal, "orders", Write),
            allow("User:alice", Topic, Prefixed, "orders", Read),
            allow("User:alice", Group, Literal, "g1", Read),
            deny("User:alice", Topic, "orders-eu", Read),
        ])
        .unwrap();
    let mut listed = alice.list_topics().unwrap();
    listed.sort();
    assert_eq!(listed, ["orders", "orders-eu"], "Read and Write imply Describe; secret stays hidden");
    send(&alice, "orders").expect("Write on orders is allowed");
    refused(send(&alice, "orders-eu"));
    assert_eq!(read(&alice, "orders", "g1").expect("Read on orders and g1"), 1);
    let m = refused(read(&alice, "orders-eu", "g1"));
    assert!(m.contains("Read Topic \"orders-eu\""), "the deny wins over the prefix's allow: {m}");
    refused(read(&alice, "orders", "g2"));
    refused(alice.list_offsets("secret", 0));

    refused(alice.create_topic("alice-new", 1, 0));
    admin.create_acls(&[allow("User:alice", Cluster, Literal, "ringmq-cluster", Create)]).unwrap();
    alice.create_topic("alice-new", 1, 0).expect("Create on the cluster");
    refused(alice.delete_topic("alice-new"));
    admin.create_acls(&[allow("User:alice", Topic, Prefixed, "alice-", Delete)]).unwrap();
    alice.delete_topic("alice-new").expect("Delete on alice-*");

    let bob = broker.client_as("bob", "bob-pw");
    refused(send(&bob, "orders"));
    admin.create_acls(&[allow("User:*", Topic, Literal, "orders", Write)]).unwrap();
    send(&bob, "orders").expect("User:* speaks for bob");

    refused(alice.create_acls(&[allow("User:alice", Topic, Literal, "secret", All)]));
    refused(alice.list_acls(&AclFilter::default()));
    let removed = admin
        .delete_acls(&AclFilter { principal: Some("User:alice".into()), resource: Some(Topic), ..AclFilter::default() })
        .unwrap();
    assert_eq!(removed, 4);
    refused(read(&alice, "orders", "g1"));

    // QueueCopy reads every stored batch of a queue: for cluster members alone.
    let mut w = ringmq::protocol::Writer::default();
    let queue = ringmq::protocol::messages::QueueRef { topic: "orders".into(), queue: 0 };
    ringmq::protocol::messages::QueueCopy { queue, offset: 0, max_bytes: 1 << 20, max_wait_ms: 0 }.encode(&mut w);
    let copy = |client: &Arc<Client>| client.call_queue("orders", 0, ringmq::protocol::ApiKey::QueueCopy, &w.buf);
    let m = refused(copy(&alice));
    assert!(m.contains("ClusterAction"), "names the operation: {m}");
    copy(&admin).expect("a super user may copy a queue");
}

#[test]
fn transactional_producer_groups_need_write_and_the_acl_command_manages_rules() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker(dir.path());
    let admin = broker.client_as("admin", "admin-pw");
    admin.create_topic("orders", 2, 0).unwrap();
    let as_admin = |args: &[&str]| {
        let mut all: Vec<&str> = args.to_vec();
        all.extend(["--broker", broker.addr(), "--user", "admin"]);
        let out = ringmq(&all, "", "admin-pw");
        assert!(out.status.success(), "ringmq {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    as_admin(&[
        "acl",
        "add",
        "--principal",
        "alice",
        "--topic",
        "orders",
        "--operation",
        "Write",
        "--operation",
        "Read",
    ]);
    let alice = broker.client_as("alice", "alice-pw");
    let tx = ringmq::client::TransactionProducer::start(
        alice.clone(),
        "tx1",
        ProducerConfig::default(),
        Arc::new(|_| ringmq::client::TxState::Commit),
    );
    refused(tx.send_half_only("orders", &Message::new(b"half".to_vec())));
    as_admin(&["acl", "add", "--principal", "alice", "--transactional-id", "tx1", "--operation", "Write"]);
    tx.send_half_only("orders", &Message::new(b"half".to_vec())).expect("Write on the producer group tx1");

    let listed = as_admin(&["acl", "list", "--principal", "alice"]);
    assert!(listed.contains("User:alice Allow Write Topic Literal orders"), "{listed}");
    assert!(listed.contains("User:alice Allow Write TransactionalId Literal tx1"), "{listed}");
    as_admin(&["acl", "add", "--principal", "alice", "--topic", "orders", "--operation", "Write", "--deny"]);
    refused(send(&alice, "orders"));
    assert!(as_admin(&["acl", "remove", "--principal", "alice", "--permission", "Deny"]).contains("removed 1 rules"));
    send(&alice, "orders").expect("the deny is gone");
    let denied = ringmq(&["acl", "list", "--broker", broker.addr(), "--user", "alice"], "", "alice-pw");
    assert!(!denied.status.success() && String::from_utf8_lossy(&denied.stderr).contains("NotAuthorized"));
}
