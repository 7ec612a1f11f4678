//! A sealed segment exported into a tiered object: each tiered queue's
//! batches come back whole and in order across the segments (no offset
//! missing between two objects), a queue that is not tiered is left out,
//! a segment over a part's size is cut into parts, the active segment is
//! refused, and under encryption at rest the object stays sealed while its
//! lookup entries (made in clear) find a key.

mod common;

use common::*;
use ringmq_shards::batch::{self, BatchBuilder};
use ringmq_shards::tiered::{verify_slice, ExportStep, ObjectIndex, PART_BYTES, TRAILER_BYTES};
use ringmq_shards::{QueueId, ReadWait, Record, Shard, ShardConfig};
use std::collections::BTreeMap;
use std::path::Path;

const QUEUES: u32 = 3;
/// Not tiered.
const LOCAL: u32 = 1;

fn cfg(dir: &Path) -> ShardConfig {
    ShardConfig { segment_bytes: 16 << 20, round_bytes_max: 1 << 20, pending_bytes_max: 4 << 20, ..config(dir) }
}

/// A batch of one record: key `k{i % 7}`, a 2 KB value marked "plain".
fn keyed(i: u64) -> Vec<u8> {
    let mut value = format!("plain-{i}-").into_bytes();
    value.resize(2_000, b'x');
    let key = format!("k{}", i % 7);
    let mut b = BatchBuilder::new(1_700_000_000_000);
    b.push(&Record { key: Some(key.as_bytes()), value: Some(&value), ..Record::default() });
    b.finish()
}

/// The whole object of sealed segment `base`, and its index read back from its bytes.
async fn export(shard: &Shard, base: u64) -> (Vec<u8>, ObjectIndex, usize) {
    let tiered = |q: QueueId, _: std::ops::Range<u64>| q.0 != LOCAL;
    let mut export = shard.export_segment(base, &tiered).unwrap();
    let mut parts = Vec::new();
    loop {
        match export.step().await.unwrap() {
            ExportStep::Part(part) => {
                assert!(part.len() >= PART_BYTES);
                parts.push(part.concat());
            }
            ExportStep::Done(closing) => {
                let (last, index) = closing.finish();
                parts.push(last.concat());
                let count = parts.len();
                let object = parts.concat();
                let tail = &object[object.len() - TRAILER_BYTES..];
                let (at, len) = ObjectIndex::trailer(tail).unwrap();
                let read = ObjectIndex::decode(&object[at as usize..(at + u64::from(len)) as usize]).unwrap();
                assert_eq!(read, index);
                return (object, index, count);
            }
        }
    }
}

/// Every stored batch of `queue` in [from, next), as reads return them.
async fn stored(shard: &Shard, queue: u32, from: u64, next: u64) -> Vec<u8> {
    let mut out = Vec::new();
    let mut at = from;
    while at < next {
        let r = shard.read(QueueId(queue), at, 1 << 20, ReadWait::No).await.unwrap();
        for b in batch::split(&r.bytes) {
            if batch::verify_stored(b).unwrap().base_offset < next {
                out.extend_from_slice(b);
            }
        }
        at = r.next_offset;
    }
    out
}

/// (base offset, records) of each batch of `bytes`.
fn headers(bytes: &[u8]) -> Vec<(u64, u32)> {
    batch::split(bytes).map(|b| batch::verify_stored(b).map(|h| (h.base_offset, h.record_count)).unwrap()).collect()
}

fn write_and_export(cfg: ShardConfig) -> Vec<(Vec<u8>, ObjectIndex, usize)> {
    // Reads return sealed batches opened; the object keeps them sealed.
    let sealed = cfg.keyring.is_some();
    run(move || async move {
        let shard = open_with(cfg, &[0, 1, 2]).await;
        for i in 0..12_000u64 {
            shard.append(QueueId((i % u64::from(QUEUES)) as u32), &keyed(i)).await.unwrap();
        }
        let bases = shard.segment_bases();
        assert!(bases.len() >= 2, "{bases:?}");
        let active = *bases.last().unwrap();
        let refused = shard.export_segment(active, &|_, _| true).err().unwrap();
        assert!(refused.to_string().contains("not a sealed segment"), "{refused}");
        let mut objects = Vec::new();
        for base in &bases[..bases.len() - 1] {
            let (object, index, parts) = export(&shard, *base).await;
            for s in &index.slices {
                let bytes = &object[s.pos as usize..s.pos as usize + s.len as usize];
                verify_slice(bytes, s).unwrap();
            }
            // Each queue's batches as the object holds them, and as reads return them.
            for (queue, (first, next)) in index.queues() {
                let mut from_object = Vec::new();
                for s in index.slices_from(queue, first) {
                    from_object.extend_from_slice(&object[s.pos as usize..s.pos as usize + s.len as usize]);
                }
                let read = stored(&shard, queue, first, next).await;
                assert_eq!(headers(&from_object), headers(&read), "queue {queue} of segment {base}: the same batches");
                if !sealed {
                    assert!(from_object == read, "queue {queue} of segment {base}: the same bytes");
                }
            }
            objects.push((object, index, parts));
        }
        shard.close().await.unwrap();
        objects
    })
}

#[test]
fn a_segments_tiered_queues_export_whole_in_parts_and_leave_the_others_out() {
    let dir = tempfile::tempdir().unwrap();
    let objects = write_and_export(cfg(dir.path()));
    assert!(objects[0].2 >= 2, "a 16 MiB segment is cut into parts: {}", objects[0].2);
    let mut ends: BTreeMap<u32, u64> = BTreeMap::new();
    for (_, index, _) in &objects {
        let queues = index.queues();
        assert!(!queues.contains_key(&LOCAL), "queue {LOCAL} is not tiered");
        for (queue, (first, next)) in queues {
            let end = ends.entry(queue).or_insert(0);
            assert_eq!(first, *end, "queue {queue}: the next object goes on where the last ended");
            *end = next;
        }
    }
    assert_eq!(ends.keys().copied().collect::<Vec<_>>(), vec![0, 2]);
}

#[test]
fn a_sealed_shards_objects_stay_sealed_and_their_lookups_find_keys() {
    let dir = tempfile::tempdir().unwrap();
    let keys = "1 0000000000000000000000000000000000000000000000000000000000000001\n";
    let keyring = std::sync::Arc::new(ringmq_shards::crypt::keyring::Keyring::parse(keys).unwrap());
    let objects = write_and_export(ShardConfig { keyring: Some(keyring), ..cfg(dir.path()) });
    let (object, index, _) = &objects[0];
    assert!(!object.windows(6).any(|w| w == b"plain-"), "no value in clear in the object");
    assert_eq!(index.key_ids, vec![1]);
    let k3 = ringmq_shards::lookup::key_hash(b"k3");
    // Record i went to queue i % 3 at offset i / 3, with key k{i % 7}: queue 0's offsets 1, 8, 15, ...
    let found = index.lookup(k3, 0);
    assert!(found.len() > 10 && found.iter().all(|o| (o * 3) % 7 == 3), "{:?}", &found[..found.len().min(5)]);
}
