//! Exactly-once with Kafka transactions, the shared half of its tests: a
//! consume-transform-produce loop (librdkafka's in
//! `tests/kafka_clients/python_eos.py`, the Java client's in
//! `JavaClients.java`: read a topic in a group, write each record to another
//! topic and commit the offsets in the same transaction)
//! killed with kill -9 at random points and started again, fed 1,000
//! records between kills so every kill lands while it has work; then the
//! output is read by a native consumer (which reads committed records only).

use super::{consume, poll_during, tools, ChildGuard};
use ringmq::client::{Client, Consumer, StartFrom};
use std::collections::BTreeMap;
use std::io::Write;
use std::process::Command;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub const IN: &str = "eos-in";
pub const OUT: &str = "eos-out";
pub const KILLS: usize = 20;
pub const PER_ROUND: usize = 1000;

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
    let mut kcat = tools::command("kcat")
        .args(["-b", bootstrap, "-P", "-t", IN, "-X", "acks=all", "-X", "enable.idempotence=true"])
        .stdin(Stdio::piped())
        .spawn()
        .expect("run kcat");
    let lines: String = (0..PER_ROUND).map(|i| format!("r{round}-{i}\n")).collect();
    kcat.stdin.take().unwrap().write_all(lines.as_bytes()).unwrap();
    assert!(kcat.wait().unwrap().success(), "kcat -P");
}

/// Which client runs the loop.
#[derive(Clone, Copy)]
pub enum LoopClient {
    /// librdkafka through confluent-kafka (`python_eos.py`).
    Librdkafka,
    /// The Apache Java client (`JavaClients.java`'s eos phase).
    Java,
}

impl LoopClient {
    fn command(self) -> Command {
        match self {
            LoopClient::Librdkafka => {
                let mut c = tools::python(&["confluent_kafka"]);
                c.arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/kafka_clients/python_eos.py"));
                c
            }
            LoopClient::Java => tools::java_kafka_client(),
        }
    }

    /// The longest pause before a kill (a JVM starts slower).
    fn kill_window_ms(self) -> u64 {
        match self {
            LoopClient::Librdkafka => 2500,
            LoopClient::Java => 5000,
        }
    }
}

/// The loop, running until IN gives nothing for `idle` seconds.
fn start_loop(client: LoopClient, bootstrap: &str, idle: &str) -> ChildGuard {
    let mut command = client.command();
    match client {
        LoopClient::Librdkafka => command.args([bootstrap, IN, OUT, "eos-group", "eos-loop", idle]),
        LoopClient::Java => command.args([bootstrap, "eos", IN, OUT, "eos-group", "eos-loop", idle]),
    };
    ChildGuard(command.stdout(Stdio::piped()).spawn().expect("run the loop"))
}

/// Kills the loop at `KILLS` random points, feeding it between kills
/// (`between` runs just before each kill: a leader kill in the cluster, the
/// loop going on through the fail-over), then lets one run
/// finish; returns the records fed. A run that ends before its kill fails
/// the test unless `early_ends` (a fail-over can end a run: it is started
/// again in the next round). Some kills must land after a run committed a
/// transaction (else the kills would test nothing).
pub fn kill_and_restart(
    client: LoopClient,
    bootstrap: &str,
    seed: u64,
    early_ends: bool,
    mut between: impl FnMut(usize),
) -> usize {
    let mut points = Points(seed);
    let mut killed_mid_run = 0;
    for round in 0..KILLS {
        feed(bootstrap, round);
        let mut running = start_loop(client, bootstrap, "30");
        std::thread::sleep(Duration::from_millis(300 + points.next_ms(client.kill_window_ms())));
        between(round);
        if let Some(ended) = running.0.try_wait().unwrap() {
            assert!(early_ends, "the loop ended before its kill in round {round}: {ended}");
            eprintln!("round {round}: the loop ended on its own ({ended})");
        }
        let _ = running.0.kill();
        killed_mid_run += usize::from(stdout_of(&mut running.0).contains("eos: committed"));
    }
    eprintln!("{killed_mid_run} of {KILLS} kills came after a committed transaction");
    assert!(killed_mid_run > 0, "no kill landed after a committed transaction");
    let mut last = start_loop(client, bootstrap, "5");
    let deadline = Instant::now() + Duration::from_secs(240);
    while last.0.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "the last run did not finish");
        std::thread::sleep(Duration::from_millis(200));
    }
    let said = stdout_of(&mut last.0);
    assert!(last.0.wait().unwrap().success(), "the last run failed: {said}");
    KILLS * PER_ROUND
}

/// What an ended (or killed) child wrote to its stdout.
fn stdout_of(child: &mut std::process::Child) -> String {
    let mut text = String::new();
    if let Some(mut stdout) = child.stdout.take() {
        std::io::Read::read_to_string(&mut stdout, &mut text).unwrap();
    }
    let _ = child.wait();
    text
}

/// Every value of OUT, read by a native consumer (which reads committed
/// records only), and how often each came.
pub fn output(client: Arc<Client>, expected: usize) -> BTreeMap<String, usize> {
    let mut c = Consumer::new(client, None);
    c.assign_all(OUT, StartFrom::Earliest).unwrap();
    let mut got = consume(&mut c, expected, Duration::from_secs(60));
    got.extend(poll_during(&mut c, Duration::from_secs(1)));
    let mut counts = BTreeMap::new();
    for m in got {
        *counts.entry(String::from_utf8_lossy(m.value.as_deref().unwrap_or_default()).into_owned()).or_insert(0) += 1;
    }
    counts
}

/// OUT holds every input record, upper-cased, exactly once.
pub fn assert_exactly_once(counts: &BTreeMap<String, usize>, fed: usize) {
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
