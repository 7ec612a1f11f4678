//! Segment recycling: retention hands retired segment files back as spares
//! (renamed into a bounded pool), a log whose retention keeps up never
//! zero-fills a new segment again, and recovery never takes a stale batch
//! of a recycled file's earlier life as live, not even one that is CRC-valid
//! and sits exactly where the log ends.

mod common;

use common::*;
use ringmq_shards::batch::{self, Generation};
use ringmq_shards::{parse_segment_name, QueueId, ShardConfig};
use std::path::{Path, PathBuf};

const SEGMENT: u64 = 1 << 20;
const PAGE: u64 = 4096;

/// (base, generation) of the segment files in `dir`, ascending.
fn segment_files(dir: &Path) -> Vec<(u64, Generation)> {
    let mut v: Vec<(u64, Generation)> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| parse_segment_name(&e.unwrap().file_name().to_string_lossy()))
        .collect();
    v.sort();
    v
}

/// Names of the pooled files in `dir`.
fn pooled_files(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".free"))
        .collect()
}

#[test]
fn retention_recycles_segments_and_a_steady_log_never_zero_fills_again() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().to_path_buf();
    let written = run(move || async move {
        let cfg = ShardConfig { retention_bytes: Some(3 * SEGMENT), segment_pool_max: 2, ..config(&p) };
        let shard = open_with(cfg, &[1]).await;
        let mut written = Vec::new();
        let mut append = |shard: ringmq_shards::Shard, i: u64| {
            let v = value(1, i, 10_000);
            written.push(v.clone());
            async move { shard.append(QueueId(1), &batch_of(&v)).await.unwrap() }
        };
        // Fill until the pool has handed back two spares (retention runs at each rollover).
        let mut i = 0;
        while shard.stats().segments_recycled < 2 {
            assert!(i < 2_000, "no segment recycled after {i} appends: {:?}", shard.stats());
            append(shard.clone(), i).await;
            i += 1;
        }
        let before = shard.stats();
        // Six more segments' worth: every spare comes from the pool.
        for _ in 0..600 {
            append(shard.clone(), i).await;
            i += 1;
            assert!(pooled_files(&p).len() <= 2, "the pool keeps its bound");
        }
        let after = shard.stats();
        assert_eq!(after.segments_created, before.segments_created, "no new segment was made: {after:?}");
        assert_eq!(after.zero_fill_bytes, before.zero_fill_bytes, "nothing was zero-filled");
        assert!(after.segments_recycled >= before.segments_recycled + 5, "{before:?} -> {after:?}");
        assert!(segment_files(&p).iter().any(|(_, g)| *g > Generation(1)), "files recycled more than once");
        // Kept: the last segments, readable as written.
        let (start, end) = shard.offsets(QueueId(1)).unwrap();
        assert!(start > 0 && end == i, "[{start}, {end})");
        let got = read_all(&shard, QueueId(1), start).await;
        assert!(got.iter().all(|(o, v)| *v == written[*o as usize]), "reads of recycled segments");
        written
        // The executor is dropped here without a close: a crash.
    });
    let p = dir.path().to_path_buf();
    run(move || async move {
        let cfg = ShardConfig { retention_bytes: Some(3 * SEGMENT), segment_pool_max: 2, ..config(&p) };
        let shard = open_with(cfg, &[]).await;
        let (start, end) = shard.offsets(QueueId(1)).unwrap();
        assert_eq!(end, written.len() as u64, "every acknowledged append survives the crash");
        let got = read_all(&shard, QueueId(1), start).await;
        assert_eq!(got.len() as u64, end - start);
        assert!(got.iter().all(|(o, v)| *v == written[*o as usize]), "recovered from recycled segments");
        let a = shard.append(QueueId(1), &batch_of(b"after")).await.unwrap();
        assert_eq!(a.base_offset, end);
        shard.close().await.unwrap();
    });
}

#[test]
fn pooled_files_past_the_bound_are_deleted_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().to_path_buf();
    run(move || async move {
        let cfg = ShardConfig { retention_age: Some(std::time::Duration::ZERO), segment_pool_max: 3, ..config(&p) };
        let shard = open_with(cfg, &[1]).await;
        for i in 0..500 {
            shard.append(QueueId(1), &batch_of(&value(1, i, 10_000))).await.unwrap();
        }
        assert!(shard.apply_retention().await.unwrap() >= 3);
        assert_eq!(shard.stats().segments_pooled, 3);
        assert_eq!(shard.segment_bytes().pooled, 3 * SEGMENT);
        shard.close().await.unwrap();
    });
    assert_eq!(pooled_files(dir.path()).len(), 3);
    let p = dir.path().to_path_buf();
    run(move || async move {
        let shard = open_with(ShardConfig { segment_pool_max: 1, ..config(&p) }, &[]).await;
        assert!(shard.segment_bytes().pooled <= SEGMENT, "one file kept");
        shard.close().await.unwrap();
    });
    // The one kept may have become the spare already.
    let recycled = segment_files(dir.path()).iter().filter(|(_, g)| *g == Generation(1)).count();
    assert_eq!(pooled_files(dir.path()).len() + recycled, 1, "two of three pooled files were deleted");
}

