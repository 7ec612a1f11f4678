//! Starts real `ringmq serve` processes on 127.0.0.1 with ephemeral ports and
//! temp dirs, and speaks the raw protocol for bad-input tests.
#![allow(dead_code)]

pub mod certs;
pub mod eos;
pub mod etcd;
pub mod kafka;
pub mod kafka_failover;
pub mod netns;
pub mod ports;
pub mod seaweed;
pub mod tools;

use ringmq::client::{Client, ClientConfig, ConsumedMessage, Consumer, SendResult};
use ringmq::protocol::frame::{self, Response};
use ringmq::protocol::ErrorCode;
use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Serve flags of every broker a test starts: the tests' brokers share the
/// machine's cores with each other and with the clients, so they neither
/// poll while idle nor yield to the kernel's completion work (the shared-host
/// settings of docs/OPERATIONS.md).
pub const SHARED_HOST: [&str; 4] = ["--idle-spin-us", "0", "--completion-yield-us", "0"];

/// A one-record batch of `value`, as a producer builds it.
pub fn batch(value: &[u8]) -> Vec<u8> {
    let mut b = ringmq::shards::batch::BatchBuilder::new(0);
    b.push(&ringmq::shards::Record { value: Some(value), ..ringmq::shards::Record::default() });
    b.finish()
}

/// A one-record batch of `value` whose message id is `id`, as the SDK makes them.
pub fn client_batch(id: u8, value: &[u8]) -> Vec<u8> {
    let mut b = ringmq::shards::batch::BatchBuilder::new(0);
    b.push(&ringmq::shards::Record { message_id: [id; 16], value: Some(value), ..ringmq::shards::Record::default() });
    b.finish()
}

/// Asserts that every acknowledged (value, result) is stored at its queue and
/// offset with its value, and that no position was returned twice.
pub fn assert_acked_present(got: &[ConsumedMessage], acked: &[(String, SendResult)]) {
    let at: HashMap<(u32, u64), &[u8]> = got.iter().map(|m| ((m.queue, m.offset), m.value_or_empty())).collect();
    assert_eq!(at.len(), got.len(), "no message is returned twice");
    for (value, r) in acked {
        assert_eq!(
            at.get(&(r.queue, r.offset)).copied(),
            Some(value.as_bytes()),
            "acked {value} is at {}/{}",
            r.queue,
            r.offset
        );
    }
}

/// Polls until `count` messages arrived or `limit` passed; returns them all.
pub fn consume(consumer: &mut Consumer, count: usize, limit: Duration) -> Vec<ConsumedMessage> {
    let mut got = Vec::new();
    let deadline = Instant::now() + limit;
    while got.len() < count && Instant::now() < deadline {
        got.extend(consumer.poll(Duration::from_millis(200)).unwrap());
    }
    got
}

/// Everything that arrives within `real` wall time.
pub fn poll_during(consumer: &mut Consumer, real: Duration) -> Vec<ConsumedMessage> {
    let deadline = Instant::now() + real;
    let mut got = Vec::new();
    while Instant::now() < deadline {
        got.extend(consumer.poll(Duration::from_millis(50)).unwrap());
    }
    got
}

/// Asserts that in every queue each sender's messages (values "sender-seq")
/// appear in the order it sent them; returns the queues seen.
pub fn assert_per_sender_order(got: &[ConsumedMessage]) -> HashSet<u32> {
    let mut ordered: Vec<&ConsumedMessage> = got.iter().collect();
    ordered.sort_by_key(|m| (m.queue, m.offset));
    let mut last: HashMap<(u32, String), u64> = HashMap::new();
    for m in ordered {
        let v = String::from_utf8_lossy(m.value_or_empty()).into_owned();
        let (sender, seq) = v.rsplit_once('-').expect("values are sender-seq");
        let seq: u64 = seq.parse().expect("a sequence number");
        if let Some(prev) = last.insert((m.queue, sender.to_string()), seq) {
            assert!(prev < seq, "queue {}: {sender} sent {prev} before {seq}", m.queue);
        }
    }
    last.keys().map(|(q, _)| *q).collect()
}

