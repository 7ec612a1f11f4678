//! TLS on every listener: the SDK, the CLI and a stock Kafka client (kcat)
//! reach a broker that serves TLS; a client in the clear, one that trusts
//! another CA, and a broker certificate that expired are refused; with
//! client certificates required, a client without one, with one another CA
//! signed, or with an expired one is refused; SIGHUP reloads the
//! certificate while connections already up keep working; a follower
//! replicates from its leader over TLS.

mod common;

use common::certs::{path, Ca, Issued};
use common::etcd::Etcd;
use common::{free_port_pair, Broker};
use ringmq::client::{Client, ClientConfig, ClientError, Message, Producer, ProducerConfig};
use ringmq::security::tls::{ClientFiles, ClientTls};
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

/// A broker serving TLS with `cert` and these more flags.
fn tls_broker(dir: &Path, cert: &Issued, extra: &[&str]) -> Broker {
    let mut args = cert.serve_args();
    args.extend(extra.iter().map(|a| a.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    Broker::start(&dir.join("data"), &args)
}

fn client_tls(ca: &Path, identity: Option<&Issued>) -> ClientTls {
    let files = ClientFiles {
        ca: Some(ca.to_path_buf()),
        cert: identity.map(|i| i.cert.clone()),
        key: identity.map(|i| i.key.clone()),
    };
    ClientTls::load(&files).expect("client TLS files load")
}

fn connect(addr: &str, tls: Option<ClientTls>) -> Result<Arc<Client>, ClientError> {
    let mut config = ClientConfig::new(addr);
    config.tls = tls;
    config.request_timeout = Duration::from_secs(20);
    Client::connect(config)
}

fn send(client: &Arc<Client>, topic: &str, value: &str) {
    let producer = Producer::new(client.clone(), ProducerConfig::default());
    producer.send(topic, &Message::new(value.as_bytes().to_vec())).expect("a produce over TLS");
}

fn ringmq(args: &[&str], stdin: &str) -> std::process::Output {
    common::output_with_stdin(Command::new(env!("CARGO_BIN_EXE_ringmq")).args(args), stdin)
}

#[test]
fn the_sdk_the_cli_and_kcat_speak_tls_to_every_listener() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new(dir.path(), "ca");
    let server = ca.issue("broker", "localhost", 10);
    let kafka = format!("127.0.0.1:{}", free_port_pair("127.0.0.1"));
    let broker = tls_broker(dir.path(), &server, &["--kafka-listen", &kafka]);
    let ca_pem = path(&ca.pem);

    let client = connect(broker.addr(), Some(client_tls(&ca.pem, None))).expect("connect over TLS");
    client.create_topic("orders", 4, 0).unwrap();
    send(&client, "orders", "from the sdk");
    let out = ringmq(&["produce", "orders", "--broker", broker.addr(), "--tls-ca", &ca_pem], "from the cli\n");
    assert!(out.status.success(), "ringmq produce --tls-ca: {}", String::from_utf8_lossy(&out.stderr));
    let mut kcat = common::tools::command("kcat");
    kcat.args(["-b", &kafka, "-X", "security.protocol=ssl", "-X", &format!("ssl.ca.location={ca_pem}")]);
    let out = common::output_with_stdin(kcat.args(["-P", "-t", "orders", "-p", "0"]), "from kcat\n");
    assert!(out.status.success(), "kcat -P over TLS");

    let out = ringmq(&["consume", "orders", "--count", "3", "--broker", broker.addr(), "--tls-ca", &ca_pem], "");
    assert!(out.status.success(), "ringmq consume --tls-ca: {}", String::from_utf8_lossy(&out.stderr));
    let mut got: Vec<String> = String::from_utf8_lossy(&out.stdout).lines().map(str::to_string).collect();
    got.sort();
    assert_eq!(got, ["from kcat", "from the cli", "from the sdk"]);
    let out = common::tools::command("kcat")
        .args(["-b", &kafka, "-X", "security.protocol=ssl", "-X", &format!("ssl.ca.location={ca_pem}")])
        .args(["-C", "-t", "orders", "-o", "beginning", "-e", "-c", "3"])
        .output()
        .expect("run kcat");
    let mut got: Vec<String> = String::from_utf8_lossy(&out.stdout).lines().map(str::to_string).collect();
    got.sort();
    assert_eq!(got, ["from kcat", "from the cli", "from the sdk"], "kcat -C over TLS");
}

#[test]
fn clients_in_the_clear_or_trusting_another_ca_or_meeting_an_expired_certificate_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new(dir.path(), "ca");
    let other = Ca::new(dir.path(), "other-ca");
    let broker = tls_broker(dir.path(), &ca.issue("broker", "localhost", 10), &[]);

    let plain = connect(broker.addr(), None).err().expect("a client in the clear is refused");
    assert!(matches!(plain, ClientError::ConnectionClosed { .. } | ClientError::Connect { .. }), "{plain}");
    let wrong = connect(broker.addr(), Some(client_tls(&other.pem, None))).err().expect("another CA is refused");
    assert!(wrong.to_string().contains("UnknownIssuer"), "names the reason: {wrong}");
    let out = ringmq(&["topic", "list", "--broker", broker.addr(), "--tls"], "");
    assert!(!out.status.success(), "the system's roots do not trust a private CA");
    assert!(String::from_utf8_lossy(&out.stderr).contains("UnknownIssuer"), "{}", String::from_utf8_lossy(&out.stderr));
    // The broker stays up for clients that trust it.
    connect(broker.addr(), Some(client_tls(&ca.pem, None))).expect("a client that trusts its CA connects");

    let expired = tls_broker(&dir.path().join("expired"), &ca.issue("expired", "localhost", -1), &[]);
    let err = connect(expired.addr(), Some(client_tls(&ca.pem, None))).err().expect("an expired certificate");
    assert!(err.to_string().contains("Expired"), "names the reason: {err}");
}

