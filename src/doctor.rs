//! Host checks, run by `ringmq doctor` and at the start of `ringmq serve`:
//! io_uring and the operations the broker uses, the io_uring sysctl, O_DIRECT
//! and fallocate on the data directory, locked-memory and open-file limits,
//! and the CPUs asked for. Every failure names its fix; `serve` refuses to
//! start on a failed hard requirement instead of failing later.

use rustix::fs::{FallocateFlags, OFlags};
use rustix::process::{Resource, Rlimit};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Locked memory one shard's executor registers for its I/O buffers (glommio's default).
pub const IO_MEMORY_PER_SHARD: u64 = 10 << 20;

/// The outcome of one check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    pub name: &'static str,
    pub status: Status,
    /// What was found, and for a warning or a failure what to do about it.
    pub detail: String,
}

/// How a check went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Ok,
    /// Works for now, and needs a look (e.g. local disk filling).
    Warn,
    Fail,
}

impl Check {
    pub fn failed(&self) -> bool {
        self.status == Status::Fail
    }
}

/// What the broker will keep on disk, for the free-space check.
#[derive(Debug, Clone, Copy)]
pub struct DiskNeeds {
    pub segment_bytes: u64,
    /// Retention by size, per shard.
    pub retention_bytes: Option<u64>,
    /// Retired segment files each shard keeps for recycling.
    pub segment_pool_max: u64,
}

/// Runs every check for a broker with `shards` shards on `cores`, keeping data
/// in `data_dir` and serving up to `connections` connections per shard.
pub fn run(data_dir: &Path, cores: &[usize], connections: usize, disk: DiskNeeds) -> Vec<Check> {
    vec![
        io_uring_ops(),
        io_uring_sysctl(),
        direct_io(data_dir),
        disk_space(data_dir, cores.len() as u64, disk),
        memlock(cores.len() as u64),
        open_files((cores.len() * (connections + 64)) as u64),
        cpus(cores),
    ]
}

fn check(name: &'static str, ok: bool, detail: String) -> Check {
    Check { name, status: if ok { Status::Ok } else { Status::Fail }, detail }
}

/// io_uring opcodes the storage engine and the network path use.
const OPS: [(u8, &str); 13] = [
    (io_uring::opcode::Read::CODE, "read"),
    (io_uring::opcode::Write::CODE, "write"),
    (io_uring::opcode::ReadFixed::CODE, "read_fixed"),
    (io_uring::opcode::WriteFixed::CODE, "write_fixed"),
    (io_uring::opcode::Fsync::CODE, "fsync"),
    (io_uring::opcode::Fallocate::CODE, "fallocate"),
    (io_uring::opcode::OpenAt::CODE, "openat"),
    (io_uring::opcode::Close::CODE, "close"),
    (io_uring::opcode::Statx::CODE, "statx"),
    (io_uring::opcode::Accept::CODE, "accept"),
    (io_uring::opcode::Connect::CODE, "connect"),
    (io_uring::opcode::Recv::CODE, "recv"),
    (io_uring::opcode::Send::CODE, "send"),
];

fn io_uring_ops() -> Check {
    let ring = match io_uring::IoUring::new(8) {
        Ok(r) => r,
        Err(e) => {
            return check(
                "io_uring",
                false,
                format!("io_uring_setup failed ({e}); use a Linux 5.10+ kernel and allow io_uring (container seccomp profiles often block it)"),
            )
        }
    };
    let mut probe = io_uring::Probe::new();
    if let Err(e) = ring.submitter().register_probe(&mut probe) {
        return check(
            "io_uring",
            false,
            format!("cannot probe io_uring operations ({e}); the kernel is too old, use 5.10+"),
        );
    }
    let missing: Vec<&str> = OPS.iter().filter(|(code, _)| !probe.is_supported(*code)).map(|(_, n)| *n).collect();
    if missing.is_empty() {
        check("io_uring", true, format!("all {} operations used are supported", OPS.len()))
    } else {
        check("io_uring", false, format!("the kernel lacks io_uring operations {missing:?}; use a Linux 5.10+ kernel"))
    }
}