/// A free port on `ip` whose next port is free too (for a 2-shard broker).
pub fn free_port_pair(ip: &str) -> u16 {
    ports::free_ports(ip, 2)
}

/// A port pair free on every one of `ips` (each node listens on its own IP
/// at the same ports, so Kafka and native ports keep one distance).
pub fn shared_port_pair(ips: &[&str]) -> u16 {
    loop {
        let port = free_port_pair(ips[0]);
        let free = |ip: &str| (0..2).all(|k| std::net::TcpListener::bind((ip, port + k)).is_ok());
        if ips.iter().all(|ip| free(ip)) {
            return port;
        }
    }
}

/// A client of the nodes `bootstrap` lists that retries a request up to
/// `retries` times (through fail-overs and moves), each try within 20 s.
pub fn connect_retrying(bootstrap: &str, retries: u32) -> Arc<Client> {
    let mut cfg = ClientConfig::new(bootstrap);
    cfg.request_timeout = Duration::from_secs(20);
    cfg.retries = retries;
    Client::connect(cfg).unwrap_or_else(|e| panic!("connecting to {bootstrap}: {e}"))
}

/// One multi-node cluster at a time in a test binary: several three-node
/// clusters at once on a 2-CPU CI machine missed 1 s replica-ack timeouts
/// and election leases, in tests that do not measure that. Each such test
/// holds this while its cluster runs.
pub fn one_cluster() -> std::sync::MutexGuard<'static, ()> {
    static ONE_CLUSTER: std::sync::Mutex<()> = std::sync::Mutex::new(());
    // A test that failed while holding it leaves it poisoned; the next may still run.
    ONE_CLUSTER.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A broker process.
pub struct Broker {
    child: Option<Child>,
    pub dir: PathBuf,
    /// Shard addresses, shard 0 first.
    pub addrs: Vec<String>,
    listen: String,
    extra: Vec<String>,
    /// The network namespace it runs in (None: this one).
    netns: Option<String>,
}

impl Broker {
    /// Starts a 2-shard broker in `dir` with small segments and caches.
    pub fn start(dir: &Path, extra: &[&str]) -> Broker {
        Broker::start_listening(dir, "127.0.0.1:0", extra)
    }

    /// Starts a 2-shard broker whose shard 0 listens on `listen` (shard 1 on its port + 1).
    pub fn start_listening(dir: &Path, listen: &str, extra: &[&str]) -> Broker {
        let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        let listen = listen.to_string();
        let mut b = Broker { child: None, dir: dir.to_path_buf(), addrs: Vec::new(), listen, extra, netns: None };
        b.launch();
        b
    }

    /// Like `start_listening`, in network namespace `netns` (`ip netns exec`
    /// execs the broker: the child is the broker itself).
    pub fn start_in_netns(netns: &str, dir: &Path, listen: &str, extra: &[&str]) -> Broker {
        let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        let (listen, netns) = (listen.to_string(), Some(netns.to_string()));
        let mut b = Broker { child: None, dir: dir.to_path_buf(), addrs: Vec::new(), listen, extra, netns };
        b.launch();
        b
    }

