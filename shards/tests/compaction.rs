//! Compaction: a property test of keyed writes, tombstones, compaction
//! passes (some cut short by a crash), retention and clean and crash
//! restarts against a model of every record written; and the cases a
//! model does not reach: Kafka batches (producer fields kept, aborted
//! transactions and old markers removed), sealed parts, and the log's
//! space given back.

mod common;

use common::*;
use proptest::prelude::*;
use ringmq_shards::batch::{self, BatchBuilder};
use ringmq_shards::kafka::{self, KafkaBatch};
use ringmq_shards::{Compaction, QueueId, ReadWait, Record, Shard, ShardConfig};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

const QUEUES: u32 = 2;
const KEYS: u8 = 6;

/// One record as written: its key (None: keyless is never written here),
/// its value (None: a tombstone) and its timestamp.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Written {
    key: u8,
    value: Option<Vec<u8>>,
    ts: i64,
}

#[derive(Debug, Clone)]
enum Op {
    /// A batch of keyed records (a value length of 0: a tombstone).
    Put {
        queue: u32,
        records: Vec<(u8, usize)>,
    },
    /// A pass up to offset `until_pick` mod (end + 1), removing tombstones
    /// older than `horizon_back` records' time.
    Compact {
        queue: u32,
        until_pick: u64,
        horizon_back: i64,
    },
    /// A pass cut short after about `after_us`, then a crash.
    CompactCrash {
        queue: u32,
        after_us: u64,
    },
    Checkpoint,
    /// The owner releases what no queue reads and retention runs.
    Retain,
    Restart {
        clean: bool,
    },
}

fn op() -> impl Strategy<Value = Op> {
    let record = (0..KEYS, prop_oneof![1 => Just(0usize), 6 => 1usize..3_000]);
    prop_oneof![
        8 => (0..QUEUES, prop::collection::vec(record, 1..6)).prop_map(|(queue, records)| Op::Put { queue, records }),
        3 => (0..QUEUES, any::<u64>(), 0i64..40).prop_map(|(queue, until_pick, horizon_back)| Op::Compact { queue, until_pick, horizon_back }),
        1 => (0..QUEUES, 0u64..3_000).prop_map(|(queue, after_us)| Op::CompactCrash { queue, after_us }),
        1 => Just(Op::Checkpoint),
        1 => Just(Op::Retain),
        1 => any::<bool>().prop_map(|clean| Op::Restart { clean }),
    ]
}

/// Every record written, by queue and offset, and the clock.
#[derive(Debug, Clone, Default)]
struct Model {
    queues: Vec<Vec<Written>>,
    /// The time of the next record (one tick per record).
    now: i64,
    /// The oldest tombstone time any pass was allowed to remove below, per queue.
    horizon: Vec<i64>,
}

const EPOCH_MS: i64 = 1_700_000_000_000;

fn record_value(queue: u32, offset: u64, len: usize) -> Vec<u8> {
    value(queue, offset, len)
}

/// One batch of `records` at time `ts` (each a tick later).
fn keyed_batch(records: &[Written]) -> Vec<u8> {
    let first = records[0].ts;
    let mut b = BatchBuilder::new(first);
    for r in records {
        let key = [r.key];
        b.push(&Record {
            timestamp_delta_ms: r.ts - first,
            key: Some(&key),
            value: r.value.as_deref(),
            ..Record::default()
        });
    }
    b.finish()
}

/// Every record readable from `queue`'s start: (offset, key, value), offsets ascending.
async fn read_every(shard: &Shard, queue: QueueId) -> Vec<(u64, u8, Option<Vec<u8>>)> {
    let (start, end) = shard.offsets(queue).unwrap();
    let mut out: Vec<(u64, u8, Option<Vec<u8>>)> = Vec::new();
    let mut offset = start;
    while offset < end {
        let r = shard.read(queue, offset, 16 << 10, ReadWait::No).await.unwrap();
        assert!(r.next_offset > offset, "reads make progress from {offset}");
        for b in batch::split(&r.bytes) {
            let header = batch::verify_stored(b).expect("returned batches verify");
            let mut scratch = Vec::new();
            for (i, rec) in batch::records(b, &mut scratch).unwrap().enumerate() {
                let rec = rec.unwrap();
                let at = header.base_offset + i as u64;
                if at >= offset {
                    out.push((at, rec.key.unwrap()[0], rec.value.map(<[u8]>::to_vec)));
                }
            }
        }
        offset = r.next_offset;
    }
    assert!(out.windows(2).all(|w| w[0].0 < w[1].0), "offsets only go up");
    out
}

