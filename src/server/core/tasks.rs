//! One shard's background tasks, by name (delivery loops, checks, snapshots,
//! probes). A task that ends on its own while the shard runs is logged, and
//! a fatal one stops the shard; at shutdown every task is asked to stop
//! (its `Tasks::sleep` returns false), given a bounded time to return, and
//! then cancelled.

use futures_lite::future;
use ringmq_shards::Signal;
use std::cell::{Cell, RefCell};
use std::future::Future;
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

/// Whether a task's end stops the shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Death {
    /// The shard cannot do its job without it: the shard stops.
    Fatal,
    /// Logged; the shard goes on without it.
    Logged,
    /// It ends when its work is done (one queue's move): nothing to say.
    Done,
}

#[derive(Default)]
struct State {
    stopping: Cell<bool>,
    /// Notified when stopping starts or a fatal task dies.
    changed: Signal,
    /// The first fatal task that ended.
    died: Cell<Option<&'static str>>,
}

struct Running {
    name: &'static str,
    task: glommio::task::JoinHandle<()>,
}

/// The registry of one shard's background tasks.
#[derive(Default)]
pub struct Tasks {
    state: Rc<State>,
    running: RefCell<Vec<Running>>,
}

impl Tasks {
    /// Starts `task` as `name`.
    pub fn spawn(&self, name: &'static str, death: Death, task: impl Future<Output = ()> + 'static) {
        assert!(!self.state.stopping.get(), "task {name} started during shutdown");
        let state = self.state.clone();
        let task = glommio::spawn_local(async move {
            task.await;
            if state.stopping.get() {
                return;
            }
            match death {
                Death::Fatal => {
                    tracing::error!(task = name, "a fatal background task ended; stopping the shard");
                    state.died.set(state.died.get().or(Some(name)));
                    state.changed.notify();
                }
                Death::Logged => tracing::error!(task = name, "a background task ended; going on without it"),
                Death::Done => {}
            }
        })
        .detach();
        self.running.borrow_mut().push(Running { name, task });
    }

    /// Sleeps `duration`; false once the shard is stopping (the task should return).
    pub async fn sleep(&self, duration: Duration) -> bool {
        self.unless_stopping(glommio::timer::sleep(duration)).await.is_some() && !self.state.stopping.get()
    }

    /// Runs `work` unless the shard starts stopping first (then None: the task should return).
    pub async fn unless_stopping<T>(&self, work: impl Future<Output = T>) -> Option<T> {
        let stopping = async {
            while !self.state.stopping.get() {
                self.state.changed.wait().await;
            }
            None
        };
        future::or(async { Some(work.await) }, stopping).await
    }

    /// True once the shard started stopping.
    pub fn stopping(&self) -> bool {
        self.state.stopping.get()
    }

    /// Waits until a fatal task has ended; returns its name.
    pub async fn fatal_death(&self) -> &'static str {
        loop {
            if let Some(name) = self.state.died.get() {
                return name;
            }
            self.state.changed.wait().await;
        }
    }

    /// Asks every task to stop, waits up to `timeout` for them to return,
    /// then cancels the rest (logged by name).
    pub async fn shutdown(&self, timeout: Duration) {
        self.state.stopping.set(true);
        self.state.changed.notify();
        let deadline = Instant::now() + timeout;
        let running = std::mem::take(&mut *self.running.borrow_mut());
        for mut r in running {
            let left = deadline.saturating_duration_since(Instant::now());
            let task = &mut r.task;
            let ended = future::or(
                async {
                    task.await;
                    true
                },
                async {
                    glommio::timer::sleep(left).await;
                    false
                },
            );
            if !ended.await {
                tracing::warn!(task = r.name, "a background task did not stop in time; cancelled");
                r.task.cancel();
            }
        }
    }
}

/// The broker's stop request, given from any thread (`Server::stop`) to every shard.
#[derive(Clone, Default)]
pub struct Stop {
    inner: Arc<Mutex<(bool, Vec<Waker>)>>,
}

impl Stop {
    /// Asks every shard to stop.
    pub fn stop(&self) {
        let wakers = {
            let mut inner = self.inner.lock().expect("stop lock");
            inner.0 = true;
            std::mem::take(&mut inner.1)
        };
        wakers.into_iter().for_each(Waker::wake);
    }

    /// Waits until stop is asked.
    pub async fn asked(&self) {
        std::future::poll_fn(|cx| {
            let mut inner = self.inner.lock().expect("stop lock");
            if inner.0 {
                return Poll::Ready(());
            }
            if !inner.1.iter().any(|w| w.will_wake(cx.waker())) {
                inner.1.push(cx.waker().clone());
            }
            Poll::Pending
        })
        .await
    }
}
