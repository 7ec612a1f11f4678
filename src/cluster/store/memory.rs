//! The coordination store in memory: what etcd keeps, in one map, with
//! leases timed by tokio's clock (so a simulation's paused clock times them
//! too). Expired leases are swept by a task of the runtime the store was
//! made on, every `SWEEP`.

use super::{Compare, Kv, Lease, Listing, Op, Store, StoreError, Watch};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;
use tokio::sync::mpsc::UnboundedSender;
use tokio::time::Instant;

/// How often expired leases are looked for (etcd checks every 500 ms).
const SWEEP: Duration = Duration::from_millis(50);

/// A coordination store in memory; clones share it.
#[derive(Clone)]
pub struct MemoryStore {
    state: Arc<Mutex<State>>,
}

struct Entry {
    value: Vec<u8>,
    mod_revision: i64,
    create_revision: i64,
    lease: Option<Lease>,
}

#[derive(Default)]
struct State {
    keys: BTreeMap<String, Entry>,
    revision: i64,
    /// Each live lease's time to live and when it runs out (ordered, so
    /// that a simulation replays the same revisions).
    leases: BTreeMap<Lease, (Duration, Instant)>,
    next_lease: Lease,
    watchers: Vec<(String, UnboundedSender<Vec<String>>)>,
}

impl MemoryStore {
    /// An empty store; must be made inside a tokio runtime, which sweeps its leases.
    pub fn new() -> MemoryStore {
        let state = Arc::new(Mutex::new(State { next_lease: 1, ..State::default() }));
        tokio::spawn(sweep(Arc::downgrade(&state)));
        MemoryStore { state }
    }

    fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        f(&mut self.state.lock().expect("no thread panics holding the store"))
    }
}

/// Ends the leases that ran out, until the store is dropped.
async fn sweep(state: Weak<Mutex<State>>) {
    loop {
        tokio::time::sleep(SWEEP).await;
        let Some(state) = state.upgrade() else { return };
        let mut s = state.lock().expect("no thread panics holding the store");
        let now = Instant::now();
        let expired: Vec<Lease> = s.leases.iter().filter(|(_, (_, end))| *end <= now).map(|(l, _)| *l).collect();
        expired.into_iter().for_each(|lease| s.end_lease(lease));
    }
}

impl State {
    fn kv(&self, key: &str) -> Option<Kv> {
        self.keys.get(key).map(|e| Kv {
            key: key.to_string(),
            value: e.value.clone(),
            mod_revision: e.mod_revision,
            create_revision: e.create_revision,
        })
    }

    fn holds(&self, c: &Compare) -> bool {
        match c {
            Compare::Absent(key) => !self.keys.contains_key(key),
            Compare::Present(key) => self.keys.contains_key(key),
            Compare::ModRevision(key, revision) => self.keys.get(key).map_or(0, |e| e.mod_revision) == *revision,
            Compare::Value(key, value) => self.keys.get(key).is_some_and(|e| e.value == *value),
        }
    }

    /// Applies `ops` as one revision, telling the watchers which keys changed.
    fn apply(&mut self, ops: Vec<Op>) -> Result<i64, StoreError> {
        for op in &ops {
            if let Op::Put { lease: Some(lease), .. } = op {
                if !self.leases.contains_key(lease) {
                    return Err(StoreError::LeaseGone(*lease));
                }
            }
        }
        self.revision += 1;
        let revision = self.revision;
        let mut changed = Vec::new();
        for op in ops {
            match op {
                Op::Put { key, value, lease } => {
                    let create_revision = self.keys.get(&key).map_or(revision, |e| e.create_revision);
                    let entry = Entry { value, mod_revision: revision, create_revision, lease };
                    self.keys.insert(key.clone(), entry);
                    changed.push(key);
                }
                Op::Delete(key) => {
                    if self.keys.remove(&key).is_some() {
                        changed.push(key);
                    }
                }
            }
        }
        self.notify(changed);
        Ok(revision)
    }

    fn notify(&mut self, changed: Vec<String>) {
        self.watchers.retain(|(prefix, to)| {
            let keys: Vec<String> = changed.iter().filter(|k| k.starts_with(prefix.as_str())).cloned().collect();
            keys.is_empty() || to.send(keys).is_ok()
        });
    }

    fn end_lease(&mut self, lease: Lease) {
        self.leases.remove(&lease);
        let keys: Vec<String> =
            self.keys.iter().filter(|(_, e)| e.lease == Some(lease)).map(|(k, _)| k.clone()).collect();
        if !keys.is_empty() {
            let _ = self.apply(keys.into_iter().map(Op::Delete).collect());
        }
    }
}

