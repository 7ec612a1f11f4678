//! A bounded LRU of fixed-size chunks, all allocated up front, so the shard's
//! cache memory is fixed at open and recycled on eviction. The log cache
//! (64 KiB chunks of log positions) and the index page cache (4 KiB pages)
//! are two instances. It replaces the kernel page cache for reads.

use std::collections::HashMap;
use std::hash::Hash;

const NIL: usize = usize::MAX;

struct Slot<K> {
    key: Option<K>,
    data: Box<[u8]>,
    prev: usize,
    next: usize,
}

/// LRU cache of `capacity` chunks of `chunk_bytes` each.
pub(crate) struct ChunkCache<K> {
    chunk_bytes: usize,
    map: HashMap<K, usize>,
    slots: Vec<Slot<K>>,
    free: Vec<usize>,
    /// Most recently used.
    head: usize,
    /// Least recently used.
    tail: usize,
    /// Never evicted: the log's write frontier, whose chunk later rounds fill in.
    pinned: Option<K>,
    evictions: u64,
}

impl<K: Copy + Eq + Hash> ChunkCache<K> {
    /// Allocates and touches all the memory now, so RSS shows it from the start.
    pub fn new(capacity: usize, chunk_bytes: usize) -> Self {
        let slots =
            (0..capacity).map(|_| Slot { key: None, data: touched(chunk_bytes), prev: NIL, next: NIL }).collect();
        ChunkCache {
            chunk_bytes,
            map: HashMap::with_capacity(capacity),
            slots,
            free: (0..capacity).rev().collect(),
            head: NIL,
            tail: NIL,
            pinned: None,
            evictions: 0,
        }
    }

    /// Bytes per chunk.
    pub fn chunk_bytes(&self) -> usize {
        self.chunk_bytes
    }

    /// Evictions so far.
    pub fn evictions(&self) -> u64 {
        self.evictions
    }

    /// Marks the chunk that must never be evicted.
    pub fn pin(&mut self, key: Option<K>) {
        self.pinned = key;
    }

    /// The chunk's bytes, marking it most recently used.
    pub fn get(&mut self, key: K) -> Option<&[u8]> {
        let slot = *self.map.get(&key)?;
        self.touch(slot);
        Some(&self.slots[slot].data)
    }

    /// The chunk's bytes for an update in place.
    pub fn get_mut(&mut self, key: K) -> Option<&mut [u8]> {
        let slot = *self.map.get(&key)?;
        self.touch(slot);
        Some(&mut self.slots[slot].data)
    }

    /// True if the chunk is cached (does not change recency).
    pub fn contains(&self, key: K) -> bool {
        self.map.contains_key(&key)
    }

    /// A zeroed chunk for `key`, evicting the least recently used one if full.
    /// Returns None only if every chunk is pinned (capacity 1).
    pub fn insert(&mut self, key: K) -> Option<&mut [u8]> {
        let (data, fresh) = self.slot_for(key)?;
        if fresh {
            data.fill(0);
        }
        Some(data)
    }

    /// `insert` without zeroing a new chunk: it holds an evicted chunk's
    /// bytes until the caller overwrites them, so the caller must write every
    /// byte that will be read (the log's write-through fills the frontier's
    /// chunk in order, and readers never pass the written end). Zeroing took
    /// 2% of a busy shard's CPU, between one durable write and the next.
    pub fn insert_unzeroed(&mut self, key: K) -> Option<&mut [u8]> {
        self.slot_for(key).map(|(data, _)| data)
    }

    /// The chunk of `key`, made most recently used, taking a free or evicted
    /// slot if it is not cached (then true).
    fn slot_for(&mut self, key: K) -> Option<(&mut [u8], bool)> {
        if let Some(&slot) = self.map.get(&key) {
            self.touch(slot);
            return Some((&mut self.slots[slot].data, false));
        }
        let slot = match self.free.pop() {
            Some(slot) => slot,
            None => self.evict_one()?,
        };
        self.slots[slot].key = Some(key);
        self.map.insert(key, slot);
        self.push_front(slot);
        Some((&mut self.slots[slot].data, true))
    }

    /// Drops every chunk whose key matches (e.g. chunks of a deleted segment).
    pub fn remove_where(&mut self, mut doomed: impl FnMut(&K) -> bool) {
        let keys: Vec<K> = self.map.keys().filter(|k| doomed(k)).copied().collect();
        for key in keys {
            if let Some(slot) = self.map.remove(&key) {
                self.unlink(slot);
                self.slots[slot].key = None;
                self.free.push(slot);
            }
        }
    }

    fn evict_one(&mut self) -> Option<usize> {
        let mut slot = self.tail;
        while slot != NIL && self.slots[slot].key == self.pinned {
            slot = self.slots[slot].prev;
        }
        if slot == NIL {
            return None;
        }
        self.unlink(slot);
        let key = self.slots[slot].key.take().expect("linked slots have keys");
        self.map.remove(&key);
        self.evictions += 1;
        Some(slot)
    }

    fn touch(&mut self, slot: usize) {
        if self.head != slot {
            self.unlink(slot);
            self.push_front(slot);
        }
    }

    fn push_front(&mut self, slot: usize) {
        self.slots[slot].prev = NIL;
        self.slots[slot].next = self.head;
        if self.head != NIL {
            self.slots[self.head].prev = slot;
        }
        self.head = slot;
        if self.tail == NIL {
            self.tail = slot;
        }
    }

    fn unlink(&mut self, slot: usize) {
        let (prev, next) = (self.slots[slot].prev, self.slots[slot].next);
        if prev != NIL {
            self.slots[prev].next = next;
        } else {
            self.head = next;
        }
        if next != NIL {
            self.slots[next].prev = prev;
        } else {
            self.tail = prev;
        }
        self.slots[slot].prev = NIL;
        self.slots[slot].next = NIL;
    }
}

/// A zeroed buffer whose pages are resident now (calloc'd memory is not
/// until written), so the cache's memory is claimed at open, not under load.
fn touched(bytes: usize) -> Box<[u8]> {
    let mut data = vec![0u8; bytes].into_boxed_slice();
    for page in data.chunks_mut(4096) {
        // SAFETY: a valid, exclusively borrowed byte; volatile so the store is kept.
        unsafe { std::ptr::write_volatile(page.as_mut_ptr(), 0) };
    }
    data
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evicts_least_recently_used_but_never_the_pinned_chunk() {
        let mut c = ChunkCache::<u64>::new(3, 8);
        c.insert(1).unwrap()[0] = 1;
        c.insert(2).unwrap()[0] = 2;
        c.insert(3).unwrap()[0] = 3;
        c.pin(Some(1));
        assert_eq!(c.get(2).unwrap()[0], 2);
        c.insert(4).unwrap();
        assert!(c.contains(1) && c.contains(2) && !c.contains(3) && c.contains(4));
        assert_eq!(c.evictions(), 1);
        c.remove_where(|k| *k < 3);
        assert!(!c.contains(1) && !c.contains(2));
        assert_eq!(c.insert(5).unwrap()[0], 0, "recycled chunks come back zeroed");
    }
}