/// Waits (bounded) until the shard has its next segment ready.
async fn spare_ready(shard: &ringmq_shards::Shard) {
    for _ in 0..1_000 {
        if shard.segment_bytes().spare > 0 {
            return;
        }
        glommio::timer::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("no spare segment after 10 s: {:?}", shard.segment_bytes());
}

#[test]
fn the_spare_made_before_a_stop_is_recycled_after_it_not_zero_filled_again() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().to_path_buf();
    let written = run(move || async move {
        let shard = open_with(ShardConfig { segment_pool_max: 1, ..config(&p) }, &[1]).await;
        let written: Vec<Vec<u8>> = (0..150).map(|i| value(1, i, 10_000)).collect();
        for v in &written {
            shard.append(QueueId(1), &batch_of(v)).await.unwrap();
        }
        spare_ready(&shard).await;
        shard.close().await.unwrap();
        written
    });
    let spare_base = segment_files(dir.path()).last().unwrap().0;
    assert!(spare_base > 150 * 10_000, "the spare lies past the log's end");
    let p = dir.path().to_path_buf();
    run(move || async move {
        let shard = open_with(ShardConfig { segment_pool_max: 1, ..config(&p) }, &[]).await;
        spare_ready(&shard).await;
        let stats = shard.stats();
        assert_eq!((stats.segments_created, stats.zero_fill_bytes), (0, 0), "nothing made anew: {stats:?}");
        assert_eq!(stats.segments_recycled, 1, "the old spare is the new one: {stats:?}");
        assert_eq!(generation_at(&p, spare_base), Some(Generation(1)), "in its next life");
        // Appends run into the recycled spare and read back as written.
        let mut all = written;
        for i in 150..300 {
            all.push(value(1, i, 10_000));
            shard.append(QueueId(1), &batch_of(&all[i as usize])).await.unwrap();
        }
        let got = read_all(&shard, QueueId(1), 0).await;
        assert_eq!(got.len(), all.len());
        assert!(got.iter().all(|(o, v)| *v == all[*o as usize]), "reads across the recycled spare");
        shard.close().await.unwrap();
    });
    // Without a pool, the file past the end is deleted as before.
    let p = dir.path().to_path_buf();
    run(move || async move {
        let shard = open_with(ShardConfig { segment_pool_max: 0, ..config(&p) }, &[]).await;
        spare_ready(&shard).await;
        assert_eq!(shard.segment_bytes().pooled, 0);
        shard.close().await.unwrap();
    });
    assert!(pooled_files(dir.path()).is_empty());
}

/// The generation of the segment holding `pos`, from the file names.
fn generation_at(dir: &Path, pos: u64) -> Option<Generation> {
    segment_files(dir).into_iter().find(|(base, _)| *base <= pos && pos < base + SEGMENT).map(|(_, g)| g)
}

#[test]
fn a_stale_crc_valid_batch_right_at_the_end_of_a_recycled_file_is_a_torn_tail() {
    let dir = tempfile::tempdir().unwrap();
    let p: PathBuf = dir.path().to_path_buf();
    let len = page_value_len(1);
    // Every batch is one page: the recycled file's earlier life has a batch
    // at every page boundary, so one sits exactly where the new life ends.
    let (acked, end, base) = run(move || async move {
        // Age retention runs only when asked (its interval is a minute).
        let cfg = ShardConfig { retention_age: Some(std::time::Duration::ZERO), segment_pool_max: 2, ..config(&p) };
        let shard = open_with(cfg, &[1]).await;
        let mut acked = Vec::new();
        let mut retired = false;
        // Append until the log's end is 7 pages into a recycled file.
        let end = loop {
            assert!(acked.len() < 5_000, "never reached a recycled segment");
            let v = value(1, acked.len() as u64, len);
            let a = shard.append(QueueId(1), &batch_of(&v)).await.unwrap();
            assert_eq!(a.position.0 % PAGE, 0, "page-sized batches sit on page boundaries");
            acked.push(v);
            let end = a.position.0 + PAGE;
            if !retired && end > SEGMENT {
                // The first segment, full of valid batches, goes to the pool.
                assert_eq!(shard.apply_retention().await.unwrap(), 1);
                retired = true;
            }
            if generation_at(&p, end) == Some(Generation(1)) && end % SEGMENT == 7 * PAGE {
                break end;
            }
        };
        (acked, end, end - 7 * PAGE)
        // Dropped without a close: a crash.
    });
    // The precondition: right at the end lies a whole batch of the file's
    // first life, valid under its generation and not under the new one.
    let path = dir.path().join(ringmq_shards::segment_name(base, Generation(1)));
    let file = std::fs::read(&path).unwrap();
    let stale = &file[(end - base) as usize..][..PAGE as usize];
    let header = batch::verify_in(stale, Generation::WIRE).expect("a CRC-valid batch of the earlier life");
    assert_eq!(header.base_offset, 7, "the first life's eighth batch");
    assert!(batch::verify_in(stale, Generation(1)).is_err());
    let p: PathBuf = dir.path().to_path_buf();
    run(move || async move {
        let cfg = ShardConfig { segment_pool_max: 2, ..config(&p) };
        let shard = open_with(cfg, &[]).await;
        let (start, next) = shard.offsets(QueueId(1)).unwrap();
        assert_eq!(next, acked.len() as u64, "the log ends after the last acknowledged batch");
        let got = read_all(&shard, QueueId(1), start).await;
        assert!(got.iter().all(|(o, v)| *v == acked[*o as usize]), "only live batches are read");
        let a = shard.append(QueueId(1), &batch_of(b"after recovery")).await.unwrap();
        assert_eq!((a.base_offset, a.position.0), (next, end), "appends go on at the end");
        shard.close().await.unwrap();
    });
}
