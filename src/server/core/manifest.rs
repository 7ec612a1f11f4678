//! Tiered storage's manifest of one shard: which objects of the bucket hold
//! which of its queues' offsets. Each upload adds an object and stores the
//! next generation of the manifest as a new key, `manifest/` then the
//! leader epoch and the generation, zero-padded, so that the newest is the
//! last key listed: a deposed leader that uploads late writes under its
//! older epoch and is never read. A queue's objects cover its offsets in
//! order without overlap (each upload takes a queue's batches from where
//! the manifest says it is uploaded to), so nothing is listed twice.
//!
//! The JSON is checked on read: a version, and a CRC32 of the objects as
//! stored, so a torn or edited manifest is refused, not believed.

use glommio::sync::{Permit, Semaphore};
use serde::{Deserialize, Serialize};
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

/// The manifest format's version.
const VERSION: u32 = 1;

/// One uploaded object: a sealed segment's batches of the tiered queues.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectEntry {
    /// Its key, under the shard's place in the bucket.
    pub key: String,
    /// The log position of the segment it came from.
    pub segment: u64,
    /// Its length, footer and trailer included.
    pub bytes: u64,
    /// Where its footer lies, its length, and its CRC32 (the footer's own,
    /// at its end), to check the footer read back against.
    pub footer_pos: u64,
    pub footer_len: u32,
    pub footer_crc: u32,
    /// Each queue's offsets in it: (first, next), by storage id.
    pub queues: BTreeMap<u32, (u64, u64)>,
    /// The data keys that sealed any of its batches.
    pub key_ids: Vec<u32>,
    /// Each queue's newest record timestamp in it (ms), for time retention.
    #[serde(default)]
    pub newest_ms: BTreeMap<u32, i64>,
    /// Each queue's bytes in it, for size retention.
    #[serde(default)]
    pub queue_bytes: BTreeMap<u32, u64>,
}

/// What is stored: the objects, the queues' starts and their CRC.
#[derive(Serialize, Deserialize)]
struct Stored {
    version: u32,
    epoch: u64,
    generation: u64,
    objects: Vec<ObjectEntry>,
    #[serde(default)]
    starts: BTreeMap<u32, u64>,
    crc: u32,
}

/// A generation of a shard's manifest.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Manifest {
    epoch: u64,
    generation: u64,
    /// In upload order.
    objects: Vec<ObjectEntry>,
    /// Where readers of a queue start in the bucket, once total retention
    /// moved it (absent: its first object's first offset).
    starts: BTreeMap<u32, u64>,
}

/// Why a stored manifest was not taken.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    #[error("manifest {key}: not a manifest: {detail}")]
    Malformed { key: String, detail: String },
    #[error("manifest {key}: version {found}, this broker reads version {VERSION}")]
    Version { key: String, found: u32 },
    #[error(
        "manifest {key}: its objects and starts do not match their CRC (stored {stored:08x}, computed {computed:08x})"
    )]
    Crc { key: String, stored: u32, computed: u32 },
    #[error("manifest {key}: generation {generation} under key generation {named}")]
    Misnamed { key: String, generation: u64, named: u64 },
}

impl Manifest {
    /// The generation (0: nothing uploaded).
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The leader epoch that stored it.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    pub fn objects(&self) -> &[ObjectEntry] {
        &self.objects
    }

    /// The offset `queue` is uploaded to (0: none of it is); past its
    /// start, whose records retention removed.
    pub fn uploaded_next(&self, queue: u32) -> u64 {
        let next = self.objects.iter().filter_map(|o| o.queues.get(&queue)).map(|r| r.1).max().unwrap_or(0);
        next.max(self.start(queue))
    }

    /// Where total retention moved `queue`'s start in the bucket (0: it did not).
    pub fn start(&self, queue: u32) -> u64 {
        self.starts.get(&queue).copied().unwrap_or(0)
    }

