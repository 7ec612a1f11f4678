//! A broker group's in-sync replica set in etcd, `/ringmq/broker-groups/<group>/isr`:
//! the nodes that hold everything the group acknowledged, and so the only
//! ones that may be elected. Only the leader of the current epoch changes
//! it, by a compare-and-swap on its revision and on the epoch. A follower
//! joins once it holds the committed end on every shard and leaves when it
//! falls behind on one or its registration is gone; the leader counts a
//! follower toward the committed end only while etcd lists it.

use super::election::BROKER_GROUPS_PREFIX;
use super::store::{Compare, Lease, Op, Store, StoreError};
use std::collections::{BTreeMap, BTreeSet};

/// The set as stored.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Isr {
    pub epoch: u64,
    /// The leader and its in-sync followers, by node name.
    pub members: BTreeSet<String>,
}

pub(super) fn isr_key(group: &str) -> String {
    format!("{BROKER_GROUPS_PREFIX}{group}/isr")
}

/// The stored set and its revision (0: none stored yet).
pub async fn read(store: &impl Store, group: &str) -> Result<(Option<Isr>, i64), StoreError> {
    let Some(kv) = store.get(&isr_key(group)).await? else { return Ok((None, 0)) };
    Ok((Some(kv.json()?), kv.mod_revision))
}

/// Stores `isr` if the set is still at `revision` and the group's epoch is
/// still `isr.epoch`; the new revision, or None if either moved.
pub async fn write(store: &impl Store, group: &str, isr: &Isr, revision: i64) -> Result<Option<i64>, StoreError> {
    let json = serde_json::to_string(isr).expect("an ISR serializes");
    let when = vec![
        Compare::ModRevision(isr_key(group), revision),
        Compare::Value(super::election::epoch_key(group), isr.epoch.to_string().into_bytes()),
    ];
    store.txn(when, vec![Op::put(isr_key(group), json)]).await
}

/// The leader's view of which followers are in sync on which shard.
#[derive(Debug, Clone)]
pub struct Tracker {
    leader: String,
    shards: usize,
    /// Followers' in-sync state, by shard.
    in_sync: BTreeMap<String, Vec<bool>>,
    /// The group's nodes registered now (a node whose lease ran out is out).
    registered: BTreeSet<String>,
}

impl Tracker {
    /// Starts from the stored members, taken to be in sync on every shard
    /// until a shard says otherwise.
    pub fn new(leader: &str, shards: usize, members: &BTreeSet<String>) -> Tracker {
        let in_sync = members.iter().filter(|m| *m != leader).map(|m| (m.clone(), vec![true; shards])).collect();
        Tracker { leader: leader.to_string(), shards, in_sync, registered: members.clone() }
    }

    /// A shard says whether `follower` is in sync there. A follower the
    /// tracker does not know as registered is not taken in sync: the report
    /// may be older than the registration that went (queued while the
    /// control plane waited on the store), and it would count once the node
    /// registers again, before it fetched anything.
    pub fn note(&mut self, shard: usize, follower: &str, in_sync: bool) {
        assert!(shard < self.shards, "shard {shard} of {}", self.shards);
        if in_sync && !self.registered.contains(follower) {
            return;
        }
        let states = self.in_sync.entry(follower.to_string()).or_insert_with(|| vec![false; self.shards]);
        states[shard] = in_sync;
    }

    /// The group's nodes registered now: one whose registration is gone is
    /// out, however its shards last saw it, and stays out when it registers
    /// again until every shard says it is in sync: it restarted or was cut
    /// off, and its log may lack what was committed meanwhile (a node paused
    /// past its lease came back into the set before it fetched anything,
    /// was elected, and the group lost what it had acknowledged).
    pub fn set_registered(&mut self, registered: BTreeSet<String>) {
        for (follower, states) in &mut self.in_sync {
            if !registered.contains(follower) {
                states.iter_mut().for_each(|s| *s = false);
            }
        }
        self.registered = registered;
    }

    /// True if `node` was registered when the tracker last heard.
    pub fn is_registered(&self, node: &str) -> bool {
        self.registered.contains(node)
    }

