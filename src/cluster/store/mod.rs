//! The coordination store the control plane keeps the cluster in: keys
//! with revisions, leases, compare-and-swap transactions and a watch of a
//! prefix, as etcd offers them. [`EtcdStore`] is the real one;
//! [`MemoryStore`] keeps it all in memory for the simulator and the unit
//! tests, on the caller's (possibly simulated) clock.

mod etcd;
mod memory;

pub use etcd::EtcdStore;
pub use memory::MemoryStore;

use std::future::Future;
use std::time::Duration;

/// A lease id: keys put under it go when it runs out or is revoked.
pub type Lease = i64;

/// Why the store did not do what it was asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    #[error("the coordination store did not answer: {0}")]
    Unavailable(String),
    #[error("lease {0} ran out")]
    LeaseGone(Lease),
    #[error("{key} holds what this broker cannot read: {reason}")]
    Unreadable { key: String, reason: String },
}

/// A stored key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kv {
    pub key: String,
    pub value: Vec<u8>,
    /// The store's revision when the key was last changed.
    pub mod_revision: i64,
    /// The store's revision when the key was created.
    pub create_revision: i64,
}

impl Kv {
    /// The value as text.
    pub fn text(&self) -> Result<&str, StoreError> {
        std::str::from_utf8(&self.value).map_err(|e| self.unreadable(e))
    }

    /// The value as JSON.
    pub fn json<T: serde::de::DeserializeOwned>(&self) -> Result<T, StoreError> {
        serde_json::from_slice(&self.value).map_err(|e| self.unreadable(e))
    }

    /// The value as a number.
    pub fn number<T: std::str::FromStr<Err: std::fmt::Display>>(&self) -> Result<T, StoreError> {
        self.text()?.parse().map_err(|e| self.unreadable(e))
    }

    fn unreadable(&self, e: impl std::fmt::Display) -> StoreError {
        StoreError::Unreadable { key: self.key.clone(), reason: e.to_string() }
    }
}

/// The keys under a prefix, in key order, and the store's revision then.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Listing {
    pub kvs: Vec<Kv>,
    pub revision: i64,
}

/// A condition of a transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Compare {
    /// The key does not exist.
    Absent(String),
    /// The key exists.
    Present(String),
    /// The key was last changed at this revision (0: it does not exist).
    ModRevision(String, i64),
    /// The key holds exactly this value.
    Value(String, Vec<u8>),
}

/// A change a transaction makes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    Put { key: String, value: Vec<u8>, lease: Option<Lease> },
    Delete(String),
}

impl Op {
    pub fn put(key: impl Into<String>, value: impl Into<Vec<u8>>) -> Op {
        Op::Put { key: key.into(), value: value.into(), lease: None }
    }

    pub fn put_leased(key: impl Into<String>, value: impl Into<Vec<u8>>, lease: Lease) -> Op {
        Op::Put { key: key.into(), value: value.into(), lease: Some(lease) }
    }
}

/// The keys changed under a watched prefix, a batch at a time.
pub struct Watch(tokio::sync::mpsc::UnboundedReceiver<Vec<String>>);

impl Watch {
    /// A watch fed by `keys` (a store that is not etcd: the memory store, a simulated link).
    pub fn fed_by(keys: tokio::sync::mpsc::UnboundedReceiver<Vec<String>>) -> Watch {
        Watch(keys)
    }

    /// The next batch of changed keys; None once the watch ended (the
    /// store went away): the caller reads again on its own schedule.
    pub async fn next(&mut self) -> Option<Vec<String>> {
        self.0.recv().await
    }
}

/// What the control plane needs of a coordination store.
pub trait Store: Clone + Send + Sync + 'static {
    /// The key, if it exists.
    fn get(&self, key: &str) -> impl Future<Output = Result<Option<Kv>, StoreError>> + Send;
    /// Every key under `prefix`.
    fn list(&self, prefix: &str) -> impl Future<Output = Result<Listing, StoreError>> + Send;
    /// Stores `value` at `key` (under `lease`, if any).
    fn put(
        &self,
        key: &str,
        value: Vec<u8>,
        lease: Option<Lease>,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;
    /// Makes every change of `then` at once if every condition of `when`
    /// holds: the store's revision after, or None (nothing changed) if one
    /// did not.
    fn txn(&self, when: Vec<Compare>, then: Vec<Op>) -> impl Future<Output = Result<Option<i64>, StoreError>> + Send;
    /// A new lease of about `ttl` (the store may grant more): its id and the time to live granted.
    fn grant(&self, ttl: Duration) -> impl Future<Output = Result<(Lease, Duration), StoreError>> + Send;
    /// Renews `lease`: the time to live from now, or `LeaseGone`.
    fn keep_alive(&self, lease: Lease) -> impl Future<Output = Result<Duration, StoreError>> + Send;
    /// Ends `lease` and removes its keys.
    fn revoke(&self, lease: Lease) -> impl Future<Output = Result<(), StoreError>> + Send;
    /// Watches the keys under `prefix` from now on.
    fn watch(&self, prefix: &str) -> impl Future<Output = Result<Watch, StoreError>> + Send;
}
