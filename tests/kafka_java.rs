//! The Apache Kafka Java client (kafka-clients 4.3, unmodified: the jar a
//! PyPI wheel ships, see tests/prerequisites.txt) against the Kafka listener:
//! the reference client's records, compression, commit metadata, admin
//! APIs and the cluster it describes, through `tests/kafka_clients/JavaClients.java`.

mod common;

/// Runs a phase of the Java program against a new broker started with `extra`.
fn java_phase(phase: &str, extra: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let (_broker, kafka) = common::kafka_broker(dir.path(), extra);
    run_java(&[&kafka, phase])
}

fn run_java(args: &[&str]) -> String {
    let out = common::tools::java_kafka_client().args(args).output().expect("run java");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    text
}

/// Every record shape, in each codec, reads back field by field as the Java
/// producer sent it, and a commit's metadata comes back.
#[test]
fn the_java_client_reads_back_every_record_shape_in_each_codec_and_commit_metadata() {
    let text = java_phase("exact", &[]);
    for codec in ["none", "gzip", "snappy", "lz4", "zstd"] {
        assert!(text.contains(&format!("exact {codec}: 5 shapes")), "{text}");
    }
    assert!(text.contains("commit metadata read back"), "{text}");
}

/// The Java AdminClient: topic configs created, altered, described and
/// enforced; records deleted; groups listed, described and deleted.
#[test]
fn the_java_admin_client_manages_configs_records_and_groups() {
    let text = java_phase("admin", &["--retention-check-ms", "200"]);
    for said in
        ["configs created, altered, described and enforced", "records deleted below 6", "an empty group deleted"]
    {
        assert!(text.contains(said), "{text}");
    }
}

/// On a broker that requires logins, the Java AdminClient (as a super user)
/// makes a SCRAM user from a salted password, who then logs in; ACLs it
/// creates are enforced and deleted; client quotas set and removed.
#[test]
fn the_java_admin_client_manages_users_acls_and_quotas() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    common::create_user(&data, "alice", "alice-secret");
    let (_broker, kafka) = common::kafka_broker(&data, &["--auth-required", "--super-users", "alice"]);
    let text = run_java(&[&kafka, "security", "alice", "alice-secret"]);
    for said in [
        "logged in; ACLs created, enforced, deleted",
        "authorized operations as the rules give them",
        "quota set, described and removed",
        "the user deleted",
    ] {
        assert!(text.contains(said), "{text}");
    }
}

/// The Java AdminClient's describeCluster: the broker's id in Kafka's form
/// (22 characters of base64url), kept across a restart; each shard a
/// broker at its Kafka port; a broker as the controller.
#[test]
fn the_java_admin_client_describes_the_cluster_by_an_id_kept_across_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let (mut broker, kafka) = common::kafka_broker(dir.path(), &[]);
    let first = run_java(&[&kafka, "cluster"]);
    let id = |text: &str| text.split("cluster ").nth(1).and_then(|t| t.split(' ').next()).unwrap_or("").to_string();
    let made = id(&first);
    let kafka_form = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    assert!(made.len() == 22 && made.chars().all(kafka_form), "{first}");
    assert!(first.contains("with 2 brokers, controller 0"), "{first}");
    let port: u16 = kafka.rsplit(':').next().unwrap().parse().unwrap();
    for (shard, port) in [(0, port), (1, port + 1)] {
        assert!(first.contains(&format!("broker {shard} at 127.0.0.1:{port}")), "{first}");
    }
    broker.kill9();
    broker.restart();
    let again = run_java(&[&kafka, "cluster"]);
    assert_eq!(id(&again), made, "{again}");
}

/// Two Java consumers with the CooperativeStickyAssignor (incremental
/// rebalances: a member keeps its partitions while the group rebalances)
/// split two partitions 1+1; when one leaves the other takes both over from
/// the committed offsets, and every record is read once.
#[test]
fn java_consumers_with_the_cooperative_sticky_assignor_split_and_take_over() {
    assert!(java_phase("cooperative", &[]).contains("cooperative: split 1+1, took over on leave, 140 read once"));
}

/// Two Java consumers with `group.protocol=consumer` (KIP-848: the broker
/// assigns, members reconcile incrementally) split two partitions 1+1; when
/// one leaves the other takes both over, and every record is read once.
#[test]
fn java_consumers_of_the_kip_848_consumer_protocol_split_and_take_over() {
    let text = java_phase("consumer_protocol", &[]);
    assert!(text.contains("consumer_protocol: split 1+1, took over on leave, 140 read once"), "{text}");
}

/// KIP-848 members subscribed by a broker-side regex with static instance
/// ids: the matching topics split 1+1, a member that restarts gets its
/// partition back (the other never holds it), and a new matching topic is
/// assigned.
#[test]
fn java_static_members_subscribed_by_regex_keep_their_partitions_across_a_restart() {
    let text = java_phase("static_regex", &[]);
    assert!(text.contains("static_regex: split 1+1 by regex, a restart kept its partition"), "{text}");
}

/// Kafka transactions with the Java client: committed and aborted
/// transactions with offsets, read_committed and read_uncommitted readers,
/// fencing by a second producer with the same transactional.id, and a
/// transaction aborted by the broker at its timeout.
#[test]
fn java_transactions_commit_abort_fence_and_time_out() {
    let text = java_phase("transactions", &[]);
    for said in [
        "read_committed read 16 of 22 in order, offsets committed",
        "a second producer with the id fenced the first",
        "a transaction past its timeout was aborted by the broker",
    ] {
        assert!(text.contains(said), "{text}");
    }
}
