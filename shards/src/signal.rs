//! Single-threaded wake-ups for tasks on one shard: a generation counter and the
//! wakers of the tasks waiting for it to move.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

/// Wakes every task waiting on it when notified.
#[derive(Default)]
pub struct Signal {
    generation: Cell<u64>,
    wakers: RefCell<Vec<Waker>>,
}

impl Signal {
    /// Wakes all current waiters.
    pub fn notify(&self) {
        self.generation.set(self.generation.get() + 1);
        for waker in self.wakers.borrow_mut().drain(..) {
            waker.wake();
        }
    }

    /// A future that completes at the next notify after this call.
    pub fn wait(&self) -> Wait<'_> {
        Wait { signal: self, seen: self.generation.get(), registered: false }
    }

    /// Waits for a notify or for `limit`; true if notified.
    pub async fn wait_for(&self, limit: Duration) -> bool {
        let notified = async {
            self.wait().await;
            true
        };
        let timed_out = async {
            glommio::timer::sleep(limit).await;
            false
        };
        futures_lite::future::or(notified, timed_out).await
    }
}

/// Future returned by [`Signal::wait`].
pub struct Wait<'a> {
    signal: &'a Signal,
    seen: u64,
    registered: bool,
}

impl Future for Wait<'_> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.signal.generation.get() != self.seen {
            return Poll::Ready(());
        }
        if !self.registered {
            self.signal.wakers.borrow_mut().push(cx.waker().clone());
            self.registered = true;
        }
        Poll::Pending
    }
}

/// The outcome of one group-commit round, awaited by every append in it.
#[derive(Default)]
pub(crate) struct Completion {
    outcome: RefCell<Option<crate::error::Result<()>>>,
    signal: Signal,
}

impl Completion {
    /// Sets the outcome and wakes the waiters.
    pub fn complete(&self, outcome: crate::error::Result<()>) {
        *self.outcome.borrow_mut() = Some(outcome);
        self.signal.notify();
    }

    /// Waits for the outcome.
    pub async fn wait(&self) -> crate::error::Result<()> {
        loop {
            let wait = self.signal.wait();
            if let Some(outcome) = self.outcome.borrow().as_ref() {
                return outcome.clone();
            }
            wait.await;
        }
    }
}
