//! ACLs on the Kafka listener, with stock clients logged in as alice:
//! without rules nothing is listed or allowed; each rule allows exactly its
//! operation (topics, groups, the cluster, prefixes); a deny beats an allow.

mod common;

use common::{free_port_pair, Broker};
use ringmq::security::acl::{Acl, Operation, PatternType, Permission, ResourceType};

fn rule(resource: ResourceType, pattern: PatternType, name: &str, operation: Operation, permission: Permission) -> Acl {
    Acl { principal: "User:alice".into(), resource, pattern, name: name.into(), operation, permission }
}

fn phase(kafka: &str, name: &str) {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/kafka_clients/python_acl.py");
    let out =
        common::tools::python(&["kafka", "confluent_kafka"]).args([script, kafka, name]).output().expect("run python3");
    println!("{}", String::from_utf8_lossy(&out.stdout));
    assert!(out.status.success(), "python_acl.py {name}: {}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn kafka_clients_get_only_what_the_acls_allow_and_a_deny_beats_an_allow() {
    use Operation::*;
    use PatternType::*;
    use Permission::*;
    use ResourceType::*;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    common::create_user(&data, "admin", "admin-pw");
    common::create_user(&data, "alice", "alice-pw");
    let kafka = format!("127.0.0.1:{}", free_port_pair("127.0.0.1"));
    let broker = Broker::start(&data, &["--auth-required", "--super-users", "admin", "--kafka-listen", &kafka]);
    let admin = broker.client_as("admin", "admin-pw");
    admin.create_topic("orders", 2, 0).unwrap();
    admin.create_topic("secret", 2, 0).unwrap();

    phase(&kafka, "none");
    admin
        .create_acls(&[
            rule(Topic, Literal, "orders", Write, Allow),
            rule(Topic, Literal, "orders", Read, Allow),
            rule(Group, Literal, "g1", Read, Allow),
            rule(Cluster, Literal, "ringmq-cluster", Create, Allow),
            rule(Topic, Prefixed, "alice-", Delete, Allow),
        ])
        .unwrap();
    phase(&kafka, "granted");
    admin.create_acls(&[rule(Topic, Literal, "orders", Read, Deny)]).unwrap();
    phase(&kafka, "denied");
}
