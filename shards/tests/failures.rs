//! Injected I/O failures: a failed write or fdatasync fails the shard (no
//! append is acknowledged that is not durable), a failed read fails only that
//! read, and a restart recovers every acknowledged batch.

mod common;

use common::*;
use ringmq_shards::{QueueId, ReadWait, StorageError};

fn fails_shard_then_recovers(inject: fn(&ringmq_shards::FailureProbes)) {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().to_path_buf();
    run(move || async move {
        let shard = open_with(config(&p), &[1]).await;
        for i in 0..10u64 {
            shard.append(QueueId(1), &batch_of(&value(1, i, 500))).await.unwrap();
        }
        inject(shard.probes());
        let err = shard.append(QueueId(1), &batch_of(b"lost")).await.unwrap_err();
        assert!(matches!(err, StorageError::Failed(_)), "the waiting append learns of the failure: {err}");
        let err = shard.append(QueueId(1), &batch_of(b"refused")).await.unwrap_err();
        assert!(matches!(err, StorageError::Failed(_)), "later appends are refused: {err}");
        assert!(err.to_string().contains("restart"), "the message says what to do: {err}");
        assert_eq!(read_all(&shard, QueueId(1), 0).await.len(), 10, "acknowledged data stays readable");
        assert!(shard.close().await.is_err());
    });
    let p = dir.path().to_path_buf();
    run(move || async move {
        let shard = open_with(config(&p), &[]).await;
        let got = read_all(&shard, QueueId(1), 0).await;
        let want: Vec<_> = (0..10u64).map(|i| (i, value(1, i, 500))).collect();
        assert!(got.len() >= 10 && got[..10] == want[..], "every acknowledged batch survives the restart");
        let next = got.len() as u64;
        assert_eq!(shard.append(QueueId(1), &batch_of(b"again")).await.unwrap().base_offset, next);
        shard.close().await.unwrap();
    });
}

#[test]
fn a_failed_write_fails_the_shard_and_a_restart_recovers_acked_data() {
    fails_shard_then_recovers(|p| p.fail_writes(1));
}

#[test]
fn a_failed_fdatasync_fails_the_shard_and_a_restart_recovers_acked_data() {
    fails_shard_then_recovers(|p| p.fail_syncs(1));
}

#[test]
fn a_failed_read_fails_only_that_read() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().to_path_buf();
    run(move || async move {
        let cfg = ringmq_shards::ShardConfig { cache_bytes: 128 << 10, ..config(&p) };
        let shard = open_with(cfg, &[1]).await;
        for i in 0..40u64 {
            shard.append(QueueId(1), &batch_of(&value(1, i, 8000))).await.unwrap();
        }
        shard.probes().fail_reads(1);
        let err = shard.read(QueueId(1), 0, 1, ReadWait::No).await.unwrap_err();
        assert!(matches!(err, StorageError::Io { .. }), "{err}");
        assert_eq!(read_all(&shard, QueueId(1), 0).await.len(), 40);
        shard.append(QueueId(1), &batch_of(b"still writable")).await.unwrap();
        shard.close().await.unwrap();
    });
}

#[test]
fn a_failed_write_among_overlapping_writes_fails_every_waiter_and_a_restart_recovers_acked_data() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().to_path_buf();
    let acked = run(move || async move {
        let shard = open_with(config(&p), &[1]).await;
        let acked = AckLog::default();
        let writers: Vec<_> =
            (0..16u32).map(|w| glommio::spawn_local(write_until_failure(shard.clone(), w, 1, acked.clone()))).collect();
        let started = std::time::Instant::now();
        while shard.stats().overlapped_writes < 3 {
            assert!(started.elapsed().as_secs() < 30, "durable writes never overlapped: {:?}", shard.stats());
            glommio::timer::sleep(std::time::Duration::from_millis(5)).await;
        }
        shard.probes().fail_writes(1);
        for w in writers {
            let err = w.await;
            assert!(matches!(err, StorageError::Failed(_)), "every writer learns of the failure: {err}");
        }
        assert!(shard.close().await.is_err());
        let acked = acked.borrow().clone();
        acked
    });
    let p = dir.path().to_path_buf();
    run(move || async move {
        let shard = open_with(config(&p), &[]).await;
        let stored = read_all(&shard, QueueId(1), 0).await;
        let offsets: Vec<u64> = stored.iter().map(|(o, _)| *o).collect();
        assert_eq!(offsets, (0..stored.len() as u64).collect::<Vec<_>>(), "no gaps or duplicates");
        for (_, offset, v) in &acked {
            assert_eq!(stored.get(*offset as usize).map(|(_, s)| s == v), Some(true), "acked batch {offset} survived");
        }
        shard.close().await.unwrap();
    });
}
