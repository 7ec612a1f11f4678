//! Captures another thread's stack: the watchdog signals a held shard
//! thread, whose handler walks its own stack into a static slot, and the
//! watchdog reads the slot. One capture at a time.
//!
//! The handler only walks frames and stores numbers (the walk is the one a
//! sampling profiler does from a signal); naming them allocates and reads
//! debug information, so the namer (`stack_names.rs`) has a child process
//! do it (`stack_symbols.rs`).

use super::NodeError;
use std::sync::atomic::{AtomicI32, AtomicU8, AtomicUsize, Ordering};
use std::sync::OnceLock;

/// The signal sent to the thread to capture (glommio's own stall detector
/// uses SIGUSR1).
const SIGNAL: libc::c_int = libc::SIGUSR2;

/// Frames kept, innermost first, including the handler's own.
const MAX_FRAMES: usize = 96;

const IDLE: u8 = 0;
const ASKED: u8 = 1;
const WALKING: u8 = 2;
const DONE: u8 = 3;

struct Slot {
    state: AtomicU8,
    tid: AtomicI32,
    len: AtomicUsize,
    frames: [AtomicUsize; MAX_FRAMES],
}

static SLOT: Slot = Slot {
    state: AtomicU8::new(IDLE),
    tid: AtomicI32::new(0),
    len: AtomicUsize::new(0),
    frames: [const { AtomicUsize::new(0) }; MAX_FRAMES],
};

/// The handler's installation, once per process (its failure, kept as text: an io::Error is not Clone).
static INSTALLED: OnceLock<Result<(), String>> = OnceLock::new();

/// Installs the handler (once per process).
pub fn install() -> Result<(), NodeError> {
    let installed = INSTALLED.get_or_init(|| {
        // SAFETY: the handler touches only atomics and walks the stack
        // without allocating.
        unsafe { signal_hook::low_level::register(SIGNAL, on_signal) }.map(|_| ()).map_err(|e| e.to_string())
    });
    installed.clone().map_err(|why| NodeError::Thread {
        what: "installing the stack capture's signal handler",
        source: std::io::Error::other(why),
    })
}

fn on_signal() {
    let me = rustix::thread::gettid().as_raw_nonzero().get();
    if SLOT.tid.load(Ordering::Acquire) != me
        || SLOT.state.compare_exchange(ASKED, WALKING, Ordering::AcqRel, Ordering::Acquire).is_err()
    {
        return;
    }
    let mut len = 0;
    // SAFETY: no other walk runs (the slot is WALKING); the walk does not
    // allocate once the unwinder is loaded (`install` runs before the first).
    unsafe {
        backtrace::trace_unsynchronized(|frame| {
            SLOT.frames[len].store(frame.ip() as usize, Ordering::Relaxed);
            len += 1;
            len < MAX_FRAMES
        });
    }
    SLOT.len.store(len, Ordering::Relaxed);
    SLOT.state.store(DONE, Ordering::Release);
}

/// Asks thread `tid` of this process for its stack; false while another
/// capture is under way or when the signal cannot be sent.
pub fn request(tid: i32) -> bool {
    if SLOT.state.compare_exchange(IDLE, ASKED, Ordering::AcqRel, Ordering::Acquire).is_err() {
        return false;
    }
    SLOT.tid.store(tid, Ordering::Release);
    // SAFETY: tgkill only sends a signal to a thread of this process.
    let sent = unsafe { libc::tgkill(libc::getpid(), tid, SIGNAL) } == 0;
    if !sent {
        SLOT.state.store(IDLE, Ordering::Release);
    }
    sent
}

/// The stack of thread `tid` (its frames' addresses, innermost first) once
/// its handler ran; the slot is free again after this returns Some, or
/// after `cancel`.
pub fn take(tid: i32) -> Option<Vec<usize>> {
    if SLOT.tid.load(Ordering::Acquire) != tid || SLOT.state.load(Ordering::Acquire) != DONE {
        return None;
    }
    let len = SLOT.len.load(Ordering::Relaxed);
    let ips: Vec<usize> = SLOT.frames[..len].iter().map(|f| f.load(Ordering::Relaxed)).collect();
    SLOT.state.store(IDLE, Ordering::Release);
    Some(ips)
}

/// Gives up a capture whose handler has not run (the thread left the
/// hold first); a walk already under way ends in DONE and the next
/// `take` of another thread ignores it.
pub fn cancel(tid: i32) {
    if SLOT.tid.load(Ordering::Acquire) == tid {
        let _ = SLOT.state.compare_exchange(ASKED, IDLE, Ordering::AcqRel, Ordering::Acquire);
        let _ = SLOT.state.compare_exchange(DONE, IDLE, Ordering::AcqRel, Ordering::Acquire);
    }
}

/// The frames the signal interrupted, without the handler's own.
pub fn interrupted(names: &[String]) -> Vec<String> {
    // Our handler, signal-hook's (named `handler` when inlined), the
    // kernel's return trampoline, then the frame the signal stopped.
    let Some(ours) = names.iter().position(|n| n.contains("on_signal")) else { return names.to_vec() };
    let theirs = names[ours..].iter().position(|n| n == "handler" || n.ends_with("::handler"));
    let start = theirs.map_or(ours + 1, |i| ours + i + 2);
    names.get(start..).unwrap_or_default().to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::node::stack_symbols::named_here;

    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;

    /// Spins, saying so from inside the loop, until told to stop.
    #[inline(never)]
    fn busy_in_a_named_function(spinning: &AtomicBool, stop: &AtomicBool) {
        while !stop.load(Ordering::Relaxed) {
            spinning.store(true, Ordering::Relaxed);
            std::hint::spin_loop();
        }
    }

    #[test]
    fn a_busy_threads_stack_names_its_function() {
        install().unwrap();
        let (spinning, stop) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
        let (tx, rx) = std::sync::mpsc::channel();
        let busy = std::thread::spawn({
            let (spinning, stop) = (spinning.clone(), stop.clone());
            move || {
                tx.send(rustix::thread::gettid().as_raw_nonzero().get()).unwrap();
                busy_in_a_named_function(&spinning, &stop);
            }
        });
        let tid = rx.recv().unwrap();
        while !spinning.load(Ordering::Relaxed) || !request(tid) {
            std::thread::yield_now();
        }
        let stack = loop {
            if let Some(stack) = take(tid).map(|ips| interrupted(&named_here(&ips))) {
                break stack;
            }
            std::thread::yield_now();
        };
        stop.store(true, Ordering::Relaxed);
        busy.join().unwrap();
        assert!(stack.iter().any(|f| f.contains("busy_in_a_named_function")), "{stack:#?}");
        assert!(!stack.iter().any(|f| f.contains("on_signal")), "the handler's frames are left out: {stack:#?}");
    }
}
