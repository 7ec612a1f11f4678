//! A node's link to the simulated coordination store. Every call may be
//! delayed each way, fail before it reaches the store, or reach it and lose
//! its answer (the caller cannot tell which); while the node is cut off its
//! calls and watch events wait, as a TCP connection's do, until it heals.
//! A paused node needs nothing here: its tasks are not run at all.

use super::super::store::{Compare, Kv, Lease, Listing, MemoryStore, Op, Store, StoreError, Watch};
use proptest::prelude::RngExt;
use proptest::test_runner::TestRng;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How the links behave; the world changes it (calm once faults stop).
#[derive(Debug, Clone, Copy)]
pub struct Weather {
    /// Longest one-way delay.
    pub delay_max: Duration,
    /// Chance a call fails before it reaches the store.
    pub lost_calls: f64,
    /// Chance a call is done but its answer lost.
    pub lost_answers: f64,
}

impl Weather {
    pub const CALM: Weather = Weather { delay_max: Duration::from_millis(2), lost_calls: 0.0, lost_answers: 0.0 };
}

/// What every link shares: the seeded randomness and the weather.
pub struct Sky {
    pub rng: TestRng,
    pub weather: Weather,
}

#[derive(Clone)]
pub struct Link {
    store: MemoryStore,
    sky: Arc<Mutex<Sky>>,
    /// True while this node is cut off.
    cut: Arc<AtomicBool>,
}

/// How often a cut-off call looks whether the cut healed.
const CUT_POLL: Duration = Duration::from_millis(10);

impl Link {
    pub fn new(store: MemoryStore, sky: Arc<Mutex<Sky>>, cut: Arc<AtomicBool>) -> Link {
        Link { store, sky, cut }
    }

    fn draw(&self, p: impl FnOnce(&Weather) -> f64) -> bool {
        let mut sky = self.sky.lock().expect("the sky");
        let p = p(&sky.weather);
        p > 0.0 && sky.rng.random_bool(p)
    }

    /// One way across: waits out a cut, then a delay.
    async fn cross(&self) {
        while self.cut.load(Ordering::Relaxed) {
            tokio::time::sleep(CUT_POLL).await;
        }
        let delay = {
            let mut sky = self.sky.lock().expect("the sky");
            let max = sky.weather.delay_max.as_micros() as u64;
            Duration::from_micros(sky.rng.random_range(0..=max))
        };
        tokio::time::sleep(delay).await;
    }

    /// A call through the link: there, done, and back, each with its faults.
    async fn call<T>(&self, done: impl std::future::Future<Output = Result<T, StoreError>>) -> Result<T, StoreError> {
        self.cross().await;
        if self.draw(|w| w.lost_calls) {
            return Err(StoreError::Unavailable("the call was lost (simulated)".into()));
        }
        let answer = done.await;
        self.cross().await;
        if self.draw(|w| w.lost_answers) {
            return Err(StoreError::Unavailable("the answer was lost (simulated)".into()));
        }
        answer
    }
}

impl Store for Link {
    async fn get(&self, key: &str) -> Result<Option<Kv>, StoreError> {
        self.call(self.store.get(key)).await
    }

    async fn list(&self, prefix: &str) -> Result<Listing, StoreError> {
        self.call(self.store.list(prefix)).await
    }

    async fn put(&self, key: &str, value: Vec<u8>, lease: Option<Lease>) -> Result<(), StoreError> {
        self.call(self.store.put(key, value, lease)).await
    }

    async fn txn(&self, when: Vec<Compare>, then: Vec<Op>) -> Result<Option<i64>, StoreError> {
        self.call(self.store.txn(when, then)).await
    }

    async fn grant(&self, ttl: Duration) -> Result<(Lease, Duration), StoreError> {
        self.call(self.store.grant(ttl)).await
    }

    async fn keep_alive(&self, lease: Lease) -> Result<Duration, StoreError> {
        self.call(self.store.keep_alive(lease)).await
    }

    async fn revoke(&self, lease: Lease) -> Result<(), StoreError> {
        self.call(self.store.revoke(lease)).await
    }

    async fn watch(&self, prefix: &str) -> Result<Watch, StoreError> {
        let mut events = self.call(self.store.watch(prefix)).await?;
        let (to, from) = tokio::sync::mpsc::unbounded_channel();
        let link = self.clone();
        // On the node's own task set: paused and stopped with the node.
        tokio::task::spawn_local(async move {
            while let Some(keys) = events.next().await {
                link.cross().await;
                if to.send(keys).is_err() {
                    return;
                }
            }
        });
        Ok(Watch::fed_by(from))
    }
}