    /// The next generation, stored by `epoch`, with the queues' starts moved
    /// to `starts` (never back: a start already past one stays) and the
    /// objects no queue reads any more left out; those objects, to delete
    /// once it is stored.
    pub fn with_starts(&self, epoch: u64, starts: &BTreeMap<u32, u64>) -> (Manifest, Vec<ObjectEntry>) {
        assert!(epoch >= self.epoch, "a manifest of epoch {} taken on by epoch {epoch}", self.epoch);
        let mut next = Manifest { epoch, generation: self.generation + 1, ..self.clone() };
        for (&queue, &start) in starts {
            next.starts.insert(queue, start.max(self.start(queue)));
        }
        let read = |o: &ObjectEntry| o.queues.iter().any(|(q, r)| r.1 > next.starts.get(q).copied().unwrap_or(0));
        let (kept, gone) = next.objects.iter().cloned().partition(read);
        next.objects = kept;
        (next, gone)
    }

    /// The next generation, stored by `epoch`, without `queues` (their
    /// topics deleted, or moved to another broker group): their starts and
    /// their ranges in the objects dropped, and the objects no other queue
    /// reads left out; those objects, to delete once it is stored.
    pub fn without_queues(&self, epoch: u64, queues: &BTreeSet<u32>) -> (Manifest, Vec<ObjectEntry>) {
        assert!(epoch >= self.epoch, "a manifest of epoch {} taken on by epoch {epoch}", self.epoch);
        let mut next = Manifest { epoch, generation: self.generation + 1, ..self.clone() };
        next.starts.retain(|queue, _| !queues.contains(queue));
        let mut gone = Vec::new();
        next.objects.retain_mut(|o| {
            o.queues.retain(|queue, _| !queues.contains(queue));
            o.newest_ms.retain(|queue, _| !queues.contains(queue));
            o.queue_bytes.retain(|queue, _| !queues.contains(queue));
            let read = o.queues.iter().any(|(queue, range)| range.1 > self.start(*queue));
            if !read {
                gone.push(o.clone());
            }
            read
        });
        (next, gone)
    }

    /// Every queue the manifest names (in its objects or its starts).
    pub fn queues(&self) -> BTreeSet<u32> {
        let named = self.objects.iter().flat_map(|o| o.queues.keys());
        named.chain(self.starts.keys()).copied().collect()
    }

    /// The object holding `queue`'s `offset`, if any does.
    pub fn object_holding(&self, queue: u32, offset: u64) -> Option<&ObjectEntry> {
        if offset < self.start(queue) {
            return None;
        }
        self.objects
            .iter()
            .find(|o| o.queues.get(&queue).is_some_and(|&(first, next)| first <= offset && offset < next))
    }

    /// The first offset of `queue` readers reach from `local_start` down:
    /// the first of the objects that go on from one another to it, or the
    /// start retention moved it to.
    pub fn reachable_start(&self, queue: u32, local_start: u64) -> u64 {
        let mut ranges: Vec<(u64, u64)> = self.objects.iter().filter_map(|o| o.queues.get(&queue).copied()).collect();
        ranges.sort_unstable_by(|a, b| b.cmp(a));
        let mut start = local_start;
        for (first, next) in ranges {
            if next >= start && first < start {
                start = first;
            }
        }
        start.max(self.start(queue).min(local_start))
    }

    /// The next generation, stored by `epoch`, with `object` added. Each of
    /// its queues must begin at or past where the manifest has it.
    pub fn with_object(&self, epoch: u64, object: ObjectEntry) -> Manifest {
        assert!(epoch >= self.epoch, "a manifest of epoch {} taken on by epoch {epoch}", self.epoch);
        for (queue, (first, _)) in &object.queues {
            let next = self.uploaded_next(*queue);
            assert!(*first >= next, "queue {queue}: an object from {first} below the uploaded {next}");
        }
        let mut objects = self.objects.clone();
        objects.push(object);
        Manifest { epoch, generation: self.generation + 1, objects, starts: self.starts.clone() }
    }

