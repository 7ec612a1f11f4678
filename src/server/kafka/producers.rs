//! Kafka's idempotent producers: InitProducerId hands out producer ids, and
//! each partition's owner checks every batch's sequence against the
//! producer's last ones there. A batch seen before (a retry) is answered
//! with the offset it was stored at and not stored again; one that skips
//! ahead is refused as out of order; one from an older epoch is fenced.
//!
//! The state is in memory, per shard, for at most `capacity` (producer,
//! partition) pairs, least recently used evicted. A producer this shard does
//! not know (new here, evicted, or from before a restart or a change of
//! leader) starts afresh at whatever sequence it sends. Its retries are
//! still not stored twice: a batch's records carry ids made from its
//! producer fields (`Sequence::message_id`), and the shard's window of recent
//! batches, which followers mirror and a restart keeps, answers a batch it
//! holds with where it was stored.

use crate::server::core::service::Stored;
use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};

/// Batches remembered per producer and partition: Kafka's in-flight limit
/// for idempotent producers.
const REMEMBERED: usize = 5;

/// A batch's producer fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sequence {
    pub producer_id: i64,
    pub epoch: i16,
    pub first: i32,
    pub count: i32,
}

impl Sequence {
    /// The message id of the batch's record `i` in `partition`: producer id,
    /// epoch, partition (its low 16 bits) and the record's sequence, the same
    /// in every retry. One producer's ids repeat only across topics (a
    /// lookup by id finds each), and the shard's window keys a batch by its
    /// queue too.
    pub fn message_id(&self, partition: u32, i: i32) -> [u8; 16] {
        let mut id = [0u8; 16];
        id[0..8].copy_from_slice(&self.producer_id.to_be_bytes());
        id[8..10].copy_from_slice(&self.epoch.to_be_bytes());
        id[10..12].copy_from_slice(&(partition as u16).to_be_bytes());
        id[12..16].copy_from_slice(&self.first.wrapping_add(i).to_be_bytes());
        id
    }
}

/// What to do with a batch.
#[derive(Debug, PartialEq, Eq)]
pub enum Check {
    /// Store it, then `stored` (or `failed`) it.
    Store,
    /// A retry of a stored batch: answer where (and when, under
    /// LogAppendTime) it was stored.
    Duplicate(Stored),
    /// A retry of a batch still being stored: the client should retry it.
    Pending,
    OutOfOrder {
        expected: i32,
    },
    Fenced {
        current: i16,
    },
}

#[derive(Default)]
struct Partition {
    epoch: i16,
    /// The last batches, oldest first: (first sequence, count, where stored; None while being stored).
    batches: VecDeque<(i32, i32, Option<Stored>)>,
    used: u64,
}

pub struct Producers {
    shard: u8,
    next_id: Cell<i64>,
    capacity: usize,
    clock: Cell<u64>,
    partitions: RefCell<HashMap<(i64, String, u32), Partition>>,
}

impl Producers {
    pub fn new(shard: usize, capacity: usize) -> Producers {
        Producers {
            shard: shard as u8,
            next_id: Cell::new(0),
            capacity: capacity.max(1),
            clock: Cell::new(0),
            partitions: RefCell::default(),
        }
    }

    /// A producer id no other shard or earlier run handed out: the clock in
    /// the high bits, the shard in the low 8, and increasing on this shard.
    pub fn new_id(&self, now_ms: u64) -> i64 {
        let from_clock = ((now_ms as i64) << 16) | i64::from(self.shard);
        let id = from_clock.max(self.next_id.get());
        self.next_id.set(id + 256);
        id
    }

    pub fn check(&self, topic: &str, queue: u32, s: Sequence) -> Check {
        let mut partitions = self.partitions.borrow_mut();
        let key = (s.producer_id, topic.to_string(), queue);
        let tick = self.clock.get() + 1;
        self.clock.set(tick);
        let known = partitions.contains_key(&key);
        let p = partitions.entry(key).or_default();
        p.used = tick;
        if known && s.epoch < p.epoch {
            return Check::Fenced { current: p.epoch };
        }
        if !known || s.epoch > p.epoch {
            *p = Partition { epoch: s.epoch, batches: VecDeque::new(), used: tick };
        }
        if let Some(&(_, _, stored)) = p.batches.iter().find(|(first, count, _)| (*first, *count) == (s.first, s.count))
        {
            return stored.map_or(Check::Pending, Check::Duplicate);
        }
        if let Some(&(first, count, _)) = p.batches.back() {
            let expected = first.wrapping_add(count);
            if s.first != expected {
                return Check::OutOfOrder { expected };
            }
        }
        p.batches.push_back((s.first, s.count, None));
        if p.batches.len() > REMEMBERED {
            p.batches.pop_front();
        }
        drop(partitions);
        self.evict();
        Check::Store
    }