impl Default for MemoryStore {
    fn default() -> Self {
        MemoryStore::new()
    }
}

impl Store for MemoryStore {
    async fn get(&self, key: &str) -> Result<Option<Kv>, StoreError> {
        Ok(self.with(|s| s.kv(key)))
    }

    async fn list(&self, prefix: &str) -> Result<Listing, StoreError> {
        Ok(self.with(|s| {
            let keys = s.keys.range(prefix.to_string()..).take_while(|(k, _)| k.starts_with(prefix));
            Listing { kvs: keys.filter_map(|(k, _)| s.kv(k)).collect(), revision: s.revision }
        }))
    }

    async fn put(&self, key: &str, value: Vec<u8>, lease: Option<Lease>) -> Result<(), StoreError> {
        self.with(|s| s.apply(vec![Op::Put { key: key.to_string(), value, lease }])).map(drop)
    }

    async fn txn(&self, when: Vec<Compare>, then: Vec<Op>) -> Result<Option<i64>, StoreError> {
        self.with(|s| if when.iter().all(|c| s.holds(c)) { s.apply(then).map(Some) } else { Ok(None) })
    }

    async fn grant(&self, ttl: Duration) -> Result<(Lease, Duration), StoreError> {
        Ok(self.with(|s| {
            let lease = s.next_lease;
            s.next_lease += 1;
            s.leases.insert(lease, (ttl, Instant::now() + ttl));
            (lease, ttl)
        }))
    }

    async fn keep_alive(&self, lease: Lease) -> Result<Duration, StoreError> {
        self.with(|s| {
            let now = Instant::now();
            match s.leases.get_mut(&lease) {
                Some((ttl, end)) if *end > now => {
                    *end = now + *ttl;
                    Ok(*ttl)
                }
                _ => Err(StoreError::LeaseGone(lease)),
            }
        })
    }

    async fn revoke(&self, lease: Lease) -> Result<(), StoreError> {
        self.with(|s| s.end_lease(lease));
        Ok(())
    }

    async fn watch(&self, prefix: &str) -> Result<Watch, StoreError> {
        let (to, from) = tokio::sync::mpsc::unbounded_channel();
        self.with(|s| s.watchers.push((prefix.to_string(), to)));
        Ok(Watch(from))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().unwrap()
    }

    #[test]
    fn a_transaction_changes_everything_or_nothing() {
        runtime().block_on(async {
            let store = MemoryStore::new();
            let when = || vec![Compare::Absent("a".into()), Compare::ModRevision("b".into(), 0)];
            let then = || vec![Op::put("a", "1"), Op::put("b", "2")];
            assert_eq!(store.txn(when(), then()).await, Ok(Some(1)));
            assert_eq!(store.txn(when(), then()).await, Ok(None), "a exists now");
            let b = store.get("b").await.unwrap().unwrap();
            assert_eq!((b.value.as_slice(), b.mod_revision, b.create_revision), (&b"2"[..], 1, 1));
            store.put("b", b"3".to_vec(), None).await.unwrap();
            let b = store.get("b").await.unwrap().unwrap();
            assert_eq!((b.mod_revision, b.create_revision), (2, 1));
            assert!(store
                .txn(vec![Compare::Value("b".into(), b"3".to_vec())], vec![Op::Delete("a".into())])
                .await
                .unwrap()
                .is_some());
            assert_eq!(store.list("").await.unwrap().kvs.len(), 1);
        });
    }

    #[test]
    fn a_lease_not_renewed_takes_its_keys_and_the_watch_says_so() {
        runtime().block_on(async {
            let store = MemoryStore::new();
            let mut watch = store.watch("/n/").await.unwrap();
            let (lease, ttl) = store.grant(Duration::from_secs(2)).await.unwrap();
            store.put("/n/a", b"x".to_vec(), Some(lease)).await.unwrap();
            assert_eq!(watch.next().await, Some(vec!["/n/a".to_string()]));
            tokio::time::sleep(ttl / 2).await;
            assert_eq!(store.keep_alive(lease).await, Ok(ttl), "renewed in time");
            tokio::time::sleep(ttl + SWEEP * 2).await;
            assert_eq!(store.get("/n/a").await, Ok(None), "gone with its lease");
            assert_eq!(watch.next().await, Some(vec!["/n/a".to_string()]));
            assert_eq!(store.keep_alive(lease).await, Err(StoreError::LeaseGone(lease)));
            assert_eq!(store.put("/n/b", vec![], Some(lease)).await, Err(StoreError::LeaseGone(lease)));
        });
    }
}