/// What a reader must and may see of one queue, checked against the model.
async fn check_queue(shard: &Shard, q: u32, model: &Model) {
    let written = &model.queues[q as usize];
    let queue = QueueId(q);
    let (start, end) = shard.offsets(queue).unwrap();
    assert_eq!(end, written.len() as u64, "queue {q}: offsets are never reused or lost");
    let compacted_end = shard.compacted(queue).map_or(start, |c| c.end);
    let got = read_every(shard, queue).await;
    let seen: HashMap<u64, &(u64, u8, Option<Vec<u8>>)> = got.iter().map(|r| (r.0, r)).collect();
    for (offset, key, value) in &got {
        let w = &written[*offset as usize];
        assert_eq!((*key, value), (w.key, &w.value), "queue {q} offset {offset}: a record reads back as written");
    }
    let mut latest: HashMap<u8, u64> = HashMap::new();
    for (offset, w) in written.iter().enumerate().skip(start as usize) {
        latest.insert(w.key, offset as u64);
    }
    for (offset, w) in written.iter().enumerate().skip(start as usize) {
        let offset = offset as u64;
        let is_latest = latest[&w.key] == offset;
        let must = offset >= compacted_end || (is_latest && (w.value.is_some() || w.ts >= model.horizon[q as usize]));
        if must {
            assert!(
                seen.contains_key(&offset),
                "queue {q}: offset {offset} ({w:?}) is gone (compacted below {compacted_end})"
            );
        }
    }
    // Compaction did its work: below the part's end no record a later one
    // of its key (also below the end) supersedes is left.
    let mut newest_below: HashMap<u8, u64> = HashMap::new();
    for (offset, key, _) in got.iter().filter(|r| r.0 < compacted_end) {
        newest_below.insert(*key, *offset);
    }
    for (offset, w) in written.iter().enumerate().take(compacted_end as usize).skip(start as usize) {
        let offset = offset as u64;
        if let Some(&newer) = newest_below.get(&w.key) {
            assert!(
                offset >= newer || !seen.contains_key(&offset),
                "queue {q}: offset {offset} of key {} survived below {newer}",
                w.key
            );
        }
    }
}

fn no_aborts(_: i64, _: u64) -> bool {
    false
}

fn cfg(dir: &Path) -> ShardConfig {
    ShardConfig {
        segment_bytes: 1 << 20,
        segment_pool_max: 2,
        compaction_cpu_percent: 100,
        compaction_bytes_per_sec: 0,
        ..config(dir)
    }
}

/// Releases what no queue's log share needs, then runs retention.
async fn retain(shard: &Shard) {
    let mut floor = u64::MAX;
    for q in shard.queues() {
        let (from, end) = (shard.log_start(q).unwrap(), shard.offsets(q).unwrap().1);
        if from < end {
            floor = floor.min(shard.entry(q, from).await.unwrap().position.0);
        }
    }
    let (_, written_end, _) = shard.log_positions();
    shard.release_below(ringmq_shards::LogPos(floor.min(written_end)));
    shard.apply_retention().await.unwrap();
}