    /// The batch `check` let through was stored as `stored` says.
    pub fn stored(&self, topic: &str, queue: u32, s: Sequence, stored: Stored) {
        let mut partitions = self.partitions.borrow_mut();
        let Some(p) = partitions.get_mut(&(s.producer_id, topic.to_string(), queue)) else { return };
        if let Some(b) = p.batches.iter_mut().find(|(first, count, _)| (*first, *count) == (s.first, s.count)) {
            // A retry's answer: no records of its own.
            b.2 = Some(Stored { count: 0, ..stored });
        }
    }

    /// The batch `check` let through was not stored: forget it, so its retry is stored.
    pub fn failed(&self, topic: &str, queue: u32, s: Sequence) {
        let mut partitions = self.partitions.borrow_mut();
        if let Some(p) = partitions.get_mut(&(s.producer_id, topic.to_string(), queue)) {
            p.batches.retain(|(first, count, stored)| !((*first, *count) == (s.first, s.count) && stored.is_none()));
        }
    }

    /// The producers this shard knows in a partition: (producer id, epoch,
    /// last sequence stored).
    pub fn on(&self, topic: &str, queue: u32) -> Vec<(i64, i16, i32)> {
        let partitions = self.partitions.borrow();
        let mine = partitions.iter().filter(|((_, t, q), _)| t == topic && *q == queue);
        let last = |p: &Partition| p.batches.back().map_or(-1, |(first, count, _)| first.wrapping_add(*count) - 1);
        mine.map(|((producer, _, _), p)| (*producer, p.epoch, last(p))).collect()
    }

    /// Past capacity, drops the least recently used eighth.
    fn evict(&self) {
        let mut partitions = self.partitions.borrow_mut();
        if partitions.len() <= self.capacity {
            return;
        }
        let cut = (partitions.len() - self.capacity).max(self.capacity / 8).min(partitions.len());
        let mut used: Vec<u64> = partitions.values().map(|p| p.used).collect();
        let (_, &mut line, _) = used.select_nth_unstable(cut - 1);
        partitions.retain(|_, p| p.used > line);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seq(first: i32, epoch: i16) -> Sequence {
        Sequence { producer_id: 7, epoch, first, count: 10 }
    }

    #[test]
    fn retries_are_answered_with_their_offset_and_gaps_and_old_epochs_refused() {
        let p = Producers::new(0, 100);
        assert_eq!(p.check("t", 0, seq(40, 0)), Check::Store, "an unknown producer starts anywhere");
        assert_eq!(p.check("t", 0, seq(40, 0)), Check::Pending);
        p.stored("t", 0, seq(40, 0), Stored { base: 1000, count: 10, log_append_time: Some(77) });
        let first = Stored { base: 1000, count: 0, log_append_time: Some(77) };
        assert_eq!(p.check("t", 0, seq(40, 0)), Check::Duplicate(first), "where and when the batch was stored");
        assert_eq!(p.check("t", 0, seq(60, 0)), Check::OutOfOrder { expected: 50 });
        assert_eq!(p.check("t", 0, seq(50, 0)), Check::Store);
        p.failed("t", 0, seq(50, 0));
        assert_eq!(p.check("t", 0, seq(50, 0)), Check::Store, "a batch that failed to store is stored on retry");
        assert_eq!(p.check("t", 1, seq(0, 0)), Check::Store, "each partition has its own sequence");
        assert_eq!(p.check("t", 0, seq(0, 1)), Check::Store, "a new epoch starts afresh");
        assert_eq!(p.check("t", 0, seq(60, 0)), Check::Fenced { current: 1 });
    }

    #[test]
    fn ids_are_unique_per_shard_and_increase() {
        let (a, b) = (Producers::new(0, 1), Producers::new(1, 1));
        let ids = [a.new_id(5), a.new_id(5), b.new_id(5), a.new_id(4)];
        assert!(ids[0] < ids[1] && ids[1] < ids[3]);
        assert_ne!(ids[0], ids[2]);
    }

    #[test]
    fn the_least_recently_used_pairs_are_evicted_past_capacity() {
        let p = Producers::new(0, 8);
        for q in 0..20 {
            p.check("t", q, seq(0, 0));
        }
        assert!(p.partitions.borrow().len() <= 8);
        assert!(p.partitions.borrow().contains_key(&(7, "t".to_string(), 19)));
    }
}
