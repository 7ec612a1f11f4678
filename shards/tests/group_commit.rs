//! Concurrent appenders share fdatasyncs; every one gets its own offsets;
//! overlapping durable writes keep every acknowledged batch across a crash.

mod common;

use common::*;
use ringmq_shards::{QueueId, ShardConfig};
use std::collections::BTreeSet;

#[test]
fn concurrent_appenders_share_fdatasyncs_and_get_contiguous_distinct_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().to_path_buf();
    run(move || async move {
        let cfg = ShardConfig { segment_bytes: 8 << 20, ..config(&p) };
        let shard = open_with(cfg, &[1, 2]).await;
        let writers = 64u32;
        let per_writer = 20u64;
        let tasks: Vec<_> = (0..writers)
            .map(|w| {
                let shard = shard.clone();
                glommio::spawn_local(async move {
                    let q = QueueId(1 + w % 2);
                    let mut acked = Vec::new();
                    for i in 0..per_writer {
                        let v = value(w, i, 1024);
                        let a = shard.append(q, &batch_of(&v)).await.unwrap();
                        acked.push((q, a.base_offset, v));
                    }
                    acked
                })
            })
            .collect();
        let mut acked = Vec::new();
        for t in tasks {
            acked.extend(t.await);
        }
        let appends = u64::from(writers) * per_writer;
        let stats = shard.stats();
        assert_eq!(stats.appends, appends);
        assert!(stats.fsyncs * 8 <= appends, "expected far fewer fdatasyncs than appends: {stats:?}");
        for q in [1u32, 2] {
            let offsets: BTreeSet<u64> = acked.iter().filter(|(qq, _, _)| qq.0 == q).map(|(_, o, _)| *o).collect();
            let expected: BTreeSet<u64> = (0..appends / 2).collect();
            assert_eq!(offsets, expected, "queue {q}: offsets are distinct and contiguous");
            let stored = read_all(&shard, QueueId(q), 0).await;
            for (_, offset, v) in acked.iter().filter(|(qq, _, _)| qq.0 == q) {
                assert_eq!(&stored[*offset as usize].1, v, "each appender's record sits at its acknowledged offset");
            }
        }
        shard.close().await.unwrap();
    });
}

#[test]
fn a_crash_under_load_keeps_every_acknowledged_batch_without_duplicates() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().to_path_buf();
    let acked = run(move || async move {
        let shard = open_with(config(&p), &[1, 2]).await;
        let acked = AckLog::default();
        for w in 0..16u32 {
            glommio::spawn_local(write_until_failure(shard.clone(), w, 1 + w % 2, acked.clone())).detach();
        }
        glommio::timer::sleep(std::time::Duration::from_millis(300)).await;
        // Rounds are padded to their page end and written while the previous
        // one is in flight.
        assert!(shard.stats().overlapped_writes > 0, "durable writes overlapped: {:?}", shard.stats());
        // Returning ends the executor mid-flight, like a killed process.
        let acked = acked.borrow().clone();
        acked
    });
    assert!(acked.len() > 50, "the load ran: {} acked", acked.len());
    let p = dir.path().to_path_buf();
    run(move || async move {
        let shard = open_with(config(&p), &[]).await;
        for q in [1u32, 2] {
            let stored = read_all(&shard, QueueId(q), 0).await;
            let offsets: Vec<u64> = stored.iter().map(|(o, _)| *o).collect();
            assert_eq!(offsets, (0..stored.len() as u64).collect::<Vec<_>>(), "no gaps or duplicates in queue {q}");
            for (qq, offset, v) in acked.iter().filter(|(qq, _, _)| *qq == q) {
                let found = stored.get(*offset as usize).map(|(_, s)| s == v);
                assert_eq!(found, Some(true), "acknowledged batch at {qq}/{offset} survived");
            }
            let next = shard.append(QueueId(q), &batch_of(b"after the crash")).await.unwrap();
            assert_eq!(next.base_offset, stored.len() as u64, "appends go on from the recovered end");
        }
        shard.close().await.unwrap();
    });
}

#[test]
fn appends_blocked_by_backpressure_keep_their_arrival_order() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().to_path_buf();
    run(move || async move {
        let small = ShardConfig::small(&p);
        let cfg = ShardConfig { pending_bytes_max: small.round_bytes_max, ..small };
        let shard = open_with(cfg, &[1]).await;
        // Large and small batches alternate: while a large one waits for
        // pending bytes to drain, a small one would still fit.
        let tasks: Vec<_> = (0..120u64)
            .map(|i| {
                let shard = shard.clone();
                let len = if i % 2 == 0 { 100 << 10 } else { 512 };
                glommio::spawn_local(async move { shard.append(QueueId(1), &batch_of(&value(1, i, len))).await })
            })
            .collect();
        let mut offsets = Vec::new();
        for t in tasks {
            offsets.push(t.await.unwrap().base_offset);
        }
        assert!(shard.stats().backpressure_waits > 0, "the test must exercise back-pressure");
        assert_eq!(offsets, (0..120).collect::<Vec<u64>>(), "offsets follow arrival order");
        shard.close().await.unwrap();
    });
}

#[test]
fn the_shard_yields_its_core_to_the_kernel_only_while_durable_writes_are_in_flight() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().to_path_buf();
    run(move || async move {
        let shard = open_with(config(&p), &[1]).await;
        glommio::timer::sleep(std::time::Duration::from_millis(30)).await;
        assert_eq!(shard.stats().kernel_yields, 0, "no yields before any write");
        for i in 0..50 {
            shard.append(QueueId(1), &batch_of(&value(1, i, 512))).await.unwrap();
        }
        let after_writes = shard.stats().kernel_yields;
        assert!(after_writes > 0, "yields while writes were in flight: {:?}", shard.stats());
        glommio::timer::sleep(std::time::Duration::from_millis(30)).await;
        assert_eq!(shard.stats().kernel_yields, after_writes, "no yields once every write is done");
        shard.close().await.unwrap();
    });
    let p = dir.path().to_path_buf();
    run(move || async move {
        let cfg = ShardConfig { completion_yield: std::time::Duration::ZERO, ..config(&p) };
        let shard = open_with(cfg, &[1]).await;
        for i in 50..100 {
            shard.append(QueueId(1), &batch_of(&value(1, i, 512))).await.unwrap();
        }
        assert_eq!(shard.stats().kernel_yields, 0, "completion_yield 0 never yields");
        shard.close().await.unwrap();
    });
}