/// Runs ops on one shard life until a restart; returns where it stopped.
fn life(dir: PathBuf, ops: Vec<Op>, mut model: Model, from: usize) -> (Model, usize) {
    run(move || async move {
        let shard = open_with(cfg(&dir), &(0..QUEUES).collect::<Vec<_>>()).await;
        for q in 0..QUEUES {
            check_queue(&shard, q, &model).await;
        }
        let mut i = from;
        while i < ops.len() {
            match &ops[i] {
                Op::Put { queue, records } => {
                    let base = model.queues[*queue as usize].len() as u64;
                    let batch: Vec<Written> = records
                        .iter()
                        .enumerate()
                        .map(|(k, &(key, len))| Written {
                            key,
                            value: (len > 0).then(|| record_value(*queue, base + k as u64, len)),
                            ts: EPOCH_MS + model.now + k as i64,
                        })
                        .collect();
                    let a = shard.append(QueueId(*queue), &keyed_batch(&batch)).await.unwrap();
                    assert_eq!(a.base_offset, base);
                    model.now += batch.len() as i64;
                    model.queues[*queue as usize].extend(batch);
                }
                Op::Compact { queue, until_pick, horizon_back } => {
                    let end = model.queues[*queue as usize].len() as u64;
                    let horizon = EPOCH_MS + model.now - horizon_back;
                    let c = Compaction {
                        until: until_pick % (end + 1),
                        tombstones_before_ms: horizon,
                        aborted: &no_aborts,
                        wanted: &|| true,
                    };
                    let report = shard.compact(QueueId(*queue), &c).await.unwrap();
                    assert!(report.end <= c.until.max(shard.log_start(QueueId(*queue)).unwrap()));
                    let h = &mut model.horizon[*queue as usize];
                    *h = (*h).max(horizon);
                    check_queue(&shard, *queue, &model).await;
                }
                Op::CompactCrash { queue, after_us } => {
                    let end = model.queues[*queue as usize].len() as u64;
                    let horizon = EPOCH_MS + model.now;
                    model.horizon[*queue as usize] = model.horizon[*queue as usize].max(horizon);
                    let (s, q) = (shard.clone(), QueueId(*queue));
                    let pass = async move {
                        let c = Compaction {
                            until: end,
                            tombstones_before_ms: horizon,
                            aborted: &no_aborts,
                            wanted: &|| true,
                        };
                        s.compact(q, &c).await.map(|_| ())
                    };
                    let limit = std::time::Duration::from_micros(*after_us);
                    let _ = glommio::timer::timeout(limit, async move { Ok(pass.await) }).await;
                    return (model, i + 1);
                }
                Op::Checkpoint => shard.checkpoint().await.unwrap(),
                Op::Retain => retain(&shard).await,
                Op::Restart { clean } => {
                    if *clean {
                        shard.close().await.unwrap();
                    }
                    return (model, i + 1);
                }
            }
            i += 1;
        }
        shard.close().await.unwrap();
        (model, ops.len())
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn compaction_keeps_every_keys_latest_record_through_crashes(ops in prop::collection::vec(op(), 1..200)) {
        let dir = tempfile::tempdir().unwrap();
        let mut model = Model { queues: vec![Vec::new(); QUEUES as usize], now: 0, horizon: vec![i64::MIN; QUEUES as usize] };
        let mut at = 0;
        while at < ops.len() {
            (model, at) = life(dir.path().to_path_buf(), ops.clone(), model, at);
        }
        life(dir.path().to_path_buf(), vec![], model, 0);
    }
}

/// A Kafka batch of `records` (key, value) from producer 7, epoch 2, base
/// sequence 10, transactional as asked, compressed with gzip when `gzip`.
fn kafka_batch(records: &[(&[u8], Option<&[u8]>)], transactional: bool) -> Vec<u8> {
    let mut out = Vec::new();
    let recs = records.iter().map(|(k, v)| Record { key: Some(k), value: *v, ..Record::default() });
    kafka::encode_batch(&mut out, 0, EPOCH_MS, recs.enumerate().map(|(i, r)| (i as i32, r)));
    // The producer's fields, as an idempotent (or transactional) producer sets them.
    out[43..51].copy_from_slice(&7i64.to_be_bytes());
    out[51..53].copy_from_slice(&2i16.to_be_bytes());
    out[53..57].copy_from_slice(&10i32.to_be_bytes());
    if transactional {
        out[21..23].copy_from_slice(&(1i16 << 4).to_be_bytes());
    }
    let crc = crc32c::crc32c(&out[21..]);
    out[17..21].copy_from_slice(&crc.to_be_bytes());
    batch::wrap_kafka(&KafkaBatch::parse(&out).unwrap(), [0; 16])
}

#[test]
fn kafka_batches_keep_their_producer_and_lose_aborted_records_and_old_markers() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path().to_path_buf();
    run(move || async move {
        let shard = open_with(cfg(&dir), &[0]).await;
        let q = QueueId(0);
        // 0-2: a, b, a (idempotent); 3-4: a transaction writing c and a, aborted; 5: its marker.
        shard
            .append(q, &kafka_batch(&[(b"a", Some(b"a1")), (b"b", Some(b"b1")), (b"a", Some(b"a2"))], false))
            .await
            .unwrap();
        shard.append(q, &kafka_batch(&[(b"c", Some(b"c1")), (b"a", Some(b"a3"))], true)).await.unwrap();
        let mut marker = Vec::new();
        let m = kafka::Marker { producer_id: 7, producer_epoch: 2, commit: false, coordinator_epoch: 0 };
        kafka::encode_control(&mut marker, 0, EPOCH_MS, m);
        shard.append(q, &batch::wrap_kafka(&KafkaBatch::parse(&marker).unwrap(), [0; 16])).await.unwrap();
        let aborted = |producer: i64, offset: u64| producer == 7 && (3..5).contains(&offset);
        let c = Compaction { until: 6, tombstones_before_ms: EPOCH_MS + 1, aborted: &aborted, wanted: &|| true };
        let report = shard.compact(q, &c).await.unwrap();
        assert_eq!((report.end, report.records_read, report.records_kept), (6, 6, 2));
        let r = shard.read(q, 0, 1 << 20, ReadWait::No).await.unwrap();
        let mut kept = Vec::new();
        for b in batch::split(&r.bytes) {
            let header = batch::verify_stored(b).unwrap();
            let k = KafkaBatch::parse(batch::kafka_bytes(b).unwrap()).unwrap();
            assert_eq!((k.producer_id(), k.producer_epoch(), k.attributes() & 7), (7, 2, 0), "uncompressed");
            let mut scratch = Vec::new();
            for (i, rec) in batch::records(b, &mut scratch).unwrap().enumerate() {
                let rec = rec.unwrap();
                kept.push((header.base_offset + i as u64, k.base_sequence() + i as i32, rec.value.unwrap().to_vec()));
            }
        }
        assert_eq!(
            kept,
            vec![(1, 11, b"b1".to_vec()), (2, 12, b"a2".to_vec())],
            "b1 and a2 at their offsets and sequences; the aborted a3 and the old marker gone"
        );
        assert_eq!(r.next_offset, 6, "the read goes on past the gap");
        shard.close().await.unwrap();
    });
}

#[test]
fn a_sealed_shards_compacted_part_is_sealed_and_reads_back_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path().to_path_buf();
    let keys = "1 0000000000000000000000000000000000000000000000000000000000000001\n";
    let keyring = std::sync::Arc::new(ringmq_shards::crypt::keyring::Keyring::parse(keys).unwrap());
    let sealed = move |d: &Path| ShardConfig { keyring: Some(keyring.clone()), ..cfg(d) };
    let (d, c) = (dir.clone(), sealed.clone());
    run(move || async move {
        let shard = open_with(c(&d), &[0]).await;
        for i in 0..40u64 {
            let w = Written {
                key: (i % 4) as u8,
                value: Some(format!("secret-{i}").into_bytes()),
                ts: EPOCH_MS + i as i64,
            };
            shard.append(QueueId(0), &keyed_batch(&[w])).await.unwrap();
        }
        let report = shard
            .compact(
                QueueId(0),
                &Compaction { until: 40, tombstones_before_ms: 0, aborted: &no_aborts, wanted: &|| true },
            )
            .await
            .unwrap();
        assert_eq!(report.records_kept, 4);
        shard.close().await.unwrap();
    });
    let part: Vec<PathBuf> = std::fs::read_dir(dir.join("index/0000000000"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "clean"))
        .collect();
    let bytes = std::fs::read(&part[0]).unwrap();
    assert!(!bytes.windows(7).any(|w| w == b"secret-"), "no value in clear in the part's file");
    run(move || async move {
        let shard = open_with(sealed(&dir), &[0]).await;
        let got = read_every(&shard, QueueId(0)).await;
        let values: Vec<(u64, Vec<u8>)> = got.into_iter().map(|(o, _, v)| (o, v.unwrap())).collect();
        let want: Vec<(u64, Vec<u8>)> = (36..40).map(|i| (i, format!("secret-{i}").into_bytes())).collect();
        assert_eq!(values, want);
        shard.close().await.unwrap();
    });
}

