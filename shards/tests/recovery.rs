//! Recovery after damage: the log is cut at random positions or has bits
//! flipped in its tail; on reopen every batch before the damage is readable,
//! nothing from the damage on is returned, and appends continue.

mod common;

use common::*;
use ringmq_shards::{QueueId, ShardConfig};
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

const SEGMENT_BYTES: u64 = 1 << 20;

/// An acknowledged batch: queue, offset, log position, size, value.
#[derive(Clone, Debug)]
struct Acked {
    queue: u32,
    offset: u64,
    position: u64,
    size: u64,
    value: Vec<u8>,
}

fn cfg(dir: &Path) -> ShardConfig {
    ShardConfig { segment_bytes: SEGMENT_BYTES, ..config(dir) }
}

/// Appends batches of varied sizes over two segments, then "crashes" (the
/// executor ends without close or checkpoint).
fn write_then_crash(dir: &Path, seed: u64) -> Vec<Acked> {
    write_checkpoint_then_crash(dir, seed, usize::MAX)
}

/// As `write_then_crash`, with a checkpoint after the first `checkpoint_after` batches.
fn write_checkpoint_then_crash(dir: &Path, seed: u64, checkpoint_after: usize) -> Vec<Acked> {
    let p = dir.to_path_buf();
    run(move || async move {
        let shard = open_with(cfg(&p), &[1, 2]).await;
        let mut rng = seed;
        let mut acked = Vec::new();
        for i in 0..80u64 {
            if i as usize == checkpoint_after {
                shard.checkpoint().await.unwrap();
            }
            let queue = 1 + (next(&mut rng) % 2) as u32;
            let v = value(queue, i, 100 + (next(&mut rng) % 40_000) as usize);
            let bytes = batch_of(&v);
            let a = shard.append(QueueId(queue), &bytes).await.unwrap();
            acked.push(Acked {
                queue,
                offset: a.base_offset,
                position: a.position.0,
                size: bytes.len() as u64,
                value: v,
            });
        }
        acked
    })
}

/// Reopens, checks that exactly the batches in `expected` are readable, that
/// appends continue at the next offsets, and that all of it survives another
/// restart.
fn reopen_and_check(dir: &Path, expected: Vec<Acked>, what: &str) {
    let p: PathBuf = dir.to_path_buf();
    let what = what.to_string();
    let exp = expected.clone();
    run(move || async move {
        let shard = open_with(cfg(&p), &[]).await;
        for q in [1u32, 2] {
            let want: Vec<(u64, Vec<u8>)> =
                exp.iter().filter(|a| a.queue == q).map(|a| (a.offset, a.value.clone())).collect();
            let got = read_all(&shard, QueueId(q), 0).await;
            assert!(got == want, "{what}: queue {q} holds {} records, expected {}", got.len(), want.len());
            let a = shard.append(QueueId(q), &batch_of(b"after recovery")).await.unwrap();
            assert_eq!(a.base_offset, want.len() as u64, "{what}: appends continue after the last good batch");
        }
        shard.close().await.unwrap();
    });
    let p: PathBuf = dir.to_path_buf();
    run(move || async move {
        let shard = open_with(cfg(&p), &[]).await;
        for q in [1u32, 2] {
            let n = expected.iter().filter(|a| a.queue == q).count();
            let got = read_all(&shard, QueueId(q), 0).await;
            assert_eq!(got.len(), n + 1);
            assert_eq!(got[n].1, b"after recovery".to_vec());
        }
        shard.close().await.unwrap();
    });
}

/// Zeroes the log from `position` to the end of every segment file.
fn cut_log(dir: &Path, position: u64) {
    for (base, generation) in segment_files(dir) {
        let end = base + SEGMENT_BYTES;
        if end <= position {
            continue;
        }
        let from = position.max(base) - base;
        // A spare may be a recycled file, in a later life.
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .open(dir.join(ringmq_shards::segment_name(base, generation)))
            .unwrap();
        f.seek(SeekFrom::Start(from)).unwrap();
        f.write_all(&vec![0u8; (SEGMENT_BYTES - from) as usize]).unwrap();
        f.sync_all().unwrap();
    }
}

