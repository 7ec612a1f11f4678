//! A real etcd (Debian's `etcd-server`) on 127.0.0.1 (or another address of
//! this namespace) with its own ports and a temp data directory, stopped
//! when dropped.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Etcd {
    child: Child,
    /// `etcd://IP:PORT`, for `--cluster`.
    pub url: String,
}

impl Etcd {
    /// Starts etcd in `dir` and waits until it answers.
    pub fn start(dir: &Path) -> Etcd {
        Etcd::start_on(dir, "127.0.0.1")
    }

    /// Starts etcd in `dir`, serving clients on `ip` (peers on 127.0.0.1).
    pub fn start_on(dir: &Path, ip: &str) -> Etcd {
        let (client, peer) = (super::ports::free_ports(ip, 1), super::ports::free_ports("127.0.0.1", 1));
        let client_url = format!("http://{ip}:{client}");
        let peer_url = format!("http://127.0.0.1:{peer}");
        let child = super::tools::command("etcd")
            .arg("--data-dir")
            .arg(dir)
            .args(["--listen-client-urls", &client_url, "--advertise-client-urls", &client_url])
            .args(["--listen-peer-urls", &peer_url, "--initial-advertise-peer-urls", &peer_url])
            .args(["--initial-cluster", &format!("default={peer_url}")])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start etcd");
        let etcd = Etcd { child, url: format!("etcd://{ip}:{client}") };
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect((ip, client)).is_err() {
            assert!(Instant::now() < deadline, "etcd did not listen on {client} within 30 s");
            std::thread::sleep(Duration::from_millis(50));
        }
        etcd
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The lines `ringmq cluster status` prints for the etcd at `url`: the
/// nodes, then each group's leader, epoch and in-sync set.
pub fn cluster_status(url: &str) -> Vec<String> {
    let out = Command::new(env!("CARGO_BIN_EXE_ringmq"))
        .args(["cluster", "status", "--cluster", url])
        .output()
        .expect("run ringmq cluster status");
    assert!(out.status.success(), "cluster status: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).lines().map(str::to_string).collect()
}

/// Polls `cluster_status` until `done` holds, for at most `limit`; the lines last seen.
pub fn wait_for_status(url: &str, limit: Duration, done: impl Fn(&[String]) -> bool) -> Vec<String> {
    let deadline = Instant::now() + limit;
    loop {
        let lines = cluster_status(url);
        if done(&lines) || Instant::now() > deadline {
            return lines;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The in-sync set the status lines give broker group `group` (empty if none).
pub fn isr_of(lines: &[String], group: &str) -> String {
    let prefix = format!("broker_group={group} leader=");
    lines.iter().find(|l| l.starts_with(&prefix)).and_then(|l| l.split(" isr=").nth(1)).unwrap_or_default().to_string()
}

/// Waits (a minute at most) until group `group`'s in-sync set holds `nodes` nodes.
pub fn wait_for_isr_of(url: &str, group: &str, nodes: usize) {
    let full = |lines: &[String]| isr_of(lines, group).split(',').count() == nodes;
    let lines = wait_for_status(url, Duration::from_secs(60), full);
    assert!(full(&lines), "the in-sync set stays {:?}", isr_of(&lines, group));
}