    fn launch(&mut self) {
        let binary = env!("CARGO_BIN_EXE_ringmq");
        let mut command = match &self.netns {
            Some(ns) => {
                let mut c = tools::command("ip");
                c.args(["netns", "exec", ns, binary]);
                c
            }
            None => Command::new(binary),
        };
        let mut child = command
            .args(["serve", "--listen", &self.listen, "--cores", "0,1", "--cache-mib", "16"])
            // 16 MiB segments unless the test asks for its own size.
            .args(if self.extra.iter().any(|a| a == "--segment-mib") { &[][..] } else { &["--segment-mib", "16"][..] })
            // The tests' brokers share the machine's cores: the shared-host settings (docs/OPERATIONS.md).
            .args(SHARED_HOST)
            .arg("--data-dir")
            .arg(&self.dir)
            .args(&self.extra)
            .env("RUST_LOG", std::env::var("RINGMQ_TEST_LOG").unwrap_or("warn".into()))
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start ringmq serve");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout")).read_line(&mut line).expect("read the listening line");
        let shards = line.split("(shards: ").nth(1).unwrap_or_else(|| panic!("unexpected first line {line:?}"));
        // A cluster node goes on: "(shards: A B) as leader in epoch N".
        let shards = shards.split(')').next().unwrap_or_default();
        self.addrs = shards.split_whitespace().map(str::to_string).collect();
        self.child = Some(child);
    }

    /// Shard 0's address.
    pub fn addr(&self) -> &str {
        &self.addrs[0]
    }

    /// A client bootstrapped from shard 0.
    pub fn client(&self) -> Arc<Client> {
        let mut cfg = ClientConfig::new(self.addr());
        cfg.request_timeout = Duration::from_secs(20);
        Client::connect(cfg).expect("connect client")
    }

    /// A client bootstrapped from shard 0 that logs in as `user` (SCRAM-SHA-256).
    pub fn client_as(&self, user: &str, password: &str) -> Arc<Client> {
        let mut cfg = ClientConfig::new(self.addr());
        cfg.request_timeout = Duration::from_secs(20);
        let mechanism = ringmq::security::sasl::SaslMechanism::Scram(ringmq::security::scram::Mechanism::ScramSha256);
        cfg.sasl = Some(ringmq::client::SaslLogin::new(mechanism, user, password));
        Client::connect(cfg).expect("connect and log in")
    }

    /// SIGTERM and wait: a clean shutdown.
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let pid = rustix::process::Pid::from_raw(c.id() as i32).expect("a child's pid");
            rustix::process::kill_process(pid, rustix::process::Signal::TERM).expect("signal the broker");
            let status = c.wait().expect("wait for broker");
            assert!(status.success(), "clean shutdown exits 0: {status}");
        }
    }

    /// SIGSTOP: the process hangs (no lease renewal, no fetches) until `resume`.
    pub fn pause(&self) {
        self.signal(rustix::process::Signal::STOP);
    }

    /// SIGCONT after `pause`.
    pub fn resume(&self) {
        self.signal(rustix::process::Signal::CONT);
    }

    /// SIGHUP: the broker reloads its TLS files.
    pub fn sighup(&self) {
        self.signal(rustix::process::Signal::HUP);
    }

    /// A figure of the broker's `/proc/PID/status` in KiB (VmRSS, VmHWM, ...).
    pub fn memory_kib(&self, field: &str) -> u64 {
        let pid = self.child.as_ref().expect("a running broker").id();
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("the broker's status");
        let line = status.lines().find(|l| l.starts_with(&format!("{field}:"))).expect("the field");
        line.split_whitespace().nth(1).and_then(|kib| kib.parse().ok()).expect("a number of KiB")
    }

    fn signal(&self, signal: rustix::process::Signal) {
        let child = self.child.as_ref().expect("a running broker");
        let pid = rustix::process::Pid::from_raw(child.id() as i32).expect("a child's pid");
        rustix::process::kill_process(pid, signal).expect("signal the broker");
    }

    /// SIGKILL: a crash.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            c.kill().expect("kill -9");
            c.wait().expect("reap");
        }
    }

    /// Starts the broker again on the same data directory.
    pub fn restart(&mut self) {
        self.launch();
    }

    /// True while the process runs.
    pub fn is_running(&mut self) -> bool {
        self.child.as_mut().is_some_and(|c| c.try_wait().expect("try_wait").is_none())
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// A raw connection for sending hand-made frames.
pub struct Raw {
    pub stream: TcpStream,
}

impl Raw {
    pub fn connect(addr: &str) -> Raw {
        let stream = TcpStream::connect(addr).expect("connect");
        stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        Raw { stream }
    }

    /// Speaks on a connection the test made itself.
    pub fn from_stream(stream: TcpStream) -> Raw {
        Raw { stream }
    }

    /// Sends a request frame and reads one response: (correlation, code, message, body).
    pub fn call(&mut self, api: u16, version: u16, corr: u32, body: &[u8]) -> (u32, ErrorCode, String, Vec<u8>) {
        self.stream.write_all(&frame::request(api, version, corr, body)).unwrap();
        self.read_response().expect("a response")
    }

    /// Reads one response frame, or None if the broker closed the connection.
    pub fn read_response(&mut self) -> Option<(u32, ErrorCode, String, Vec<u8>)> {
        let mut len = [0u8; 4];
        self.stream.read_exact(&mut len).ok()?;
        let mut payload = vec![0u8; u32::from_le_bytes(len) as usize];
        self.stream.read_exact(&mut payload).ok()?;
        let r = Response::parse(&payload).expect("parse response");
        Some((r.correlation_id, r.error, r.message, r.body.to_vec()))
    }

    /// True if the broker closed this connection.
    pub fn is_closed(&mut self) -> bool {
        let mut b = [0u8; 1];
        matches!(self.stream.read(&mut b), Ok(0))
    }
}

/// Runs `command` with `stdin` written to its input; its output.
pub fn output_with_stdin(command: &mut Command, stdin: &str) -> std::process::Output {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("run {command:?}: {e}"));
    child.stdin.take().expect("piped stdin").write_all(stdin.as_bytes()).expect("write stdin");
    child.wait_with_output().expect("wait for the command")
}

