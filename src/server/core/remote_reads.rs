//! Reads of a tiered queue below its local start, from tiered storage's
//! bucket: the object the shard's manifest names for the offset, its
//! footer (read by a ranged GET, checked against the manifest's CRC and its
//! own, kept for later reads), then the queue's slices from the offset on,
//! each read by a ranged GET, checked (`verify_slice`: its CRC, each
//! batch's checks, queue and offsets) and opened in clear before it is
//! kept or served. Damage is counted, logged and answered as an error to
//! that read, never served. A failed GET is an error to that read only,
//! which the client retries.
//!
//! Slices read are kept in a cache of their own, bounded by the shard's
//! share of `tiered_read_cache_bytes` and apart from the shard's log
//! cache, so a consumer catching up from the bucket does not evict the hot
//! tail. After each read the queue's next slice is fetched ahead, one at a
//! time per shard, so a sequential reader finds it there.

use super::manifest::{place_of, Manifest, ObjectEntry};
use super::metrics::{Probe, Samples};
use super::objects::ObjectLink;
use super::Core;
use ringmq_shards::batch::{self, BatchHeader};
use ringmq_shards::tiered::{verify_slice, ObjectIndex, Slice};
use ringmq_shards::{QueueId, ReadBatches, Shard, StorageError};
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;
use std::ops::Range;
use std::rc::Rc;

/// Footers kept (each a few KiB to a few hundred).
const FOOTERS_MAX: usize = 256;

/// What a read needs of the shard: the bucket, the shard's place in it,
/// its storage (to open sealed batches); cheap to clone.
#[derive(Clone)]
struct Bucket {
    link: ObjectLink,
    place: String,
    storage: Shard,
}

impl Bucket {
    /// The bucket of `core`'s shard and its manifest, if it has both.
    fn of(core: &Core) -> Option<(Bucket, Rc<Manifest>)> {
        let (link, manifest) = (core.objects()?, core.manifest().current()?);
        Some((Bucket { link: link.clone(), place: place_of(core), storage: core.storage().clone() }, manifest))
    }
}

/// A slice in clear is kept by its object's key and its place in it.
type SliceKey = (String, u64);

/// A shard's reads from the bucket.
pub struct RemoteReads {
    footers: RefCell<Lru<String, Rc<ObjectIndex>>>,
    slices: RefCell<Lru<SliceKey, Rc<Vec<u8>>>>,
    /// A slice is being fetched ahead.
    ahead: Cell<bool>,
    stats: RemoteStats,
}

#[derive(Default)]
struct RemoteStats {
    reads: Cell<u64>,
    fetched_bytes: Cell<u64>,
    cache_hits: Cell<u64>,
    failures: Cell<u64>,
    corrupt: Cell<u64>,
}

impl Probe for RemoteReads {
    fn collect(&self, out: &mut Samples) {
        let s = &self.stats;
        let help = "Reads of tiered queues served from the bucket (below the local start).";
        out.counter("ringmq_tiered_remote_reads", help, &[], s.reads.get());
        let help = "Bytes of slices fetched from the bucket (read-ahead included).";
        out.counter("ringmq_tiered_remote_fetched_bytes", help, &[], s.fetched_bytes.get());
        let help = "Slices a remote read found in the remote-read cache.";
        out.counter("ringmq_tiered_remote_cache_hits", help, &[], s.cache_hits.get());
        let help = "Remote reads that failed (the bucket, or damage): each answered with a retriable error.";
        out.counter("ringmq_tiered_remote_read_failures", help, &[], s.failures.get());
        let help = "Objects found damaged on read (a footer or slice failing its check): never served.";
        out.counter("ringmq_tiered_remote_corrupt", help, &[], s.corrupt.get());
        let help = "Bytes held by the remote-read cache.";
        out.gauge("ringmq_tiered_remote_cache_bytes", help, &[], self.slices.borrow().bytes as f64);
    }
}

impl RemoteReads {
    /// Reads for a shard whose share of the remote-read cache is `cache_bytes`.
    pub fn new(cache_bytes: usize) -> RemoteReads {
        RemoteReads {
            footers: RefCell::new(Lru::new(FOOTERS_MAX)),
            slices: RefCell::new(Lru::new(cache_bytes)),
            ahead: Cell::new(false),
            stats: RemoteStats::default(),
        }
    }

    /// Reads `queue` from `offset` (below its local start) up to
    /// `max_bytes` (at least one batch) from the bucket; None when the
    /// manifest holds no object with that offset.
    pub async fn read(
        self: &Rc<Self>,
        core: &Core,
        queue: QueueId,
        offset: u64,
        max_bytes: usize,
    ) -> Result<Option<ReadBatches>, StorageError> {
        let Some((bucket, manifest)) = Bucket::of(core) else { return Ok(None) };
        let Some(object) = manifest.object_holding(queue.0, offset) else { return Ok(None) };
        let read = self.read_object(&bucket, object, queue, offset, max_bytes).await;
        if read.is_err() {
            self.stats.failures.set(self.stats.failures.get() + 1);
        }
        let (bytes, next_offset, index, last) = read?;
        if bytes.is_empty() {
            return Ok(None);
        }
        self.stats.reads.set(self.stats.reads.get() + 1);
        if let Some(last) = last {
            self.read_ahead(bucket, &manifest, object, &index, queue, last);
        }
        let end_offset = core.storage().offsets(queue)?.1;
        Ok(Some(ReadBatches { bytes, next_offset, end_offset }))
    }

