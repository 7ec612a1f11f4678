//! What the kernel says about one of this process's threads: its time on a
//! CPU and waiting for one (`/proc/self/task/TID/schedstat`), its state and
//! system call, and the host's steal time on a CPU (`/proc/stat`).

use std::time::{Duration, Instant};

/// One reading of a thread; two of them tell what it did in between.
#[derive(Debug, Clone)]
pub struct ThreadSample {
    pub at: Instant,
    pub on_cpu: Duration,
    /// Time it was ready to run and waited for a CPU.
    pub waiting: Duration,
    /// The host's steal time on the thread's CPU.
    pub stolen: Duration,
    /// `R` running or ready, `S` sleeping, `D` waiting in the kernel.
    pub state: char,
    /// The system call it is in (None: running in user space, or unknown).
    pub syscall: Option<String>,
}

impl ThreadSample {
    /// Reads thread `tid` of this process, pinned to `cpu`; what cannot be
    /// read counts as zero (a kernel without schedstat, a thread gone).
    pub fn read(tid: i32, cpu: usize) -> ThreadSample {
        let task = format!("/proc/self/task/{tid}");
        let schedstat = std::fs::read_to_string(format!("{task}/schedstat")).unwrap_or_default();
        let mut ns = schedstat.split_whitespace().map(|n| Duration::from_nanos(n.parse().unwrap_or(0)));
        let (on_cpu, waiting) = (ns.next().unwrap_or_default(), ns.next().unwrap_or_default());
        let stat = std::fs::read_to_string(format!("{task}/stat")).unwrap_or_default();
        // The state follows the command name, which is in parentheses and may hold spaces.
        let state = stat.rsplit_once(") ").and_then(|(_, rest)| rest.chars().next()).unwrap_or('?');
        let syscall = std::fs::read_to_string(format!("{task}/syscall")).ok().and_then(|s| syscall_name(&s));
        ThreadSample { at: Instant::now(), on_cpu, waiting, stolen: steal(cpu), state, syscall }
    }
}

/// The system call in a `/proc/.../syscall` line ("running" or "-1 ...": none).
fn syscall_name(line: &str) -> Option<String> {
    let number: libc::c_long = line.split_whitespace().next()?.parse().ok().filter(|&n| n >= 0)?;
    let known = [
        (libc::SYS_io_uring_enter, "io_uring_enter"),
        (libc::SYS_futex, "futex"),
        (libc::SYS_fsync, "fsync"),
        (libc::SYS_fdatasync, "fdatasync"),
        (libc::SYS_read, "read"),
        (libc::SYS_write, "write"),
        (libc::SYS_pread64, "pread64"),
        (libc::SYS_pwrite64, "pwrite64"),
        (libc::SYS_openat, "openat"),
        (libc::SYS_close, "close"),
        (libc::SYS_unlinkat, "unlinkat"),
        (libc::SYS_renameat2, "renameat2"),
        (libc::SYS_fallocate, "fallocate"),
        (libc::SYS_ftruncate, "ftruncate"),
        (libc::SYS_mmap, "mmap"),
        (libc::SYS_munmap, "munmap"),
        (libc::SYS_madvise, "madvise"),
        (libc::SYS_clock_nanosleep, "clock_nanosleep"),
        // A sleep a signal interrupted, resumed.
        (libc::SYS_restart_syscall, "restart_syscall"),
        (libc::SYS_nanosleep, "nanosleep"),
        (libc::SYS_epoll_pwait, "epoll_pwait"),
        (libc::SYS_ppoll, "ppoll"),
    ];
    let name =
        known.iter().find(|(n, _)| *n == number).map_or_else(|| format!("#{number}"), |(_, name)| name.to_string());
    Some(name)
}

/// The steal time of `cpu` so far (`/proc/stat`, in clock ticks).
fn steal(cpu: usize) -> Duration {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let prefix = format!("cpu{cpu} ");
    let ticks: u64 = stat
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|fields| fields.split_whitespace().nth(7)?.parse().ok())
        .unwrap_or(0);
    // SAFETY: sysconf only reads a system constant.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Duration::from_nanos(ticks.saturating_mul(1_000_000_000 / per_second))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sleeping_thread_is_seen_in_its_system_call() {
        let (tx, rx) = std::sync::mpsc::channel();
        let (release, held) = std::sync::mpsc::channel::<()>();
        let sleeper = std::thread::spawn(move || {
            tx.send(rustix::thread::gettid().as_raw_nonzero().get()).unwrap();
            let _ = held.recv();
        });
        let tid = rx.recv().unwrap();
        let mut sample = ThreadSample::read(tid, 0);
        while sample.state != 'S' {
            std::thread::yield_now();
            sample = ThreadSample::read(tid, 0);
        }
        assert_eq!(sample.syscall.as_deref(), Some("futex"), "{sample:?}");
        drop(release);
        sleeper.join().unwrap();
    }

    #[test]
    fn syscall_lines() {
        assert_eq!(syscall_name("running"), None);
        assert_eq!(syscall_name("-1 0x7ffc 0x0"), None);
        assert_eq!(syscall_name(&format!("{} 0x3 0x0", libc::SYS_io_uring_enter)).as_deref(), Some("io_uring_enter"));
        assert_eq!(syscall_name("100000 0x0").as_deref(), Some("#100000"));
    }
}