    /// The set as it should be: the leader and every registered follower in sync on all shards.
    pub fn desired(&self) -> BTreeSet<String> {
        let mut members: BTreeSet<String> = self
            .in_sync
            .iter()
            .filter(|(f, s)| self.registered.contains(*f) && s.iter().all(|in_sync| *in_sync))
            .map(|(f, _)| f.clone())
            .collect();
        members.insert(self.leader.clone());
        members
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_follower_is_in_the_set_only_while_it_is_in_sync_on_every_shard() {
        let mut t = Tracker::new("a", 2, &set(&["a", "b"]));
        assert_eq!(t.desired(), set(&["a", "b"]), "stored members start in");
        t.note(1, "b", false);
        assert_eq!(t.desired(), set(&["a"]), "behind on one shard: out");
        t.note(0, "c", true);
        t.note(1, "c", true);
        t.note(1, "b", true);
        assert_eq!(t.desired(), set(&["a", "b"]), "not registered (as far as the tracker knows): not yet");
        t.set_registered(set(&["a", "b", "c"]));
        assert_eq!(t.desired(), set(&["a", "b"]), "what it said before it registered does not count");
        t.note(0, "c", true);
        assert_eq!(t.desired(), set(&["a", "b"]), "a new follower in sync on one shard of two: not yet");
        t.note(1, "c", true);
        assert_eq!(t.desired(), set(&["a", "b", "c"]));
        t.set_registered(set(&["a", "b"]));
        assert_eq!(t.desired(), set(&["a", "b"]), "a node whose registration is gone: out");
    }

    #[test]
    fn a_node_that_registers_again_rejoins_only_once_every_shard_says_it_is_in_sync() {
        let mut t = Tracker::new("a", 2, &set(&["a", "b", "c"]));
        t.set_registered(set(&["a", "c"]));
        assert_eq!(t.desired(), set(&["a", "c"]), "b's lease ran out");
        // Reports made before its lease ran out, handled only now (the
        // control plane waited on the store): found by the simulator (seed
        // 128 with partitions), where such a report put b back in the set
        // on its next registration, lacking what was committed without it.
        t.note(0, "b", true);
        t.note(1, "b", true);
        t.set_registered(set(&["a", "b", "c"]));
        assert_eq!(t.desired(), set(&["a", "c"]), "b is back, but nothing says it holds what a committed meanwhile");
        t.note(0, "b", true);
        assert_eq!(t.desired(), set(&["a", "c"]), "in sync on one shard of two");
        t.note(1, "b", true);
        assert_eq!(t.desired(), set(&["a", "b", "c"]));
    }
}

/// How far behind each follower is, summed over the leader's shards, as
/// `ringmq cluster status` shows it (`/ringmq/broker-groups/<group>/lag`, under
/// the leader's lease, rewritten when it changes).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FollowerLag {
    pub lag_bytes: u64,
    /// Since the follower's last fetch, on its slowest shard.
    pub since_fetch_ms: u64,
}

/// The leader's latest report of every follower, by shard.
#[derive(Debug, Default)]
pub struct Lags {
    by_shard: BTreeMap<(String, usize), FollowerLag>,
    stored: BTreeMap<String, FollowerLag>,
}

impl Lags {
    pub fn note(&mut self, r: &crate::server::FollowerReport) {
        let lag = FollowerLag { lag_bytes: r.lag_bytes, since_fetch_ms: r.since_fetch.as_millis() as u64 };
        self.by_shard.insert((r.follower.clone(), r.shard), lag);
    }

    /// Each follower's lag over all shards.
    pub fn summed(&self) -> BTreeMap<String, FollowerLag> {
        let mut sums: BTreeMap<String, FollowerLag> = BTreeMap::new();
        for ((follower, _), lag) in &self.by_shard {
            let sum = sums.entry(follower.clone()).or_default();
            sum.lag_bytes += lag.lag_bytes;
            sum.since_fetch_ms = sum.since_fetch_ms.max(lag.since_fetch_ms);
        }
        sums
    }

    /// Writes the summed lags if they changed since the last write (a
    /// status, so a failed write is only logged).
    pub async fn store(&mut self, store: &impl Store, group: &str, lease: Lease) {
        let summed = self.summed();
        if summed == self.stored {
            return;
        }
        let json = serde_json::to_vec(&summed).expect("lags serialize");
        match store.put(&lag_key(group), json, Some(lease)).await {
            Ok(_) => self.stored = summed,
            Err(error) => tracing::warn!(%error, "storing the followers' lag failed"),
        }
    }
}

pub(super) fn lag_key(group: &str) -> String {
    format!("{BROKER_GROUPS_PREFIX}{group}/lag")
}

/// The stored lags of `group`'s followers (none while no leader stored any).
pub async fn read_lags(store: &impl Store, group: &str) -> Result<BTreeMap<String, FollowerLag>, StoreError> {
    store.get(&lag_key(group)).await?.map_or(Ok(BTreeMap::new()), |kv| kv.json())
}
