//! SASL on the Kafka listener with stock clients: kcat, kafka-python
//! (SaslHandshake v0, bare tokens) and confluent-kafka (SaslAuthenticate)
//! log in with SCRAM-SHA-256/512, and PLAIN over TLS; wrong passwords,
//! unknown users and clients that do not log in are refused.

mod common;

use common::certs::{path, Ca};
use common::{free_port_pair, Broker};
use std::path::Path;

/// A data directory with alice (password alice-secret), made offline.
fn with_alice(dir: &Path) -> std::path::PathBuf {
    let data = dir.join("data");
    common::create_user(&data, "alice", "alice-secret");
    data
}

/// A broker that requires a login, with its Kafka listener; the listener's address.
fn broker(data: &Path, extra: &[String]) -> (Broker, String) {
    let kafka = format!("127.0.0.1:{}", free_port_pair("127.0.0.1"));
    // alice is a super user here: authorization is tests/kafka_acl.rs's.
    let mut args = vec!["--auth-required".to_string(), "--super-users".into(), "alice".into()];
    args.extend(["--kafka-listen".into(), kafka.clone()]);
    args.extend_from_slice(extra);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    (Broker::start(data, &args), kafka)
}

fn kcat(kafka: &str, sasl: &[&str], action: &[&str], stdin: &str) -> std::process::Output {
    let mut command = common::tools::command("kcat");
    command.args(["-b", kafka, "-m", "5"]).args(sasl.iter().flat_map(|x| ["-X", x])).args(action);
    common::output_with_stdin(&mut command, stdin)
}

fn python(script_args: &[&str]) {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/kafka_clients/python_sasl.py");
    let out = common::tools::python(&["kafka", "confluent_kafka"])
        .arg(script)
        .args(script_args)
        .output()
        .expect("run python3");
    println!("{}", String::from_utf8_lossy(&out.stdout));
    assert!(out.status.success(), "python_sasl.py {script_args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn kcat_logs_in_with_scram_and_clients_without_a_valid_login_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, kafka) = broker(&with_alice(dir.path()), &[]);
    let client = broker.client_as("alice", "alice-secret");
    client.create_topic("orders", 2, 0).unwrap();
    for mechanism in ["SCRAM-SHA-256", "SCRAM-SHA-512"] {
        let m = format!("sasl.mechanisms={mechanism}");
        let login = ["security.protocol=SASL_PLAINTEXT", &m, "sasl.username=alice", "sasl.password=alice-secret"];
        let out = kcat(&kafka, &login, &["-P", "-t", "orders", "-p", "0"], &format!("via {mechanism}\n"));
        assert!(out.status.success(), "kcat -P with {mechanism}: {}", String::from_utf8_lossy(&out.stderr));
        let out = kcat(&kafka, &login, &["-C", "-t", "orders", "-p", "0", "-o", "beginning", "-e"], "");
        assert!(String::from_utf8_lossy(&out.stdout).contains(&format!("via {mechanism}")), "kcat -C with {mechanism}");
    }
    let wrong = ["security.protocol=SASL_PLAINTEXT", "sasl.mechanisms=SCRAM-SHA-256", "sasl.username=alice"];
    let out = kcat(&kafka, &[wrong.as_slice(), &["sasl.password=guess"]].concat(), &["-L"], "");
    assert!(!out.status.success(), "a wrong password is refused");
    let out = kcat(&kafka, &[], &["-L"], "");
    assert!(!out.status.success(), "a client that does not log in is refused");
    let out = kcat(
        &kafka,
        &[
            "security.protocol=SASL_PLAINTEXT",
            "sasl.mechanisms=PLAIN",
            "sasl.username=alice",
            "sasl.password=alice-secret",
        ],
        &["-L"],
        "",
    );
    assert!(!out.status.success(), "PLAIN in the clear is refused");
}

#[test]
fn kafka_python_and_confluent_log_in_with_scram_in_the_clear_and_with_plain_too_over_tls() {
    let dir = tempfile::tempdir().unwrap();
    let data = with_alice(dir.path());
    let (plain_broker, plain_kafka) = broker(&data, &[]);
    plain_broker.client_as("alice", "alice-secret").create_topic("logins", 2, 0).unwrap();
    python(&[&plain_kafka, "SASL_PLAINTEXT"]);
    drop(plain_broker);

    let ca = Ca::new(dir.path(), "ca");
    let (tls_broker, tls_kafka) = broker(&data, &ca.issue("broker", "localhost", 10).serve_args());
    // The topic made through the first broker is in the data directory they share.
    let _serving = tls_broker;
    python(&[&tls_kafka, "SASL_SSL", &path(&ca.pem)]);
}