fn io_uring_sysctl() -> Check {
    match std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled").map(|s| s.trim().to_string()) {
        Ok(v) if v == "0" => check("io_uring_disabled", true, "kernel.io_uring_disabled = 0".into()),
        Ok(v) if v == "1" => check(
            "io_uring_disabled",
            is_root(),
            "kernel.io_uring_disabled = 1 (privileged only); run as root or `sysctl -w kernel.io_uring_disabled=0`"
                .to_string(),
        ),
        Ok(v) => check(
            "io_uring_disabled",
            false,
            format!("kernel.io_uring_disabled = {v}; run `sysctl -w kernel.io_uring_disabled=0`"),
        ),
        Err(_) => {
            check("io_uring_disabled", true, "sysctl absent (kernel predates it): io_uring is not disabled".into())
        }
    }
}

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

fn direct_io(data_dir: &Path) -> Check {
    let name = "direct_io";
    if let Err(e) = std::fs::create_dir_all(data_dir) {
        return check(name, false, format!("cannot create {}: {e}", data_dir.display()));
    }
    let path = data_dir.join(".doctor-probe");
    let result = (|| -> std::io::Result<()> {
        let mut f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .custom_flags(OFlags::DIRECT.bits() as i32)
            .open(&path)?;
        if let Err(e) = rustix::fs::fallocate(&f, FallocateFlags::empty(), 0, 1 << 20) {
            return Err(std::io::Error::other(format!("fallocate: {e}")));
        }
        let layout = std::alloc::Layout::from_size_align(4096, 4096).expect("layout");
        // SAFETY: freed below; 4 KiB aligned as O_DIRECT needs.
        let buf = unsafe { std::alloc::alloc_zeroed(layout) };
        let page = unsafe { std::slice::from_raw_parts(buf, 4096) };
        let written = f.write(page);
        unsafe { std::alloc::dealloc(buf, layout) };
        written.map(|_| ())
    })();
    let _ = std::fs::remove_file(&path);
    match result {
        Ok(()) => check(name, true, format!("O_DIRECT writes and fallocate work in {}", data_dir.display())),
        Err(e) => check(
            name,
            false,
            format!(
                "{} does not support O_DIRECT + fallocate ({e}); put the data directory on ext4 or xfs",
                data_dir.display()
            ),
        ),
    }
}

/// Free space against what the shards need: each an active and a spare
/// segment and its ballast (a start without room for them refuses), and
/// what retention will let the log grow to.
fn disk_space(data_dir: &Path, shards: u64, disk: DiskNeeds) -> Check {
    let name = "disk_space";
    let free = match ringmq_shards::free_space(data_dir) {
        Ok(free) => free,
        Err(e) => return check(name, false, format!("cannot measure free space of {}: {e}", data_dir.display())),
    };
    let held = used_bytes(data_dir);
    let ballast = crate::server::config::ballast_bytes(disk.segment_bytes);
    let floor = shards * (2 * disk.segment_bytes + ballast);
    let gib = |b: u64| b as f64 / f64::from(1u32 << 30);
    let retention = match disk.retention_bytes {
        None => "no size retention: the log grows until the disk is full (set --retention-gib)".to_string(),
        Some(r) => {
            let most = shards * (r + (2 + disk.segment_pool_max) * disk.segment_bytes + ballast);
            let fits = if most <= free + held { "fits" } else { "does NOT fit: lower --retention-gib or free space" };
            format!("retention keeps up to {:.1} GiB over {shards} shards, which {fits}", gib(most))
        }
    };
    let ok = free + held >= floor;
    let mut detail = format!(
        "{:.1} GiB free, {:.1} GiB held by the broker; each shard needs {:.2} GiB (2 segments + ballast); {retention}",
        gib(free),
        gib(held),
        gib(2 * disk.segment_bytes + ballast)
    );
    if !ok {
        detail.push_str("; free space or use smaller --segment-mib");
    }
    check(name, ok, detail)
}

/// Bytes the files under `dir` take on disk (what a restart reuses).
fn used_bytes(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    entries
        .flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => used_bytes(&e.path()),
            Ok(m) => m.blocks() * 512,
            Err(_) => 0,
        })
        .sum()
}