    /// The object keys of `listed` (under the shard's place) that no
    /// manifest will ever name: objects of a generation this one has
    /// reached that it does not name (an upload whose manifest was never
    /// stored: a crash, a deposed leader; an object whose deletion failed).
    /// An object of a later generation is an upload under way, and kept.
    pub fn orphans<'a>(&self, listed: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
        let named: std::collections::HashSet<&str> = self.objects.iter().map(|o| o.key.as_str()).collect();
        let orphaned = |key: &&str| {
            object_generation(key).is_some_and(|generation| generation <= self.generation) && !named.contains(key)
        };
        listed.into_iter().filter(orphaned).collect()
    }

    /// Its key under the shard's place: `manifest/EPOCH-GENERATION.json`.
    pub fn key(&self) -> String {
        format!("{MANIFESTS}{:020}-{:020}.json", self.epoch, self.generation)
    }

    pub fn encode(&self) -> Vec<u8> {
        let stored = Stored {
            version: VERSION,
            epoch: self.epoch,
            generation: self.generation,
            objects: self.objects.clone(),
            starts: self.starts.clone(),
            crc: contents_crc(&self.objects, &self.starts),
        };
        serde_json::to_vec_pretty(&stored).expect("a manifest serializes")
    }

    /// The manifest stored as `key`, checked.
    pub fn decode(key: &str, bytes: &[u8]) -> Result<Manifest, ManifestError> {
        let malformed = |detail: String| ManifestError::Malformed { key: key.to_string(), detail };
        let stored: Stored = serde_json::from_slice(bytes).map_err(|e| malformed(e.to_string()))?;
        if stored.version != VERSION {
            return Err(ManifestError::Version { key: key.to_string(), found: stored.version });
        }
        let computed = contents_crc(&stored.objects, &stored.starts);
        if computed != stored.crc {
            return Err(ManifestError::Crc { key: key.to_string(), stored: stored.crc, computed });
        }
        let named = key_generation(key).ok_or_else(|| malformed("the key names no generation".into()))?;
        if named != stored.generation {
            return Err(ManifestError::Misnamed { key: key.to_string(), generation: stored.generation, named });
        }
        Ok(Manifest {
            epoch: stored.epoch,
            generation: stored.generation,
            objects: stored.objects,
            starts: stored.starts,
        })
    }
}

/// Where a shard's manifests are, under its place in the bucket.
pub const MANIFESTS: &str = "manifest/";

/// Where a shard's objects are, under its place in the bucket.
pub const OBJECTS: &str = "objects/";

/// The key of segment `segment`'s object uploaded by `epoch` for the
/// manifest's generation `generation`: an upload made again after a crash
/// replaces its own, a deposed leader's is named apart.
pub fn object_key(segment: u64, epoch: u64, generation: u64) -> String {
    format!("{OBJECTS}{segment:020}-{epoch:020}-{generation:020}.obj")
}

/// The generation an object key names (None: not an object key).
fn object_generation(key: &str) -> Option<u64> {
    let name = key.strip_prefix(OBJECTS)?.strip_suffix(".obj")?;
    let [segment, epoch, generation] = name.splitn(3, '-').collect::<Vec<_>>()[..] else { return None };
    segment.parse::<u64>().ok()?;
    epoch.parse::<u64>().ok()?;
    generation.parse().ok()
}

/// The generation a manifest key names.
fn key_generation(key: &str) -> Option<u64> {
    let name = key.rsplit('/').next()?.strip_suffix(".json")?;
    name.split_once('-')?.1.parse().ok()
}

/// The newest of a listing's manifest keys (each relative to the shard's place).
pub fn newest_key<'a>(keys: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    keys.into_iter().filter(|k| k.starts_with(MANIFESTS) && key_generation(k).is_some()).max()
}

