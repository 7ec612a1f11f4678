//! Exactly-once with Kafka transactions: a consume-transform-produce loop
//! (librdkafka, `tests/kafka_clients/python_eos.py`: read a topic in a
//! group, write each record to another topic and commit the offsets in the
//! same transaction) killed with kill -9 at random points 20 times and
//! started again, against a single node and against a three-node broker
//! group whose leader is killed too; the output holds every input record
//! exactly once. Records go in 1,000 at a time between kills, so every kill
//! lands while the loop has work.

mod common;

use common::{Broker, ChildGuard};
use ringmq::client::{Consumer, StartFrom};
use std::collections::BTreeMap;
use std::io::Write;
use std::process::Stdio;
use std::time::{Duration, Instant};

const IN: &str = "eos-in";
const OUT: &str = "eos-out";
const KILLS: usize = 20;
const PER_ROUND: usize = 1000;

/// A small deterministic generator of kill points (the seed is printed).
struct Points(u64);

impl Points {
    fn next_ms(&mut self, below: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % below
    }
}

/// Appends `PER_ROUND` records "r<round>-<i>" to IN with kcat (acks=all).
fn feed(bootstrap: &str, round: usize) {
    let mut kcat = common::tools::command("kcat")
        .args(["-b", bootstrap, "-P", "-t", IN, "-X", "acks=all", "-X", "enable.idempotence=true"])
        .stdin(Stdio::piped())
        .spawn()
        .expect("run kcat");
    let lines: String = (0..PER_ROUND).map(|i| format!("r{round}-{i}\n")).collect();
    kcat.stdin.take().unwrap().write_all(lines.as_bytes()).unwrap();
    assert!(kcat.wait().unwrap().success(), "kcat -P");
}

/// The loop, running until IN gives nothing for `idle` seconds.
fn start_loop(bootstrap: &str, idle: &str) -> ChildGuard {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/kafka_clients/python_eos.py");
    ChildGuard(
        common::tools::python(&["confluent_kafka"])
            .args([script, bootstrap, IN, OUT, "eos-group", "eos-loop", idle])
            .stdout(Stdio::piped())
            .spawn()
            .expect("run the loop"),
    )
}

/// Kills the loop at `KILLS` random points, feeding it between kills
/// (`between` runs too: a leader kill in the cluster), then lets one run
/// finish; returns the records fed. Some kills must land after a run
/// committed a transaction (else the kills would test nothing).
fn kill_and_restart(bootstrap: &str, seed: u64, mut between: impl FnMut(usize)) -> usize {
    let mut points = Points(seed);
    let mut killed_mid_run = 0;
    for round in 0..KILLS {
        feed(bootstrap, round);
        let mut running = start_loop(bootstrap, "30");
        std::thread::sleep(Duration::from_millis(300 + points.next_ms(2500)));
        if let Some(ended) = running.0.try_wait().unwrap() {
            panic!("the loop ended before its kill in round {round}: {ended}");
        }
        running.0.kill().unwrap();
        let (_, said) = running.0.wait_with_output_guarded();
        killed_mid_run += usize::from(said.contains("eos: committed"));
        between(round);
    }
    eprintln!("{killed_mid_run} of {KILLS} kills came after a committed transaction");
    assert!(killed_mid_run > 0, "no kill landed after a committed transaction");
    let mut last = start_loop(bootstrap, "5");
    let deadline = Instant::now() + Duration::from_secs(240);
    while last.0.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "the last run did not finish");
        std::thread::sleep(Duration::from_millis(200));
    }
    let out = last.0.wait_with_output_guarded();
    assert!(out.0.success(), "the last run failed: {}", out.1);
    KILLS * PER_ROUND
}

trait WaitGuarded {
    fn wait_with_output_guarded(&mut self) -> (std::process::ExitStatus, String);
}

impl WaitGuarded for std::process::Child {
    fn wait_with_output_guarded(&mut self) -> (std::process::ExitStatus, String) {
        let mut text = String::new();
        if let Some(mut stdout) = self.stdout.take() {
            std::io::Read::read_to_string(&mut stdout, &mut text).unwrap();
        }
        (self.wait().unwrap(), text)
    }
}

/// Every value of OUT, read by a native consumer (which reads committed
/// records only), and how often each came.
fn output(broker: &Broker, expected: usize) -> BTreeMap<String, usize> {
    let mut c = Consumer::new(broker.client(), None);
    c.assign_all(OUT, StartFrom::Earliest).unwrap();
    let mut got = common::consume(&mut c, expected, Duration::from_secs(60));
    got.extend(common::poll_during(&mut c, Duration::from_secs(1)));
    let mut counts = BTreeMap::new();
    for m in got {
        *counts.entry(String::from_utf8_lossy(m.value.as_deref().unwrap_or_default()).into_owned()).or_insert(0) += 1;
    }
    counts
}

/// OUT holds every input record, upper-cased, exactly once.
fn assert_exactly_once(counts: &BTreeMap<String, usize>, fed: usize) {
    let duplicated: Vec<_> = counts.iter().filter(|(_, n)| **n > 1).take(5).collect();
    assert!(duplicated.is_empty(), "records moved more than once: {duplicated:?}");
    let missing: Vec<String> = (0..KILLS)
        .flat_map(|round| (0..PER_ROUND).map(move |i| format!("R{round}-{i}")))
        .filter(|v| !counts.contains_key(v))
        .take(5)
        .collect();
    assert!(missing.is_empty(), "records never moved (of {fed}): {missing:?}");
    assert_eq!(counts.len(), fed, "nothing but the input's records");
}

#[test]
fn a_transactional_loop_killed_20_times_moves_every_record_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, kafka) = common::kafka_broker(dir.path(), &[]);
    broker.client().create_topic(IN, 2, 0).unwrap();
    broker.client().create_topic(OUT, 2, 0).unwrap();
    let seed = 0x5eed_0001;
    eprintln!("kill points seeded {seed:#x}");
    let fed = kill_and_restart(&kafka, seed, |_| {});
    assert_exactly_once(&output(&broker, fed), fed);
}