#[test]
fn with_client_certificates_required_only_a_valid_one_the_ca_signed_gets_in() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new(dir.path(), "ca");
    let other = Ca::new(dir.path(), "other-ca");
    let ca_arg = path(&ca.pem);
    let broker = tls_broker(
        dir.path(),
        &ca.issue("broker", "localhost", 10),
        &["--tls-ca", &ca_arg, "--tls-client-auth", "required"],
    );
    let refused = |identity: Option<&Issued>| connect(broker.addr(), Some(client_tls(&ca.pem, identity))).is_err();
    assert!(refused(None), "no client certificate");
    assert!(refused(Some(&other.issue("mallory", "mallory", 10))), "a certificate another CA signed");
    assert!(refused(Some(&ca.issue("late", "late", -1))), "an expired certificate");
    let alice = ca.issue("alice", "alice", 10);
    let client = connect(broker.addr(), Some(client_tls(&ca.pem, Some(&alice)))).expect("a valid client certificate");
    client.create_topic("orders", 2, 0).unwrap();
    send(&client, "orders", "signed");
    let (cert, key) = (path(&alice.cert), path(&alice.key));
    let out = ringmq(
        &["topic", "list", "--broker", broker.addr(), "--tls-ca", &ca_arg, "--tls-cert", &cert, "--tls-key", &key],
        "",
    );
    assert!(out.status.success(), "ringmq --tls-cert --tls-key: {}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "orders");
}

#[test]
fn sighup_reloads_the_certificate_and_connections_already_up_keep_working() {
    let dir = tempfile::tempdir().unwrap();
    let (old_ca, new_ca) = (Ca::new(dir.path(), "old-ca"), Ca::new(dir.path(), "new-ca"));
    let old = old_ca.issue("broker", "localhost", 10);
    let broker = tls_broker(dir.path(), &old, &[]);
    let before = connect(broker.addr(), Some(client_tls(&old_ca.pem, None))).expect("connect with the old CA");
    before.create_topic("orders", 2, 0).unwrap();
    send(&before, "orders", "before");

    let new = new_ca.issue("new", "localhost", 10);
    std::fs::copy(&new.cert, &old.cert).unwrap();
    std::fs::copy(&new.key, &old.key).unwrap();
    broker.sighup();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while connect(broker.addr(), Some(client_tls(&new_ca.pem, None))).is_err() {
        assert!(std::time::Instant::now() < deadline, "the reloaded certificate is not served");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(connect(broker.addr(), Some(client_tls(&old_ca.pem, None))).is_err(), "the old certificate is gone");
    send(&before, "orders", "after");
    let out =
        ringmq(&["consume", "orders", "--count", "2", "--broker", broker.addr(), "--tls-ca", &path(&new_ca.pem)], "");
    let mut got: Vec<String> = String::from_utf8_lossy(&out.stdout).lines().map(str::to_string).collect();
    got.sort();
    assert_eq!(got, ["after", "before"], "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn a_follower_replicates_its_leader_over_tls_with_client_certificates_required() {
    let dir = tempfile::tempdir().unwrap();
    let etcd = Etcd::start(&dir.path().join("etcd"));
    let ca = Ca::new(dir.path(), "ca");
    let ca_arg = path(&ca.pem);
    let node = |name: &str, ip: &str| {
        let mut args = ca.issue(name, name, 10).serve_args();
        args.extend(["--tls-ca", &ca_arg, "--tls-client-auth", "required"].map(String::from));
        args.extend(
            ["--cluster", &etcd.url, "--broker-group", "g1", "--node", name, "--lease-ms", "1000"].map(String::from),
        );
        args.extend(["--insync-min", "2", "--replica-ack-timeout-ms", "5000"].map(String::from));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        Broker::start_listening(&dir.path().join(name), &format!("{ip}:{}", free_port_pair(ip)), &args)
    };
    let a = node("a", "127.0.0.21");
    let _b = node("b", "127.0.0.22");
    let alice = ca.issue("alice", "alice", 10);
    let client = connect(a.addr(), Some(client_tls(&ca.pem, Some(&alice)))).expect("the first node leads");
    client.create_topic("orders", 2, 0).unwrap();
    // Acknowledged only once the follower holds it durably: its link is up.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let producer = Producer::new(client.clone(), ProducerConfig::default());
    for i in 0..20 {
        loop {
            match producer.send("orders", &Message::new(format!("m{i}").into_bytes())) {
                Ok(_) => break,
                Err(e) => {
                    assert!(std::time::Instant::now() < deadline, "no replicated ack: {e}");
                    std::thread::sleep(Duration::from_millis(200));
                }
            }
        }
    }
}
