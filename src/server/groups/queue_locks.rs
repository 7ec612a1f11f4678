//! Queue locks for ordered consumption (RocketMQ's lockBatchMQ), kept by
//! the group's coordinator: a queue is processed by one holder at a time,
//! and a lock is a lease, so a crashed holder loses it when the lease ends.
//! Holders renew well within the lease; a rebalance that moves a queue
//! leaves it locked until its former holder unlocks it or the lease ends.

use std::collections::HashMap;

type Key = (String, String, u32);

struct Lease {
    holder: String,
    expires_ms: u64,
}

/// Every queue lock this shard keeps.
#[derive(Default)]
pub struct QueueLocks {
    locks: HashMap<Key, Lease>,
}

impl QueueLocks {
    /// Takes or renews the lock of `group`'s `topic`/`queue` for `holder`
    /// until `now_ms + lease_ms`; false while another holder's lease runs.
    pub fn lock(&mut self, group: &str, holder: &str, topic: &str, queue: u32, lease_ms: u64, now_ms: u64) -> bool {
        let key = (group.to_string(), topic.to_string(), queue);
        match self.locks.get(&key) {
            Some(l) if l.holder != holder && l.expires_ms > now_ms => false,
            _ => {
                self.locks.insert(key, Lease { holder: holder.to_string(), expires_ms: now_ms + lease_ms });
                true
            }
        }
    }

    /// Releases the lock if `holder` has it.
    pub fn unlock(&mut self, group: &str, holder: &str, topic: &str, queue: u32) {
        let key = (group.to_string(), topic.to_string(), queue);
        if self.locks.get(&key).is_some_and(|l| l.holder == holder) {
            self.locks.remove(&key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_holder_at_a_time_until_its_lease_ends_or_it_unlocks() {
        let mut l = QueueLocks::default();
        assert!(l.lock("g", "a", "t", 0, 1_000, 0));
        assert!(!l.lock("g", "b", "t", 0, 1_000, 500), "a's lease runs");
        assert!(l.lock("g", "b", "t", 1, 1_000, 500), "another queue is free");
        assert!(l.lock("g", "a", "t", 0, 1_000, 900), "a renews");
        assert!(!l.lock("g", "b", "t", 0, 1_000, 1_500), "the renewal moved the lease to 1,900");
        assert!(l.lock("g", "b", "t", 0, 1_000, 1_901), "a crashed: its lease ended");
        assert!(!l.lock("g", "a", "t", 0, 1_000, 1_902), "a lost it");
        l.unlock("g", "a", "t", 0);
        assert!(!l.lock("g", "a", "t", 0, 1_000, 1_903), "only the holder unlocks");
        l.unlock("g", "b", "t", 0);
        assert!(l.lock("g", "a", "t", 0, 1_000, 1_904));
        assert!(l.lock("other", "b", "t", 0, 1_000, 1_904), "groups lock separately");
    }
}
