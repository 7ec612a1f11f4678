//! The watchdog: one thread per broker process that watches every shard's
//! pulse (`core/stall.rs`). A shard whose beat is overdue past the threshold is
//! held; the watchdog reads the thread's state, asks a running thread for
//! its stack (`stack_capture.rs`), and when the beats resume records the
//! hold with its cause (the thread's CPU time, run delay and the host's
//! steal over the hold: `thread_sample.rs`) and has the namer
//! (`stack_names.rs`) log where it was.

use super::stack_capture;
use super::stack_names::Namer;
use super::thread_sample::ThreadSample;
use super::NodeError;
use crate::server::core::stall::{self, Cause, Hold, Pulse};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// A hold still going this long is logged before it ends (a deadlock never
/// ends).
const STILL_HELD: Duration = Duration::from_secs(1);

/// The watchdog's own sleep this late means every thread of the process
/// was stopped (a starved watchdog is late by milliseconds, not this).
const FROZEN: Duration = Duration::from_millis(500);

/// The running watchdog; stops when dropped.
pub struct Watchdog {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Watchdog {
    /// Watches `pulses` for holds longer than `threshold`.
    pub fn start(pulses: Vec<Arc<Pulse>>, threshold: Duration) -> Result<Watchdog, NodeError> {
        stack_capture::install()?;
        let namer = Namer::start()?;
        let stop = Arc::new(AtomicBool::new(false));
        let every = (threshold / 2).max(Duration::from_millis(1));
        let thread = std::thread::Builder::new()
            .name("ringmq-watchdog".into())
            .spawn({
                let stop = stop.clone();
                move || {
                    let mut watches: Vec<Option<Watch>> = pulses.iter().map(|_| None).collect();
                    // When the process last ran again after being stopped (the pulses' clock).
                    let mut thawed = 0;
                    while !stop.load(Ordering::Relaxed) {
                        let slept = std::time::Instant::now();
                        std::thread::sleep(every);
                        if frozen(slept.elapsed(), every) {
                            // The shards' beats are late for the same reason: not their holds,
                            // and a beat from before the stop counts as one at its end.
                            watches.iter_mut().flatten().for_each(|w| stack_capture::cancel(w.tid));
                            watches.iter_mut().for_each(|w| *w = None);
                            thawed = stall::now_ns();
                            continue;
                        }
                        for (pulse, watch) in pulses.iter().zip(&mut watches) {
                            check(pulse, watch, threshold, thawed, &namer);
                        }
                    }
                }
            })
            .map_err(|source| NodeError::Thread { what: "starting the watchdog thread", source })?;
        Ok(Watchdog { stop, thread: Some(thread) })
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Whether the watchdog's own sleep of `every` overran by more than
/// `FROZEN`: the whole process was stopped (SIGSTOP, a debugger) or the
/// machine froze, and says so.
fn frozen(slept: Duration, every: Duration) -> bool {
    let late = slept.saturating_sub(every);
    if late <= FROZEN {
        return false;
    }
    let ms = late.as_secs_f64() * 1e3;
    tracing::warn!(late_ms = ms, "the broker's threads were all stopped (SIGSTOP, a debugger, or the machine froze)");
    true
}

/// A hold under way.
struct Watch {
    tid: i32,
    /// The beat the thread has not followed yet.
    beat: u64,
    first: ThreadSample,
    /// The latest reading taken while the thread was still held: the cause
    /// is judged between the two, never past the hold's end (a watchdog
    /// that notices the end late would count the thread's time after it).
    latest: ThreadSample,
    /// The frames' addresses, kept only if the hold's cause makes them worth naming.
    stack: Option<Vec<usize>>,
    asked_stack: bool,
    told: bool,
}

/// One look at one pulse: a hold starts, goes on, or ends; a beat before
/// `thawed` counts as one then.
fn check(pulse: &Pulse, watch: &mut Option<Watch>, threshold: Duration, thawed: u64, namer: &Namer) {
    let beat = pulse.latest_beat().max(thawed);
    match watch {
        Some(w) if beat != w.beat || pulse.tid() != Some(w.tid) => {
            let w = watch.take().expect("matched Some");
            if pulse.tid() == Some(w.tid) {
                let held = pulse.late(w.beat, beat);
                let hold = w.end(pulse, held);
                namer.log(pulse.shard(), hold.clone(), "a shard's thread was held");
                pulse.record(hold);
            } else {
                // The shard stopped beating to stop: not a hold.
                stack_capture::cancel(w.tid);
            }
        }
        Some(w) => {
            w.collect_stack();
            w.latest = ThreadSample::read(w.tid, pulse.cpu());
            let late = pulse.late(w.beat, stall::now_ns());
            if late >= STILL_HELD && !w.told {
                w.told = true;
                let so_far = w.summary(pulse, late);
                namer.log(pulse.shard(), so_far, "a shard's thread is held and has been for over a second");
            }
        }
        None => {
            let Some(tid) = pulse.tid() else { return };
            if pulse.late(beat, stall::now_ns()) > threshold {
                *watch = Some(Watch::begin(pulse, tid, beat));
            }
        }
    }
}

impl Watch {
    fn begin(pulse: &Pulse, tid: i32, beat: u64) -> Watch {
        let first = ThreadSample::read(tid, pulse.cpu());
        // A thread asleep in a system call is not interrupted (its call
        // would fail with EINTR); its call is named instead.
        let asked_stack = first.state == 'R' && stack_capture::request(tid);
        Watch { tid, beat, latest: first.clone(), first, stack: None, asked_stack, told: false }
    }

    fn collect_stack(&mut self) {
        if self.asked_stack && self.stack.is_none() {
            self.stack = stack_capture::take(self.tid);
        }
    }

    /// The hold so far, `held` long.
    fn summary(&mut self, pulse: &Pulse, held: Duration) -> Hold {
        self.collect_stack();
        // Seen once only (held for about a watchdog period): judged up to now.
        if self.latest.at == self.first.at {
            self.latest = ThreadSample::read(self.tid, pulse.cpu());
        }
        let now = &self.latest;
        let span = now.at.duration_since(self.first.at);
        let on_cpu = now.on_cpu.saturating_sub(self.first.on_cpu);
        let waiting = now.waiting.saturating_sub(self.first.waiting);
        let stolen = now.stolen.saturating_sub(self.first.stolen);
        let cause = cause(span, on_cpu, waiting, stolen);
        // A thread that waited for its CPU was stopped wherever the kernel
        // took it off: its stack says nothing of the broker.
        let telling = matches!(cause, Cause::Running | Cause::Blocked);
        let stack = self.stack.clone().filter(|_| telling).unwrap_or_default();
        Hold {
            held,
            cause,
            on_cpu,
            waiting,
            stolen,
            state: self.first.state,
            syscall: self.first.syscall.clone(),
            stack,
        }
    }

    fn end(mut self, pulse: &Pulse, held: Duration) -> Hold {
        let hold = self.summary(pulse, held);
        if self.asked_stack && self.stack.is_none() {
            stack_capture::cancel(self.tid);
        }
        hold
    }
}

/// What the thread did over `span`: the host's steal when it took half of
/// it, else whichever of running, waiting for the CPU and sleeping took
/// the most.
fn cause(span: Duration, on_cpu: Duration, waiting: Duration, stolen: Duration) -> Cause {
    let asleep = span.saturating_sub(on_cpu + waiting + stolen);
    if stolen * 2 >= span && !stolen.is_zero() {
        Cause::Stolen
    } else if waiting >= on_cpu && waiting >= asleep {
        Cause::Starved
    } else if on_cpu >= asleep {
        Cause::Running
    } else {
        Cause::Blocked
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::core::stall;

    #[inline(never)]
    fn spin_on_the_shard_thread(for_how_long: Duration) {
        let until = std::time::Instant::now() + for_how_long;
        while std::time::Instant::now() < until {
            std::hint::spin_loop();
        }
    }

    /// Runs `hold` on an executor whose pulse is watched with a 10 ms
    /// threshold, and returns the holds seen.
    fn watched(hold: impl FnOnce() + 'static) -> Arc<Pulse> {
        let threshold = Duration::from_millis(10);
        let pulse = Arc::new(Pulse::new(0, 0, threshold));
        let watchdog = Watchdog::start(vec![pulse.clone()], threshold).unwrap();
        let ex = glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound).make().unwrap();
        ex.run({
            let pulse = pulse.clone();
            async move {
                let beating = glommio::spawn_local(stall::probe(pulse.clone()));
                while pulse.tid().is_none() {
                    glommio::timer::sleep(Duration::from_millis(1)).await;
                }
                hold();
                glommio::timer::sleep(Duration::from_millis(50)).await;
                drop(beating);
            }
        });
        drop(watchdog);
        pulse
    }

    #[test]
    fn a_long_loop_on_the_shard_thread_is_a_hold_with_its_stack() {
        let pulse = watched(|| spin_on_the_shard_thread(Duration::from_millis(300)));
        let hold = pulse.last().expect("the loop was seen");
        assert!(hold.held >= Duration::from_millis(200), "{hold:?}");
        assert_eq!(hold.cause, Cause::Running, "{hold:?}");
        let names = crate::server::node::stack_symbols::named_here(&hold.stack);
        assert!(names.iter().any(|f| f.contains("spin_on_the_shard_thread")), "{names:#?}");
    }

    #[test]
    fn a_blocking_call_on_the_shard_thread_is_a_hold_in_that_call() {
        let pulse = watched(|| std::thread::sleep(Duration::from_millis(300)));
        let hold = pulse.last().expect("the sleep was seen");
        assert!(hold.held >= Duration::from_millis(200), "{hold:?}");
        assert_eq!(hold.cause, Cause::Blocked, "{hold:?}");
        let sleeping = ["clock_nanosleep", "restart_syscall"];
        assert!(sleeping.contains(&hold.syscall.as_deref().unwrap_or("none")), "{hold:?}");
        assert_eq!(pulse.count_of(Cause::Blocked), pulse.count(), "one cause");
    }

    #[test]
    fn causes_from_the_schedulers_figures() {
        let ms = Duration::from_millis;
        assert_eq!(cause(ms(100), ms(95), ms(1), ms(0)), Cause::Running);
        assert_eq!(cause(ms(100), ms(1), ms(0), ms(0)), Cause::Blocked);
        assert_eq!(cause(ms(100), ms(10), ms(85), ms(0)), Cause::Starved);
        assert_eq!(cause(ms(100), ms(0), ms(10), ms(80)), Cause::Stolen);
    }
}
