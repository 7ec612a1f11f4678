//! A one-shot result that a thread can block on or an async task can await.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Condvar, Mutex};
use std::task::{Context, Poll, Waker};

struct Slot<T> {
    value: Option<T>,
    waker: Option<Waker>,
}

/// The receiving side: `wait()` blocks, `.await` suspends.
pub struct Promise<T> {
    shared: Arc<(Mutex<Slot<T>>, Condvar)>,
}

/// The sending side.
pub struct Resolver<T> {
    shared: Arc<(Mutex<Slot<T>>, Condvar)>,
}

/// A connected resolver and promise.
pub fn promise<T>() -> (Resolver<T>, Promise<T>) {
    let shared = Arc::new((Mutex::new(Slot { value: None, waker: None }), Condvar::new()));
    (Resolver { shared: shared.clone() }, Promise { shared })
}

impl<T> Resolver<T> {
    /// Delivers the value and wakes the waiter.
    pub fn resolve(self, value: T) {
        let (slot, cond) = &*self.shared;
        let mut s = slot.lock().expect("promise lock");
        s.value = Some(value);
        if let Some(w) = s.waker.take() {
            w.wake();
        }
        cond.notify_all();
    }
}

impl<T> Promise<T> {
    /// Blocks until the value arrives.
    pub fn wait(self) -> T {
        let (slot, cond) = &*self.shared;
        let mut s = slot.lock().expect("promise lock");
        loop {
            if let Some(v) = s.value.take() {
                return v;
            }
            s = cond.wait(s).expect("promise lock");
        }
    }
}

impl<T> Future for Promise<T> {
    type Output = T;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        let mut s = self.shared.0.lock().expect("promise lock");
        match s.value.take() {
            Some(v) => Poll::Ready(v),
            None => {
                s.waker = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}