    /// The (queue, offset) of records in the bucket whose key or message id
    /// has lookup `hash`, from the footers of the objects that hold offsets
    /// below their queue's local start (the local index has the rest).
    pub async fn lookup(&self, core: &Core, hash: u64) -> Result<Vec<(QueueId, u64)>, StorageError> {
        let Some((bucket, manifest)) = Bucket::of(core) else { return Ok(Vec::new()) };
        let below_local = |queue: u32, first: u64| core.storage().log_start(QueueId(queue)).is_ok_and(|s| first < s);
        let mut found = Vec::new();
        for object in manifest.objects() {
            let Some((&queue, _)) = object.queues.iter().find(|(&q, &(first, _))| below_local(q, first)) else {
                continue;
            };
            let index = self.footer(&bucket, object, QueueId(queue)).await?;
            for &queue in object.queues.keys() {
                found.extend(index.lookup(hash, queue).into_iter().map(|offset| (QueueId(queue), offset)));
            }
        }
        Ok(found)
    }

    /// The batches of `queue` from `offset` in `object`, the next offset,
    /// the object's footer and the last slice read.
    async fn read_object(
        &self,
        bucket: &Bucket,
        object: &ObjectEntry,
        queue: QueueId,
        offset: u64,
        max_bytes: usize,
    ) -> Result<(Vec<u8>, u64, Rc<ObjectIndex>, Option<Slice>), StorageError> {
        let index = self.footer(bucket, object, queue).await?;
        let (mut out, mut next, mut last) = (Vec::new(), offset, None);
        'slices: for slice in index.slices_from(queue.0, offset) {
            let clear = self.slice(bucket, object, slice).await?;
            last = Some(*slice);
            for stored in batch::split(&clear) {
                let header = BatchHeader::decode(stored).expect("a verified slice's batch");
                if header.next_offset() <= next {
                    continue;
                }
                if !out.is_empty() && out.len() + stored.len() > max_bytes {
                    break 'slices;
                }
                out.extend_from_slice(stored);
                next = header.next_offset();
            }
            if out.len() >= max_bytes {
                break;
            }
        }
        Ok((out, next, index, last))
    }

    /// The footer of `object`, from the cache or the bucket.
    async fn footer(
        &self,
        bucket: &Bucket,
        object: &ObjectEntry,
        queue: QueueId,
    ) -> Result<Rc<ObjectIndex>, StorageError> {
        if let Some(index) = self.footers.borrow_mut().get(&object.key) {
            return Ok(index);
        }
        let range = object.footer_pos..object.footer_pos + u64::from(object.footer_len);
        let bytes = self.get(bucket, object, range).await?;
        let named = bytes.len() >= 4 && batch::u32_at(&bytes, bytes.len() - 4) == object.footer_crc;
        let index = ObjectIndex::decode(&bytes)
            .and_then(|index| {
                let other = || StorageError::Corruption {
                    what: "tiered object footer",
                    position: object.footer_pos,
                    detail: "not the footer the manifest names (its CRC differs)".into(),
                };
                named.then_some(index).ok_or_else(other)
            })
            .map_err(|e| self.damaged(object, queue, object.queues.get(&queue.0).copied().unwrap_or_default(), e))?;
        let index = Rc::new(index);
        self.footers.borrow_mut().insert(object.key.clone(), index.clone(), 1);
        Ok(index)
    }

    /// `slice` of `object` in clear, from the cache or the bucket (checked).
    async fn slice(&self, bucket: &Bucket, object: &ObjectEntry, slice: &Slice) -> Result<Rc<Vec<u8>>, StorageError> {
        let key = (object.key.clone(), slice.pos);
        if let Some(clear) = self.slices.borrow_mut().get(&key) {
            self.stats.cache_hits.set(self.stats.cache_hits.get() + 1);
            return Ok(clear);
        }
        let bytes = self.get(bucket, object, slice.pos..slice.pos + u64::from(slice.len)).await?;
        let range = (slice.first, slice.next);
        verify_slice(&bytes, slice).map_err(|e| self.damaged(object, QueueId(slice.queue), range, e))?;
        let clear = Rc::new(bucket.storage.open_batches(&bytes)?);
        self.slices.borrow_mut().insert(key, clear.clone(), clear.len());
        Ok(clear)
    }

    /// A ranged GET of `object`.
    async fn get(&self, bucket: &Bucket, object: &ObjectEntry, range: Range<u64>) -> Result<Vec<u8>, StorageError> {
        let key = format!("{}{}", bucket.place, object.key);
        let bytes = bucket
            .link
            .call(move |store| async move { store.get(&key, Some(range)).await })
            .await
            .map_err(|e| StorageError::Remote(e.to_string()))?;
        self.stats.fetched_bytes.set(self.stats.fetched_bytes.get() + bytes.len() as u64);
        Ok(bytes.to_vec())
    }

    /// Counts and logs damage found in `object`; the error to answer: the
    /// offsets of `queue` in `range` are damaged (a client reads on past them).
    fn damaged(&self, object: &ObjectEntry, queue: QueueId, range: (u64, u64), error: StorageError) -> StorageError {
        self.stats.corrupt.set(self.stats.corrupt.get() + 1);
        tracing::error!(key = %object.key, queue = queue.0, ?range, %error, "a tiered object is damaged: not served");
        StorageError::CorruptBatch {
            queue: queue.0,
            position: object.segment,
            first_offset: range.0,
            next_offset: range.1,
            detail: "a tiered object in the bucket fails its check",
        }
    }

    /// Fetches the slice of `queue` after `last` into the cache, in the
    /// background (one at a time per shard): in `object`, else in the next
    /// object that holds the queue.
    fn read_ahead(
        self: &Rc<Self>,
        bucket: Bucket,
        manifest: &Manifest,
        object: &ObjectEntry,
        index: &ObjectIndex,
        queue: QueueId,
        last: Slice,
    ) {
        if self.ahead.get() {
            return;
        }
        // The queue's next slice here, else its first in the next object that holds it.
        let (object, slice) = match index.slices_from(queue.0, last.next).find(|s| s.pos > last.pos) {
            Some(slice) => (object.clone(), Some(*slice)),
            None => {
                let mut later = manifest.objects().iter().skip_while(|o| o.key != object.key).skip(1);
                match later.find(|o| o.queues.contains_key(&queue.0)) {
                    Some(next) => (next.clone(), None),
                    None => return,
                }
            }
        };
        self.ahead.set(true);
        let this = self.clone();
        glommio::spawn_local(async move {
            let fetched = match slice {
                Some(slice) => this.slice(&bucket, &object, &slice).await.map(drop),
                None => this.first_slice(&bucket, &object, queue).await,
            };
            if let Err(error) = fetched {
                tracing::debug!(%error, "a read-ahead from the bucket failed; the read itself will retry");
            }
            this.ahead.set(false);
        })
        .detach();
    }

    /// Fetches `queue`'s first slice in `object` into the cache.
    async fn first_slice(&self, bucket: &Bucket, object: &ObjectEntry, queue: QueueId) -> Result<(), StorageError> {
        let index = self.footer(bucket, object, queue).await?;
        let first = index.slices_from(queue.0, 0).next().copied();
        match first {
            Some(slice) => self.slice(bucket, object, &slice).await.map(drop),
            None => Ok(()),
        }
    }
}