/// Creates user `name` with `password` in a stopped broker's data directory.
pub fn create_user(data: &Path, name: &str, password: &str) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_ringmq"));
    command.args(["user", "create", name, "--data-dir"]).arg(data);
    let out = output_with_stdin(&mut command, &format!("{password}\n"));
    assert!(out.status.success(), "ringmq user create {name}: {}", String::from_utf8_lossy(&out.stderr));
}

/// A client process (kcat, a script) killed when the test ends, pass or fail.
pub struct ChildGuard(pub std::process::Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A broker whose Kafka listener is on free loopback ports; the listener's address.
pub fn kafka_broker(dir: &Path, extra: &[&str]) -> (Broker, String) {
    let kafka = format!("127.0.0.1:{}", free_port_pair("127.0.0.1"));
    let mut args = vec!["--kafka-listen", &kafka];
    args.extend_from_slice(extra);
    let broker = Broker::start(dir, &args);
    (broker, kafka)
}

/// One HTTP exchange with a broker's admin listener: (status, body).
pub fn http(addr: &str, request: &str) -> (u16, String) {
    try_http(addr, request).expect("an exchange with the admin listener")
}

/// `http`, or the I/O error that cut it (a node restarting in a new role
/// closes its admin listener for a moment).
fn try_http(addr: &str, request: &str) -> std::io::Result<(u16, String)> {
    let mut stream = TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    stream.write_all(request.as_bytes())?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response)?;
    let response = String::from_utf8_lossy(&response).into_owned();
    let status = response.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let body = response.split_once("\r\n\r\n").map_or("", |(_, b)| b).to_string();
    Ok((status, body))
}

/// GET `path` from an admin listener: (status, body).
pub fn get(addr: &str, path: &str) -> (u16, String) {
    try_get(addr, path).expect("an exchange with the admin listener")
}

/// `get`, or the I/O error that cut it.
pub fn try_get(addr: &str, path: &str) -> std::io::Result<(u16, String)> {
    try_http(addr, &format!("GET {path} HTTP/1.1\r\nHost: ringmq\r\n\r\n"))
}

/// The value of the first sample on a broker's admin listener whose line
/// starts with `sample` (a name and as many of its labels as given).
pub fn metric(admin: &str, sample: &str) -> Option<f64> {
    let (_, text) = get(admin, "/metrics");
    sample_of(&text, sample)
}

/// `metric`, None also while the admin listener does not answer.
pub fn metric_if_up(admin: &str, sample: &str) -> Option<f64> {
    let (_, text) = try_get(admin, "/metrics").ok()?;
    sample_of(&text, sample)
}

fn sample_of(text: &str, sample: &str) -> Option<f64> {
    text.lines().find(|l| l.starts_with(sample)).and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

/// Polls `done` until it holds, failing the test after `limit`.
pub fn wait_until(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + limit;
    while !done() {
        assert!(std::time::Instant::now() < deadline, "{what} within {limit:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}