fn contents_crc(objects: &[ObjectEntry], starts: &BTreeMap<u32, u64>) -> u32 {
    crc32fast::hash(&serde_json::to_vec(&(objects, starts)).expect("a manifest's contents serialize"))
}

/// A shard's place in the bucket: `OWNER/shard-K/`, the owner being its
/// broker group (a single node's is `single`; give single nodes that share
/// a bucket their own `--s3-prefix`).
pub fn shard_place(group: Option<&str>, shard: usize) -> String {
    format!("{}/shard-{shard}/", group.unwrap_or("single"))
}

/// Where a single node keeps a copy of its metadata (its topics and where
/// their queues are stored), for a node restored from the bucket.
pub const NODE_METADATA: &str = "single/metadata";

/// The place in the bucket of `core`'s shard.
pub fn place_of(core: &super::Core) -> String {
    shard_place(core.config().cluster.as_ref().map(|c| c.broker_group.as_str()), core.id())
}

/// The shard's manifest as this node knows it: loaded from the bucket
/// (`None` until then), replaced by each upload; shared by the shard's tasks.
pub struct ShardManifest {
    current: RefCell<Option<Rc<Manifest>>>,
    /// Held while a next generation is made and stored (the uploader's
    /// objects and starts, DeleteRecords' starts), so each is made from
    /// the one stored before it.
    changing: Semaphore,
}

impl Default for ShardManifest {
    fn default() -> ShardManifest {
        ShardManifest { current: RefCell::new(None), changing: Semaphore::new(1) }
    }
}