/// A least-recently-used map bounded by the sizes given with its values.
struct Lru<K, V> {
    entries: HashMap<K, (V, usize, u64)>,
    /// Keys by last use.
    order: BTreeMap<u64, K>,
    tick: u64,
    bytes: usize,
    max: usize,
}

impl<K: Hash + Eq + Clone, V: Clone> Lru<K, V> {
    fn new(max: usize) -> Lru<K, V> {
        Lru { entries: HashMap::new(), order: BTreeMap::new(), tick: 0, bytes: 0, max }
    }

    fn get(&mut self, key: &K) -> Option<V> {
        let entry = self.entries.get_mut(key)?;
        self.order.remove(&entry.2);
        self.tick += 1;
        entry.2 = self.tick;
        self.order.insert(self.tick, key.clone());
        Some(entry.0.clone())
    }

    /// Keeps `value` (unless larger than the whole bound), evicting the
    /// least recently used until it fits.
    fn insert(&mut self, key: K, value: V, size: usize) {
        if size > self.max {
            return;
        }
        self.remove(&key);
        while self.bytes + size > self.max {
            let (_, oldest) = self.order.pop_first().expect("entries while over the bound");
            let (_, evicted, _) = self.entries.remove(&oldest).expect("ordered keys are held");
            self.bytes -= evicted;
        }
        self.tick += 1;
        self.order.insert(self.tick, key.clone());
        self.entries.insert(key, (value, size, self.tick));
        self.bytes += size;
    }

    fn remove(&mut self, key: &K) {
        if let Some((_, size, tick)) = self.entries.remove(key) {
            self.order.remove(&tick);
            self.bytes -= size;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_least_recently_used_go_first_and_the_bound_holds() {
        let mut lru = Lru::new(10);
        lru.insert("a", 1, 4);
        lru.insert("b", 2, 4);
        assert_eq!(lru.get(&"a"), Some(1));
        lru.insert("c", 3, 4);
        assert_eq!((lru.get(&"a"), lru.get(&"b"), lru.get(&"c")), (Some(1), None, Some(3)));
        lru.insert("huge", 4, 11);
        assert_eq!(lru.get(&"huge"), None, "larger than the bound: not kept");
        lru.insert("a", 5, 6);
        assert_eq!((lru.get(&"a"), lru.get(&"c"), lru.bytes), (Some(5), Some(3), 10));
    }
}
