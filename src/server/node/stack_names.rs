//! The namer: a thread in the idle scheduling class that names the stacks
//! the watchdog captured and logs the holds they belong to. Naming parses
//! the binary's debug information (about half a second of CPU once it was
//! let go), and a broker whose shards are held for want of CPU must not
//! pay that before them: the namer, and the child process it has parse
//! (`stack_symbols.rs`), run only on CPU nobody else wants.

use super::stack_capture;
use super::stack_symbols::Symbolizer;
use super::NodeError;
use crate::server::core::stall::Hold;
use std::path::Path;
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Holds waiting to be logged; past this the watchdog logs them unnamed.
const QUEUED_MAX: usize = 16;

/// Frames of a stack put in a log line.
const LOGGED_FRAMES: usize = 24;

/// How often the namer looks whether its child may go.
const RELEASE_CHECK: Duration = Duration::from_secs(1);

/// The naming child keeps the parsed debug information: it is let go this
/// long after the last stack named, so a burst of holds parses it once and
/// an idle broker does not keep it.
const NAMES_KEPT: Duration = Duration::from_secs(10);

/// One hold to log.
struct Entry {
    shard: usize,
    hold: Hold,
    what: &'static str,
}

/// The running namer; stops (after logging what it was given) when dropped.
pub struct Namer {
    queue: Option<SyncSender<Entry>>,
    thread: Option<JoinHandle<()>>,
}

impl Namer {
    pub fn start() -> Result<Namer, NodeError> {
        let (queue, entries) = sync_channel(QUEUED_MAX);
        let thread = std::thread::Builder::new()
            .name("ringmq-stack-names".into())
            .spawn(move || run(entries))
            .map_err(|source| NodeError::Thread { what: "starting the stack namer thread", source })?;
        Ok(Namer { queue: Some(queue), thread: Some(thread) })
    }

    /// Logs `hold` of `shard` with its stack named, on the namer's thread;
    /// at once without names if the namer is behind.
    pub fn log(&self, shard: usize, hold: Hold, what: &'static str) {
        let queue = self.queue.as_ref().expect("set until dropped");
        if let Err(TrySendError::Full(entry) | TrySendError::Disconnected(entry)) =
            queue.try_send(Entry { shard, hold, what })
        {
            log(&entry, "(not named: the namer is behind)".into());
        }
    }
}

impl Drop for Namer {
    fn drop(&mut self) {
        self.queue.take();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn run(entries: Receiver<Entry>) {
    // SAFETY: sets this thread's own scheduling class; SCHED_IDLE takes priority 0.
    let idle = unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &libc::sched_param { sched_priority: 0 }) };
    if idle != 0 {
        tracing::debug!(error = %std::io::Error::last_os_error(), "the stack namer runs in the normal class");
    }
    let mut namer: Option<(Symbolizer, Instant)> = None;
    loop {
        match entries.recv_timeout(RELEASE_CHECK) {
            Ok(entry) => {
                let stack = match named(&mut namer, &entry.hold.stack) {
                    Ok(names) => stack_capture::interrupted(&names)
                        .into_iter()
                        .take(LOGGED_FRAMES)
                        .collect::<Vec<_>>()
                        .join(" <- "),
                    Err(e) => format!("(not named: {e})"),
                };
                log(&entry, stack);
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
        if namer.as_ref().is_some_and(|(_, last)| last.elapsed() >= NAMES_KEPT) {
            namer = None;
        }
    }
}

/// The names of `ips` from the naming child, started (again) if need be; a
/// child that failed is let go, so the next hold starts a new one.
fn named(namer: &mut Option<(Symbolizer, Instant)>, ips: &[usize]) -> std::io::Result<Vec<String>> {
    let symbolizer = match namer.take() {
        Some((symbolizer, _)) => symbolizer,
        // This process's own executable, even if replaced on disk since.
        None => Symbolizer::start(Path::new("/proc/self/exe"))?,
    };
    let (mut symbolizer, now) = (symbolizer, Instant::now());
    let names = symbolizer.name(ips)?;
    *namer = Some((symbolizer, now));
    Ok(names)
}

fn log(entry: &Entry, stack: String) {
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let hold = &entry.hold;
    tracing::warn!(
        shard = entry.shard,
        held_ms = ms(hold.held),
        cause = hold.cause.as_str(),
        on_cpu_ms = ms(hold.on_cpu),
        waiting_for_cpu_ms = ms(hold.waiting),
        stolen_ms = ms(hold.stolen),
        state = %hold.state,
        syscall = hold.syscall.as_deref().unwrap_or("none"),
        stack,
        "{}",
        entry.what
    );
}