/// Retention gives the log's segments back once compaction moved the
/// queue's log share past them; the part's records are still found by key.
#[test]
fn the_logs_segments_come_back_once_a_compacted_queue_lets_go_of_them() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path().to_path_buf();
    run(move || async move {
        let shard = open_with(cfg(&dir), &[0]).await;
        let q = QueueId(0);
        // 8 MiB over 16 keys: many segments of overwritten values.
        for i in 0..2_048u64 {
            let w = Written { key: (i % 16) as u8, value: Some(record_value(0, i, 4_000)), ts: EPOCH_MS + i as i64 };
            shard.append(q, &keyed_batch(&[w])).await.unwrap();
        }
        let before = shard.segment_bases().len();
        let end = shard.offsets(q).unwrap().1;
        let report = shard
            .compact(q, &Compaction { until: end, tombstones_before_ms: 0, aborted: &no_aborts, wanted: &|| true })
            .await
            .unwrap();
        assert_eq!((report.end, report.records_kept), (end, 16));
        shard.checkpoint().await.unwrap();
        retain(&shard).await;
        let after = shard.segment_bases().len();
        assert!(before >= 8 && after <= 2, "segments before {before}, after {after}");
        let part = shard.compacted(q).unwrap();
        assert!(part.bytes < 16 * 4_200, "the part holds 16 records: {} bytes", part.bytes);
        assert_eq!(shard.offsets(q).unwrap(), (0, end), "the queue still starts at 0");
        for key in 0..16u8 {
            let found = shard.lookup(ringmq_shards::lookup::key_hash(&[key])).await.unwrap();
            let latest = end - 16 + u64::from(key);
            assert!(
                found.contains(&(q, latest)),
                "key {key}'s latest record is found by key after retention: {found:?}"
            );
        }
        shard.close().await.unwrap();
    });
}