impl ShardManifest {
    /// Waits for the right to make and store the next generation.
    pub async fn change(&self) -> Permit<'_> {
        self.changing.acquire_permit(1).await.expect("the manifest's semaphore is never closed")
    }

    pub fn current(&self) -> Option<Rc<Manifest>> {
        self.current.borrow().clone()
    }

    /// Takes `next` as the shard's manifest if it is newer (a later epoch,
    /// or a later generation of the same); whether it did.
    pub fn offer(&self, next: Manifest) -> bool {
        let mut current = self.current.borrow_mut();
        let newer = current.as_deref().is_none_or(|old| (next.epoch, next.generation) > (old.epoch, old.generation));
        if newer {
            *current = Some(Rc::new(next));
        }
        newer
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(segment: u64, queues: &[(u32, u64, u64)]) -> ObjectEntry {
        ObjectEntry {
            key: format!("objects/{segment:020}"),
            segment,
            bytes: 100,
            footer_pos: 60,
            footer_len: 24,
            footer_crc: 7,
            queues: queues.iter().map(|(q, a, b)| (*q, (*a, *b))).collect(),
            key_ids: vec![],
            newest_ms: BTreeMap::new(),
            queue_bytes: BTreeMap::new(),
        }
    }

    #[test]
    fn generations_read_back_and_a_changed_manifest_is_refused() {
        let m = Manifest::default().with_object(3, object(0, &[(1, 0, 10), (2, 0, 4)]));
        let m = m.with_object(3, object(1 << 20, &[(1, 10, 30)]));
        assert_eq!(
            (m.epoch(), m.generation(), m.uploaded_next(1), m.uploaded_next(2), m.uploaded_next(9)),
            (3, 2, 30, 4, 0)
        );
        let key = m.key();
        assert_eq!(key, "manifest/00000000000000000003-00000000000000000002.json");
        assert_eq!(Manifest::decode(&key, &m.encode()).unwrap(), m);
        assert_eq!(m.object_holding(1, 10).map(|o| o.segment), Some(1 << 20));
        assert_eq!(m.object_holding(1, 30), None);
        assert_eq!((m.reachable_start(1, 25), m.reachable_start(1, 31), m.reachable_start(2, 4)), (0, 31, 0));

        let edited = String::from_utf8(m.encode()).unwrap().replace("30", "31");
        assert!(matches!(Manifest::decode(&key, edited.as_bytes()), Err(ManifestError::Crc { .. })));
        let wrong_key = "manifest/00000000000000000003-00000000000000000001.json";
        assert!(matches!(Manifest::decode(wrong_key, &m.encode()), Err(ManifestError::Misnamed { .. })));
        assert!(matches!(Manifest::decode(&key, b"{\"version\":1"), Err(ManifestError::Malformed { .. })));

        let old_epoch = "manifest/00000000000000000002-00000000000000000009.json";
        let keys = [old_epoch, key.as_str(), "objects/x", "manifest/junk"];
        assert_eq!(newest_key(keys), Some(key.as_str()), "a later epoch wins over a later generation");
    }

    #[test]
    fn moved_starts_leave_out_the_objects_no_queue_reads() {
        let m = Manifest::default().with_object(0, object(0, &[(1, 0, 10), (2, 0, 4)]));
        let m = m.with_object(0, object(1 << 20, &[(1, 10, 30)]));
        let (next, gone) = m.with_starts(0, &[(1, 12)].into_iter().collect());
        assert!(gone.is_empty(), "queue 2 still reads the first object");
        assert_eq!((next.start(1), next.object_holding(1, 11), next.reachable_start(1, 25)), (12, None, 12));
        let (last, gone) = next.with_starts(0, &[(2, 4)].into_iter().collect());
        assert_eq!(gone.iter().map(|o| o.segment).collect::<Vec<_>>(), vec![0]);
        assert_eq!((last.objects().len(), last.generation(), last.uploaded_next(2)), (1, 4, 4));
        let key = last.key();
        assert_eq!(Manifest::decode(&key, &last.encode()).unwrap(), last);
    }

    #[test]
    fn orphans_are_the_objects_of_reached_generations_no_manifest_names() {
        let first = ObjectEntry { key: object_key(0, 2, 1), ..object(0, &[(1, 0, 10)]) };
        let m = Manifest::default().with_object(2, first);
        let m = m.with_object(2, ObjectEntry { key: object_key(1 << 20, 2, 2), ..object(1 << 20, &[(1, 10, 20)]) });
        let deposed = object_key(1 << 20, 1, 2);
        let (in_flight, named) = (object_key(2 << 20, 2, 3), object_key(0, 2, 1));
        let listed = [deposed.as_str(), in_flight.as_str(), named.as_str(), "objects/not-ours.obj", "manifest/x"];
        assert_eq!(m.orphans(listed), vec![deposed.as_str()], "a named object, an upload under way and others stay");
        assert_eq!(object_generation(&in_flight), Some(3));
    }

    #[test]
    fn queues_gone_leave_the_manifest_with_the_objects_only_they_read() {
        let m = Manifest::default().with_object(0, object(0, &[(1, 0, 10), (2, 0, 4)]));
        let m = m.with_object(0, object(1 << 20, &[(1, 10, 30)]));
        let (m, _) = m.with_starts(0, &[(1, 12), (3, 5)].into_iter().collect());
        assert_eq!(m.queues(), [1, 2, 3].into_iter().collect());
        let (next, gone) = m.without_queues(0, &[1, 3].into_iter().collect());
        assert_eq!(gone.iter().map(|o| o.segment).collect::<Vec<_>>(), vec![1 << 20], "queue 2 still reads the first");
        assert_eq!(next.queues(), [2].into_iter().collect());
        assert_eq!((next.uploaded_next(1), next.start(1), next.uploaded_next(2)), (0, 0, 4));
        assert_eq!(next.generation(), m.generation() + 1);
        let (last, gone) = next.without_queues(0, &[2].into_iter().collect());
        assert_eq!((gone.len(), last.objects().len(), last.queues().len()), (1, 0, 0));
    }

    #[test]
    #[should_panic(expected = "below the uploaded")]
    fn an_object_that_overlaps_what_is_uploaded_is_a_bug() {
        let m = Manifest::default().with_object(0, object(0, &[(1, 0, 10)]));
        m.with_object(0, object(1 << 20, &[(1, 9, 12)]));
    }
}
