//! Client quotas: produce and fetch bytes per second and requests per
//! second, per user and per client id, as Kafka's. An entry names a user
//! (or every user) and a client id (or every client); a connection takes
//! the most specific entry that matches it: user and client, then user,
//! then every user with its client, then every user. A quota named for a
//! user is shared by all its clients; one for every user gives each user its
//! own. Stored as JSON in `DATA_DIR/quotas`, replaced whole on each change.

use super::AccountsError;
pub use ringmq_protocol::quota::*;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The file under the data directory.
pub const FILE: &str = "quotas";
/// Most entries a broker keeps.
pub const ENTRIES_MAX: usize = 10_000;

/// Every entry.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Quotas {
    entries: Vec<Entry>,
}

/// The entry a connection falls under, and the key of the buckets it draws on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    pub limits: Limits,
    /// (user, client id) of the bucket: the entry's names, with the
    /// connection's own user where the entry is for every user.
    pub bucket: BucketKey,
}

impl Quotas {
    /// Loads `DATA_DIR/quotas`, or none if there is none.
    pub fn load(data_dir: &Path) -> Result<Quotas, AccountsError> {
        super::json_file::load(data_dir, FILE)
    }

    /// Stores them durably (a blocking call).
    pub fn store(&self, data_dir: &Path) -> std::io::Result<()> {
        super::json_file::store(self, data_dir, FILE)
    }

    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// With `entity`'s limits set (all None: its entry removed).
    pub fn with(&self, entity: Entity, limits: Limits) -> Result<Quotas, AccountsError> {
        if [limits.produce_bytes_per_sec, limits.fetch_bytes_per_sec, limits.requests_per_sec].contains(&Some(0)) {
            return Err(AccountsError::ZeroQuota);
        }
        let mut entries: Vec<Entry> = self.entries.iter().filter(|e| e.entity != entity).cloned().collect();
        if limits != Limits::default() {
            entries.push(Entry { entity, limits });
        }
        if entries.len() > ENTRIES_MAX {
            return Err(AccountsError::TooManyQuotas(entries.len()));
        }
        entries.sort_by(|a, b| a.entity.cmp(&b.entity));
        Ok(Quotas { entries })
    }

    /// The most specific entry for this user and client id, if any.
    pub fn applied(&self, user: &str, client_id: &str) -> Option<Applied> {
        let find = |u: Option<&str>, c: Option<&str>| {
            self.entries.iter().find(|e| e.entity.user.as_deref() == u && e.entity.client_id.as_deref() == c)
        };
        let order = [(Some(user), Some(client_id)), (Some(user), None), (None, Some(client_id)), (None, None)];
        order.into_iter().find_map(|(u, c)| {
            let entry = find(u, c)?;
            Some(Applied { limits: entry.limits, bucket: (user.to_string(), c.map(str::to_string)) })
        })
    }
}

/// What a bucket meters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Meter {
    ProduceBytes,
    FetchBytes,
    Requests,
}

/// A bucket holds at most this long's worth of its rate: a client idle for
/// a while may send a burst of that much at once.
const BURST: Duration = Duration::from_millis(100);
/// Most buckets kept; past it, those full and idle for `IDLE` are dropped.
const BUCKETS_MAX: usize = 100_000;
const IDLE: Duration = Duration::from_secs(60);

struct Bucket {
    /// May go below zero: a debit larger than what is left is a debt the
    /// client waits off.
    tokens: f64,
    at: Instant,
}

/// Whose bucket: a user and a client id (None: all the user's clients).
pub type BucketKey = (String, Option<String>);

/// Token buckets, by (user, client id, meter), shared by a node's shards.
/// Only connections under a quota touch them.
#[derive(Default)]
pub struct Buckets {
    buckets: Mutex<HashMap<(BucketKey, Meter), Bucket>>,
}

impl Buckets {
    /// Takes `amount` from the bucket refilled at `rate` per second; how long
    /// until it is out of debt again (zero: within the quota).
    pub fn take(&self, key: &BucketKey, meter: Meter, rate: u64, amount: u64) -> Duration {
        let now = Instant::now();
        let rate = rate.max(1) as f64;
        let capacity = rate * BURST.as_secs_f64();
        let mut buckets = self.buckets.lock().expect("quota buckets lock");
        if buckets.len() >= BUCKETS_MAX {
            buckets.retain(|_, b| now.duration_since(b.at) < IDLE);
        }
        let bucket = buckets.entry((key.clone(), meter)).or_insert(Bucket { tokens: capacity, at: now });
        let refilled = bucket.tokens + rate * now.duration_since(bucket.at).as_secs_f64();
        bucket.tokens = refilled.min(capacity) - amount as f64;
        bucket.at = now;
        if bucket.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-bucket.tokens / rate)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entity(user: Option<&str>, client: Option<&str>) -> Entity {
        Entity { user: user.map(str::to_string), client_id: client.map(str::to_string) }
    }

    fn produce(n: u64) -> Limits {
        Limits { produce_bytes_per_sec: Some(n), ..Limits::default() }
    }

    #[test]
    fn the_most_specific_entry_applies_and_removing_all_limits_removes_the_entry() {
        let q = Quotas::default()
            .with(entity(None, None), produce(1))
            .unwrap()
            .with(entity(Some("alice"), None), produce(2))
            .unwrap()
            .with(entity(Some("alice"), Some("etl")), produce(3))
            .unwrap()
            .with(entity(None, Some("etl")), produce(4))
            .unwrap();
        let limit = |u, c| q.applied(u, c).unwrap().limits.produce_bytes_per_sec.unwrap();
        assert_eq!(
            (limit("alice", "etl"), limit("alice", "web"), limit("bob", "etl"), limit("bob", "web")),
            (3, 2, 4, 1)
        );
        assert_eq!(q.applied("bob", "web").unwrap().bucket, ("bob".to_string(), None), "each user its own bucket");
        let q = q.with(entity(None, None), Limits::default()).unwrap();
        assert!(q.applied("bob", "web").is_none());
        assert!(Quotas::default().with(entity(None, None), produce(0)).is_err());
    }

    #[test]
    fn a_bucket_lets_a_burst_through_then_charges_the_debt_at_its_rate() {
        let buckets = Buckets::default();
        let key = ("alice".to_string(), None);
        // 1000/s holds 100 (a tenth of a second's worth).
        assert_eq!(buckets.take(&key, Meter::ProduceBytes, 1000, 100), Duration::ZERO);
        let wait = buckets.take(&key, Meter::ProduceBytes, 1000, 500);
        assert!(wait > Duration::from_millis(450) && wait <= Duration::from_millis(500), "{wait:?}");
        assert_eq!(buckets.take(&key, Meter::FetchBytes, 1000, 100), Duration::ZERO, "each meter its own bucket");
    }
}
