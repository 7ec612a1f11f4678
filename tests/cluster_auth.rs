//! Users, ACLs and quotas in cluster mode: kept in etcd, so every node of
//! every broker group agrees. The first user is made straight in etcd
//! (`ringmq user create --cluster`); a user or rule an admin makes through
//! one group's node holds at another group's node; a deleted user can no
//! longer log in anywhere.

mod common;

use common::etcd::Etcd;
use common::{free_port_pair, output_with_stdin, Broker};
use ringmq::client::{Client, ClientConfig, ClientError, Message, Producer, ProducerConfig, SaslLogin};
use ringmq::protocol::ErrorCode;
use ringmq::security::acl::{Acl, Operation, PatternType, Permission, ResourceType};
use ringmq::security::sasl::SaslMechanism;
use ringmq::security::scram::{Mechanism, ITERATIONS_MIN};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

const SHA256: SaslMechanism = SaslMechanism::Scram(Mechanism::ScramSha256);

fn node(etcd: &Etcd, dir: &std::path::Path, group: &str, name: &str, ip: &str) -> Broker {
    let listen = format!("{ip}:{}", free_port_pair(ip));
    let args =
        ["--cluster", &etcd.url, "--broker-group", group, "--node", name, "--lease-ms", "1000", "--insync-min", "1"];
    let auth = ["--auth-required", "--super-users", "admin"];
    let args: Vec<&str> = args.iter().chain(&auth).copied().collect();
    Broker::start_listening(&dir.join(name), &listen, &args)
}

fn login(addr: &str, user: &str, password: &str) -> Result<Arc<Client>, ClientError> {
    let mut config = ClientConfig::new(addr);
    config.sasl = Some(SaslLogin::new(SHA256, user, password));
    config.request_timeout = Duration::from_secs(20);
    Client::connect(config)
}

/// Retries `f` until it holds or `limit` passes (another node learns of a
/// change from its etcd watch).
fn eventually(limit: Duration, what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !f() {
        assert!(Instant::now() < deadline, "{what} within {limit:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn users_and_acls_made_through_one_group_hold_in_another() {
    let dir = tempfile::tempdir().unwrap();
    let etcd = Etcd::start(&dir.path().join("etcd"));
    let mut bootstrap = Command::new(env!("CARGO_BIN_EXE_ringmq"));
    bootstrap.args(["user", "create", "admin", "--cluster", &etcd.url]);
    let out = output_with_stdin(&mut bootstrap, "admin-pw\n");
    assert!(out.status.success(), "ringmq user create --cluster: {}", String::from_utf8_lossy(&out.stderr));
    let east = node(&etcd, dir.path(), "east", "e1", "127.0.0.21");
    let west = node(&etcd, dir.path(), "west", "w1", "127.0.0.22");

    let admin = login(east.addr(), "admin", "admin-pw").expect("the first user, made in etcd, logs in");
    admin.create_topic("orders", 4, 0).unwrap();
    admin.set_user("alice", "alice-pw", &[Mechanism::ScramSha256], ITERATIONS_MIN).unwrap();
    admin.set_user("bob", "bob-pw", &[Mechanism::ScramSha256], ITERATIONS_MIN).unwrap();
    let rule = |operation| Acl {
        principal: "User:alice".into(),
        resource: ResourceType::Topic,
        pattern: PatternType::Literal,
        name: "orders".into(),
        operation,
        permission: Permission::Allow,
    };
    admin.create_acls(&[rule(Operation::Write), rule(Operation::Describe)]).unwrap();

    // At the other group's node: alice logs in and writes every queue (both groups').
    let mut alice = None;
    eventually(Duration::from_secs(20), "west knows alice", || {
        alice = login(west.addr(), "alice", "alice-pw").ok();
        alice.is_some()
    });
    let alice = alice.unwrap();
    let producer = Producer::new(alice.clone(), ProducerConfig::default());
    // Round robin: the sends reach every queue, on both groups' leaders.
    for i in 0..8 {
        let message = Message::new(format!("m{i}").into_bytes());
        eventually(Duration::from_secs(20), "the ACL holds on both groups", || {
            producer.send("orders", &message).is_ok()
        });
    }
    let bob = login(west.addr(), "bob", "bob-pw").expect("bob logs in at west");
    match Producer::new(bob, ProducerConfig::default()).send("orders", &Message::new(b"x".to_vec())) {
        Err(ClientError::Broker { code: ErrorCode::NotAuthorized, .. }) => {}
        other => panic!("bob has no ACL: {other:?}"),
    }

    let mut list = Command::new(env!("CARGO_BIN_EXE_ringmq"));
    let listed = output_with_stdin(list.args(["user", "list", "--cluster", &etcd.url]), "");
    let listed = String::from_utf8_lossy(&listed.stdout);
    assert!(listed.contains("admin ") && listed.contains("alice ") && listed.contains("bob "), "{listed}");

    let admin_west = login(west.addr(), "admin", "admin-pw").unwrap();
    admin_west.delete_user("alice").unwrap();
    eventually(Duration::from_secs(20), "east forgets alice", || login(east.addr(), "alice", "alice-pw").is_err());
}