fn memlock(shards: u64) -> Check {
    let need = shards * IO_MEMORY_PER_SHARD + (1 << 20);
    let (soft, hard) = rlimit(Resource::Memlock);
    if soft >= need || raise(Resource::Memlock, need.min(hard), hard) >= need {
        return check(
            "memlock",
            true,
            format!("RLIMIT_MEMLOCK allows {} KiB (need {} KiB)", soft.max(need.min(hard)) / 1024, need / 1024),
        );
    }
    if has_cap_ipc_lock() {
        return check(
            "memlock",
            true,
            format!("RLIMIT_MEMLOCK is {} KiB but CAP_IPC_LOCK lets the shards lock {} KiB", soft / 1024, need / 1024),
        );
    }
    check(
        "memlock",
        false,
        format!(
            "RLIMIT_MEMLOCK is {} KiB (hard {} KiB) but {shards} shards lock {} KiB of I/O buffers; run `ulimit -l {}`, set LimitMEMLOCK={} in the systemd unit, or grant CAP_IPC_LOCK",
            soft / 1024,
            hard / 1024,
            need / 1024,
            need / 1024,
            need
        ),
    )
}

fn open_files(need: u64) -> Check {
    let (soft, hard) = rlimit(Resource::Nofile);
    let now = if soft >= need { soft } else { raise(Resource::Nofile, need.min(hard), hard) };
    if now >= need {
        check("open_files", true, format!("RLIMIT_NOFILE is {now} (need {need})"))
    } else {
        check("open_files", false, format!("RLIMIT_NOFILE is {now} (hard {hard}) but up to {need} files and sockets are open; run `ulimit -n {need}` or set LimitNOFILE={need}"))
    }
}

fn cpus(cores: &[usize]) -> Check {
    let n = std::thread::available_parallelism().map_or(1, |n| n.get());
    match cores.iter().find(|c| **c >= n) {
        None if !cores.is_empty() => check("cpus", true, format!("shards on CPUs {cores:?} of {n}")),
        None => check("cpus", false, "no CPUs given; pass --cores".into()),
        Some(c) => check(
            "cpus",
            false,
            format!("CPU {c} does not exist (this machine has {n}); pass --cores with CPUs 0..{}", n - 1),
        ),
    }
}

/// The soft and hard limits (u64::MAX: unlimited).
fn rlimit(resource: Resource) -> (u64, u64) {
    let r = rustix::process::getrlimit(resource);
    (r.current.unwrap_or(u64::MAX), r.maximum.unwrap_or(u64::MAX))
}

/// Raises the soft limit to `to` (at most `hard`); returns the soft limit after.
fn raise(resource: Resource, to: u64, hard: u64) -> u64 {
    let limit = |v: u64| (v != u64::MAX).then_some(v);
    let _ = rustix::process::setrlimit(resource, Rlimit { current: limit(to), maximum: limit(hard) });
    rlimit(resource).0
}

fn has_cap_ipc_lock() -> bool {
    const CAP_IPC_LOCK: u32 = 14;
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find_map(|l| l.strip_prefix("CapEff:").map(|v| v.trim().to_string())))
        .and_then(|hex| u64::from_str_radix(&hex, 16).ok())
        .is_some_and(|caps| caps & (1 << CAP_IPC_LOCK) != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_host_passes_and_a_missing_cpu_fails_with_its_fix() {
        let dir = std::env::temp_dir().join(format!("ringmq-doctor-{}", std::process::id()));
        let checks = run(
            &dir,
            &[0],
            16,
            DiskNeeds { segment_bytes: 1 << 20, retention_bytes: Some(1 << 20), segment_pool_max: 4 },
        );
        let _ = std::fs::remove_dir_all(&dir);
        for c in &checks {
            assert_eq!(c.status, Status::Ok, "{}: {}", c.name, c.detail);
        }
        let bad = cpus(&[4096]);
        assert!(bad.failed() && bad.detail.contains("--cores"), "{}", bad.detail);
        let no_room = disk_space(
            &std::env::temp_dir(),
            2,
            DiskNeeds { segment_bytes: 1 << 50, retention_bytes: None, segment_pool_max: 4 },
        );
        assert!(no_room.failed() && no_room.detail.contains("--segment-mib"), "{}", no_room.detail);
        assert!(no_room.detail.contains("no size retention"), "{}", no_room.detail);
    }
}
