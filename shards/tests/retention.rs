//! Retention retires whole old segments by size and by age (into the pool of
//! spares, or deleted past its bound), moves queue starts past them, and
//! keeps everything newer readable across restarts.

mod common;

use common::*;
use ringmq_shards::{LogPos, QueueId, ReadWait, ShardConfig, StorageError};
use std::time::Duration;

fn fill(
    values: u64,
) -> impl Fn(ShardConfig) -> std::pin::Pin<Box<dyn std::future::Future<Output = ringmq_shards::Shard>>> {
    move |cfg| {
        Box::pin(async move {
            let shard = open_with(cfg, &[1, 2]).await;
            for i in 0..values {
                let q = QueueId(1 + (i % 2) as u32);
                shard.append(q, &batch_of(&value(q.0, i, 50_000))).await.unwrap();
            }
            shard
        })
    }
}

#[test]
fn size_retention_deletes_the_oldest_segments_and_moves_queue_starts() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().to_path_buf();
    let kept = run(move || async move {
        // Filled without a size bound: with one, retention runs at each rollover.
        fill(100)(config(&p)).await.close().await.unwrap();
        let cfg = ShardConfig { retention_bytes: Some(2 << 20), ..config(&p) };
        let shard = open_with(cfg, &[]).await;
        let before = shard.segment_bases();
        assert!(before.len() >= 5, "{before:?}");
        let deleted = shard.apply_retention().await.unwrap();
        let after = shard.segment_bases();
        assert_eq!(deleted, before.len() - after.len());
        assert!(after.len() <= 2 && after.len() < before.len(), "log trimmed to the size bound: {after:?}");
        assert_eq!(after.last(), before.last(), "the active segment is kept");
        for q in [1u32, 2] {
            let (start, end) = shard.offsets(QueueId(q)).unwrap();
            assert!(start > 0 && end == 50, "queue {q}: [{start}, {end})");
            let err = shard.read(QueueId(q), start - 1, 1, ReadWait::No).await.unwrap_err();
            assert!(matches!(err, StorageError::OffsetOutOfRange { .. }));
            let got = read_all(&shard, QueueId(q), start).await;
            assert_eq!(got.len() as u64, end - start);
            assert_eq!(got[0].1, value(q, start * 2 + u64::from(q - 1), 50_000));
        }
        let kept = (shard.offsets(QueueId(1)).unwrap(), shard.offsets(QueueId(2)).unwrap());
        shard.close().await.unwrap();
        assert!(std::fs::read_dir(p.join("index").join("0000000001")).unwrap().count() > 0);
        kept
    });
    let p = dir.path().to_path_buf();
    run(move || async move {
        let shard = open_with(config(&p), &[]).await;
        let now = (shard.offsets(QueueId(1)).unwrap(), shard.offsets(QueueId(2)).unwrap());
        assert_eq!(now, kept, "queue starts survive a restart");
        for q in [1u32, 2] {
            let (start, end) = shard.offsets(QueueId(q)).unwrap();
            assert_eq!(read_all(&shard, QueueId(q), start).await.len() as u64, end - start);
        }
        shard.close().await.unwrap();
    });
}

#[test]
fn age_retention_deletes_segments_older_than_the_limit_only() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().to_path_buf();
    run(move || async move {
        let cfg = ShardConfig { retention_age: Some(Duration::from_secs(3600)), ..config(&p) };
        let shard = fill(60)(cfg.clone()).await;
        assert_eq!(shard.apply_retention().await.unwrap(), 0, "nothing is an hour old yet");
        shard.close().await.unwrap();
        let young = ShardConfig { retention_age: Some(Duration::ZERO), ..cfg };
        let shard = open_with(young, &[]).await;
        let before = shard.segment_bases().len();
        let deleted = shard.apply_retention().await.unwrap();
        assert_eq!(deleted, before - 1, "every segment but the active one is past a zero age limit");
        assert_eq!(shard.offsets(QueueId(1)).unwrap().1, 30);
        let stats = shard.stats();
        assert_eq!(stats.segments_deleted + stats.segments_pooled, deleted as u64);
        let pool_max = ShardConfig::new("x").segment_pool_max;
        assert_eq!(stats.segments_pooled, deleted.min(pool_max) as u64, "the pool takes up to its bound");
        shard.close().await.unwrap();
    });
}

#[test]
fn retention_keeps_what_the_owner_still_needs() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().to_path_buf();
    run(move || async move {
        let cfg = ShardConfig { retention_bytes: Some(2 << 20), ..config(&p) };
        let shard = fill(20)(cfg).await;
        let needed = shard.entry(QueueId(1), 3).await.unwrap().position;
        shard.keep_from(needed);
        for i in 20..100u64 {
            let q = QueueId(1 + (i % 2) as u32);
            shard.append(q, &batch_of(&value(q.0, i, 50_000))).await.unwrap();
        }
        shard.apply_retention().await.unwrap();
        assert!(shard.offsets(QueueId(1)).unwrap().0 <= 3, "offset 3 of queue 1 is kept");
        shard.keep_from(LogPos(u64::MAX));
        // Retention may also run at a rollover: either pass may retire it.
        shard.apply_retention().await.unwrap();
        assert!(shard.offsets(QueueId(1)).unwrap().0 > 3, "without the floor it goes");
        shard.close().await.unwrap();
    });
}

#[test]
fn trimmed_queues_release_the_segments_below_them_and_their_starts_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().to_path_buf();
    let kept = run(move || async move {
        let shard = fill(100)(config(&p)).await;
        let err = shard.trim(QueueId(1), 51).unwrap_err();
        assert!(matches!(err, StorageError::OffsetOutOfRange { .. }), "past the end: {err}");
        assert_eq!(shard.trim(QueueId(1), 40).unwrap(), 40);
        assert_eq!(shard.trim(QueueId(1), 10).unwrap(), 40, "a start never moves back");
        let err = shard.read(QueueId(1), 39, 1, ReadWait::No).await.unwrap_err();
        assert!(matches!(err, StorageError::OffsetOutOfRange { .. }));
        let before = shard.segment_bases();
        assert_eq!(shard.apply_retention().await.unwrap(), 0, "nothing released, no bound: nothing retired");
        // Queue 2 still reads from 0: the owner releases only below it.
        let lowest = shard.entry(QueueId(2), 0).await.unwrap().position;
        shard.release_below(lowest);
        assert_eq!(shard.apply_retention().await.unwrap(), 0, "queue 2 holds the first segment");
        assert_eq!(shard.trim(QueueId(2), 45).unwrap(), 45);
        let lowest = shard.entry(QueueId(1), 40).await.unwrap().position;
        shard.release_below(lowest);
        let retired = shard.apply_retention().await.unwrap();
        let after = shard.segment_bases();
        assert!(retired > 0 && after.len() == before.len() - retired, "{before:?} -> {after:?}");
        assert!(after[0] <= lowest.0, "the segment holding a start is kept");
        assert_eq!(read_all(&shard, QueueId(1), 40).await.len(), 10);
        assert_eq!(read_all(&shard, QueueId(2), 45).await[0].1, value(2, 91, 50_000));
        let kept = (shard.offsets(QueueId(1)).unwrap(), shard.offsets(QueueId(2)).unwrap());
        shard.close().await.unwrap();
        kept
    });
    let p = dir.path().to_path_buf();
    run(move || async move {
        let shard = open_with(config(&p), &[]).await;
        assert_eq!((shard.offsets(QueueId(1)).unwrap(), shard.offsets(QueueId(2)).unwrap()), kept);
        shard.close().await.unwrap();
    });
}