/// Flips one bit of the log at `position`.
fn flip_bit(dir: &Path, position: u64, bit: u8) {
    let base = position - position % SEGMENT_BYTES;
    let path = dir.join(ringmq_shards::segment_name(base, ringmq_shards::batch::Generation::WIRE));
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[(position - base) as usize] ^= 1 << bit;
    std::fs::write(&path, bytes).unwrap();
}

fn segment_files(dir: &Path) -> Vec<(u64, ringmq_shards::batch::Generation)> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| ringmq_shards::parse_segment_name(&e.unwrap().file_name().to_string_lossy()))
        .collect();
    v.sort();
    v
}

fn next(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

#[test]
fn acked_batches_before_a_cut_survive_and_nothing_after_it_is_returned() {
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    for case in 0..20 {
        let dir = tempfile::tempdir().unwrap();
        let acked = write_then_crash(dir.path(), next(&mut rng));
        let log_end = acked.iter().map(|a| a.position + a.size).max().unwrap();
        let cut = match case {
            0 => 0,
            1 => log_end,
            2 => acked[40].position,
            3 => acked[40].position + 1,
            _ => next(&mut rng) % log_end,
        };
        cut_log(dir.path(), cut);
        let expected: Vec<Acked> = acked.iter().filter(|a| a.position + a.size <= cut).cloned().collect();
        reopen_and_check(dir.path(), expected, &format!("cut at {cut}"));
    }
}

#[test]
fn a_flipped_bit_in_the_tail_truncates_the_log_at_that_batch() {
    let mut rng = 0x1234_5678_9abc_def1u64;
    for case in 0..16 {
        let dir = tempfile::tempdir().unwrap();
        let acked = write_then_crash(dir.path(), next(&mut rng));
        let victim = acked.len() - 1 - (next(&mut rng) % 12) as usize;
        let a = &acked[victim];
        let position = a.position + next(&mut rng) % a.size;
        flip_bit(dir.path(), position, (next(&mut rng) % 8) as u8);
        let expected: Vec<Acked> = acked[..victim].to_vec();
        reopen_and_check(dir.path(), expected, &format!("case {case}: bit flipped at {position} in batch {victim}"));
    }
}

#[test]
fn garbage_past_the_log_end_is_wiped_so_it_never_resurfaces() {
    let dir = tempfile::tempdir().unwrap();
    let acked = write_then_crash(dir.path(), 7);
    // A torn round: a copy of an older, valid batch lands past the end.
    let end = acked.iter().map(|a| a.position + a.size).max().unwrap();
    let src = &acked[acked.len() - 1];
    let base = src.position - src.position % SEGMENT_BYTES;
    let bytes =
        std::fs::read(dir.path().join(ringmq_shards::segment_name(base, ringmq_shards::batch::Generation::WIRE)))
            .unwrap();
    let copy = bytes[(src.position - base) as usize..(src.position - base + src.size) as usize].to_vec();
    let ghost_at = end + 3 * 4096;
    if ghost_at + src.size < base + SEGMENT_BYTES {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .open(dir.path().join(ringmq_shards::segment_name(base, ringmq_shards::batch::Generation::WIRE)))
            .unwrap();
        f.seek(SeekFrom::Start(ghost_at - base)).unwrap();
        f.write_all(&copy).unwrap();
    }
    reopen_and_check(dir.path(), acked.clone(), "ghost batch past the end");
    let after =
        std::fs::read(dir.path().join(ringmq_shards::segment_name(base, ringmq_shards::batch::Generation::WIRE)))
            .unwrap();
    let ghost = &after[(ghost_at - base) as usize..(ghost_at - base + src.size) as usize];
    assert!(ghost != copy.as_slice(), "recovery wiped the stale batch past the end");
}

#[test]
fn a_cut_below_the_checkpoint_rolls_every_queue_back_to_the_log() {
    let mut rng = 0x5bd1_e995_2f6b_a3c7u64;
    for case in 0..16 {
        let dir = tempfile::tempdir().unwrap();
        // Checkpointed at batch 70 (or after all 80): the cut lands below it,
        // as a lost write cache zeroes what the checkpoint already covers.
        let checkpoint_after = if case % 2 == 0 { 70 } else { 80 };
        let acked = write_checkpoint_then_crash(dir.path(), next(&mut rng), checkpoint_after);
        if checkpoint_after == 80 {
            run({
                let p = dir.path().to_path_buf();
                move || async move { open_with(cfg(&p), &[]).await.checkpoint().await.unwrap() }
            });
        }
        let below = acked[checkpoint_after.min(acked.len()) - 1].position;
        let cut = match case {
            0 | 1 => 0,
            2 | 3 => acked[10].position,
            _ => next(&mut rng) % below,
        };
        cut_log(dir.path(), cut);
        let expected: Vec<Acked> = acked.iter().filter(|a| a.position + a.size <= cut).cloned().collect();
        reopen_and_check(dir.path(), expected, &format!("case {case}: cut at {cut} below the checkpoint"));
    }
}

#[test]
fn a_damaged_old_batch_is_named_and_reads_around_it_return_the_good_ones() {
    let dir = tempfile::tempdir().unwrap();
    let acked = write_then_crash(dir.path(), 11);
    // A bit flips inside an old batch of queue 1 after the log was recovered clean.
    let q1: Vec<&Acked> = acked.iter().filter(|a| a.queue == 1).collect();
    let victim = q1[q1.len() / 2].clone();
    let p = dir.path().to_path_buf();
    run(move || async move { open_with(cfg(&p), &[]).await.close().await.unwrap() });
    flip_bit(dir.path(), victim.position + victim.size / 2, 3);
    let p = dir.path().to_path_buf();
    let total = q1.len() as u64;
    run(move || async move {
        let shard = open_with(cfg(&p), &[]).await;
        let before = shard.read(QueueId(1), 0, 64 << 20, ringmq_shards::ReadWait::No).await.unwrap();
        assert_eq!(before.next_offset, victim.offset, "a read spanning the damage stops before it");
        assert_eq!(records(&before.bytes).len() as u64, victim.offset, "with every good batch before it");
        let err = shard.read(QueueId(1), victim.offset, 1 << 20, ringmq_shards::ReadWait::No).await.unwrap_err();
        match err {
            ringmq_shards::StorageError::CorruptBatch { first_offset, next_offset, queue, .. } => {
                assert_eq!((queue, first_offset, next_offset), (1, victim.offset, victim.offset + 1));
            }
            other => panic!("expected CorruptBatch, got {other}"),
        }
        let after = read_all(&shard, QueueId(1), victim.offset + 1).await;
        assert_eq!(after.len() as u64, total - victim.offset - 1, "everything after the damage reads");
        assert_eq!(shard.stats().corrupt_reads, 1);
        shard.close().await.unwrap();
    });
}

#[test]
fn a_deleted_queue_leaves_no_files_and_recovery_passes_over_its_batches() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().to_path_buf();
    run(move || async move {
        let shard = open_with(cfg(&p), &[1, 2]).await;
        for i in 0..30u64 {
            let queue = QueueId(1 + (i % 2) as u32);
            shard.append(queue, &batch_of(&value(queue.0, i, 300))).await.unwrap();
        }
        shard.delete_queues(&[QueueId(2)]).await.unwrap();
        assert!(shard.read(QueueId(2), 0, 1 << 20, ringmq_shards::ReadWait::No).await.is_err());
        shard.append(QueueId(1), &batch_of(b"after the delete")).await.unwrap();
        // A crash: no checkpoint covers the deleted queue's batches.
    });
    assert!(!dir.path().join("index/0000000002").exists(), "the deleted queue's index directory is gone");
    let p = dir.path().to_path_buf();
    run(move || async move {
        let shard = open_with(cfg(&p), &[]).await;
        assert_eq!(shard.queues(), vec![QueueId(1)], "the deleted queue stays deleted");
        let got = read_all(&shard, QueueId(1), 0).await;
        assert_eq!(got.len(), 16, "the other queue's batches all recover");
        assert_eq!(got[15].1, b"after the delete".to_vec());
        shard.close().await.unwrap();
    });
}
