//! Encryption at rest on a real broker: the data directory of a broker
//! started with data keys holds none of the produced payloads; a restart
//! with the keys reads everything back; a start without them, with a key
//! missing or with a wrong key is refused with a message that says what to
//! pass; a rotation seals new batches with the new key and keeps the old
//! readable.

mod common;

use common::Broker;
use ringmq::client::{Consumer, Message, Producer, ProducerConfig, StartFrom};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const KEY_1: &str = "1 8a5f3e1c2b4d6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8";
const KEY_2: &str = "2 00ff11ee22dd33cc44bb55aa66997788aabbccddeeff00112233445566778899";
const WRONG_1: &str = "1 0000000000000000000000000000000000000000000000000000000000000000";

fn keys(dir: &Path, name: &str, lines: &[&str]) -> String {
    let path = dir.join(name);
    std::fs::write(&path, lines.join("\n")).unwrap();
    path.to_str().unwrap().to_string()
}

fn produce(broker: &Broker, from: u32, to: u32) {
    let producer = Producer::new(broker.client(), ProducerConfig::default());
    for i in from..to {
        producer.send("orders", &Message::new(format!("PAYLOAD-SECRET-{i:04}").into_bytes())).unwrap();
    }
}

fn read_all(broker: &Broker, count: usize) -> Vec<String> {
    let mut consumer = Consumer::new(broker.client(), None);
    consumer.assign_all("orders", StartFrom::Earliest).unwrap();
    let mut got: Vec<String> = common::consume(&mut consumer, count, Duration::from_secs(30))
        .into_iter()
        .map(|m| String::from_utf8(m.value_or_empty().to_vec()).unwrap())
        .collect();
    got.sort();
    got
}

/// Whether any file under `dir` holds `needle`.
fn found_in(dir: &Path, needle: &[u8]) -> Vec<String> {
    let mut hits = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            hits.extend(found_in(&path, needle));
        } else if std::fs::read(&path).unwrap().windows(needle.len()).any(|w| w == needle) {
            hits.push(path.display().to_string());
        }
    }
    hits
}

/// A start that must fail: its stderr.
fn refused_start(data: &Path, extra: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_ringmq"))
        .args(["serve", "--listen", "127.0.0.1:0", "--cores", "0,1", "--segment-mib", "16", "--cache-mib", "16"])
        .args(common::SHARED_HOST)
        .arg("--data-dir")
        .arg(data)
        .args(extra)
        .env_remove("RINGMQ_ENCRYPTION_KEYS")
        .output()
        .unwrap();
    assert!(!out.status.success(), "the broker must not start");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn an_encrypted_brokers_data_holds_no_payload_and_needs_its_keys_to_start_and_keys_rotate() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let k1 = keys(dir.path(), "k1", &[KEY_1]);
    let mut broker = Broker::start(&data, &["--encryption-keys", &k1]);
    broker.client().create_topic("orders", 4, 0).unwrap();
    produce(&broker, 0, 200);
    assert_eq!(read_all(&broker, 200).len(), 200);
    broker.stop();
    assert_eq!(found_in(&data, b"PAYLOAD-SECRET"), Vec::<String>::new(), "no file holds a payload in clear");

    let err = refused_start(&data, &[]);
    assert!(err.contains("sealed with data keys 1") && err.contains("--encryption-keys"), "{err}");
    let wrong = keys(dir.path(), "wrong", &[WRONG_1]);
    let err = refused_start(&data, &["--encryption-keys", &wrong]);
    assert!(err.contains("data key 1") && err.contains("is not the key"), "{err}");

    let rotated = keys(dir.path(), "k12", &[KEY_1, KEY_2]);
    let mut broker = Broker::start(&data, &["--encryption-keys", &rotated]);
    let got = read_all(&broker, 200);
    assert_eq!(got.len(), 200, "a restart with the keys reads everything back");
    assert_eq!(got[123], "PAYLOAD-SECRET-0123");
    produce(&broker, 200, 300);
    broker.stop();
    assert_eq!(found_in(&data, b"PAYLOAD-SECRET"), Vec::<String>::new());

    let only_new = keys(dir.path(), "k2", &[KEY_2]);
    let err = refused_start(&data, &["--encryption-keys", &only_new]);
    assert!(err.contains("data key 1, which the keys given lack"), "the old batches need key 1: {err}");
    let broker = Broker::start(&data, &["--encryption-keys", &rotated]);
    assert_eq!(read_all(&broker, 300).len(), 300, "batches of both keys read back");
}
