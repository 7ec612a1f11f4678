//! CPU-heavy background work (sorting a checkpoint's lookup chunk) on its own
//! thread at the lowest priority, allowed on every CPU: the shard's executor
//! is pinned, and glommio's blocking pool shares its core, where a 1M-entry
//! sort preempted appends and reads for tens of ms.

/// Runs `work` on a new low-priority thread and waits for it (call from
/// glommio's blocking pool, never from the executor's thread).
pub fn run_low_priority<T: Send + 'static>(name: &str, work: impl FnOnce() -> T + Send + 'static) -> T {
    let thread = std::thread::Builder::new().name(name.into()).spawn(move || {
        lower_priority();
        work()
    });
    match thread.map(|t| t.join()) {
        Ok(Ok(out)) => out,
        Ok(Err(panic)) => std::panic::resume_unwind(panic),
        Err(error) => panic!("spawning the {name} thread: {error}"),
    }
}

/// Nice 19 and every online CPU for the calling thread. Best effort: a
/// failure leaves the thread where it was, which is only slower for others.
fn lower_priority() {
    // SAFETY: plain syscalls on the calling thread with a zeroed, then filled, CPU set.
    unsafe {
        libc::setpriority(libc::PRIO_PROCESS, 0, 19);
        let cpus = libc::sysconf(libc::_SC_NPROCESSORS_ONLN).max(1) as usize;
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for cpu in 0..cpus.min(libc::CPU_SETSIZE as usize) {
            libc::CPU_SET(cpu, &mut set);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn returns_the_work_result_from_a_niced_thread() {
        let nice = run_low_priority("test-background", || {
            // SAFETY: reads the calling thread's nice value.
            unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) }
        });
        assert_eq!(nice, 19);
    }
}