/// A compacted queue copied elsewhere (a move between broker groups): its
/// part, gaps and all, imported whole, then its log from the part's end.
/// The copy reads as the source, finds its keys, and keeps it all through a
/// restart; batches out of order, or a part below the log, are refused.
#[test]
fn an_imported_part_and_the_log_after_it_read_as_the_source() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path().to_path_buf();
    let (source, copy) = (QueueId(0), QueueId(1));
    let d = dir.clone();
    let expected = run(move || async move {
        let shard = open_with(cfg(&d), &[0, 1]).await;
        for i in 0..300u64 {
            let w = Written { key: (i % 7) as u8, value: Some(record_value(0, i, 300)), ts: EPOCH_MS + i as i64 };
            shard.append(source, &keyed_batch(&[w])).await.unwrap();
        }
        let c = Compaction { until: 200, tombstones_before_ms: 0, aborted: &no_aborts, wanted: &|| true };
        let part_end = shard.compact(source, &c).await.unwrap().end;
        assert_eq!(part_end, 200);
        // A pass a copy no longer wants leaves the part as it was.
        let c = Compaction { until: 300, tombstones_before_ms: 0, aborted: &no_aborts, wanted: &|| false };
        assert_eq!(shard.compact(source, &c).await.unwrap().end, 200);
        assert_eq!(shard.compacted(source).unwrap().end, 200);

        let (mut part, mut log) = (Vec::new(), Vec::new());
        let mut offset = 0;
        while offset < 300 {
            let r = shard.read(source, offset, 4 << 10, ReadWait::No).await.unwrap();
            for b in batch::split(&r.bytes) {
                let base = batch::verify_stored(b).unwrap().base_offset;
                if base < part_end { &mut part } else { &mut log }.push(b.to_vec());
            }
            offset = r.next_offset;
        }
        assert_eq!(part.len(), 7, "one record of each key below the part's end");

        let mut import = shard.import_part(copy).await.unwrap();
        import.push(&part[3..].concat()).await.unwrap();
        let refused = import.push(&part[0]).await.unwrap_err();
        assert!(refused.to_string().contains("follows one that ended"), "{refused}");
        import.abandon().await;

        let mut import = shard.import_part(copy).await.unwrap();
        import.push(&part.concat()).await.unwrap();
        import.finish(0, part_end).await.unwrap();
        assert_eq!(shard.offsets(copy).unwrap(), (0, part_end), "the log begins at the part's end");
        for b in &log {
            shard.append_copied(copy, b).await.unwrap();
        }
        let mut again = shard.import_part(copy).await.unwrap();
        again.push(&part.concat()).await.unwrap();
        let refused = again.finish(0, part_end + 50).await.unwrap_err();
        assert!(refused.to_string().contains("below the part's end"), "{refused}");

        let source_reads = read_every(&shard, source).await;
        assert_eq!(read_every(&shard, copy).await, source_reads);
        for key in 0..7u8 {
            let found = shard.lookup(ringmq_shards::lookup::key_hash(&[key])).await.unwrap();
            let latest_below = (0..200u64).rev().find(|i| i % 7 == u64::from(key)).unwrap();
            assert!(found.contains(&(copy, latest_below)), "key {key} at {latest_below} found: {found:?}");
        }
        shard.close().await.unwrap();
        source_reads
    });
    run(move || async move {
        let shard = open_with(cfg(&dir), &[0, 1]).await;
        assert_eq!(shard.compacted(QueueId(1)).map(|p| (p.start, p.end)), Some((0, 200)));
        assert_eq!(read_every(&shard, QueueId(1)).await, expected, "the same after a restart");
        shard.close().await.unwrap();
    });
}
