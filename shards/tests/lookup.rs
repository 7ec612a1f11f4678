//! Lookup by message id and key: from memory, from written chunks, after a
//! clean restart and after a crash (rebuilt by the recovery scan), and gone
//! with the segments retention deletes.

mod common;

use common::*;
use ringmq_shards::batch::BatchBuilder;
use ringmq_shards::lookup::{id_hash, key_hash};
use ringmq_shards::{QueueId, Record, Shard, ShardConfig};

fn id(n: u64) -> [u8; 16] {
    let mut id = [0u8; 16];
    id[..8].copy_from_slice(&n.to_le_bytes());
    id[8..].copy_from_slice(b"lookupid");
    id
}

/// Message n: queue 1 + n % 2, key "key-{n % 10}", 40 KiB value.
async fn append(shard: &Shard, n: u64) -> (QueueId, u64) {
    let q = QueueId(1 + (n % 2) as u32);
    let key = format!("key-{}", n % 10);
    let value = value(q.0, n, 40_000);
    let mut b = BatchBuilder::new(1_700_000_000_000);
    b.push(&Record { message_id: id(n), key: Some(key.as_bytes()), value: Some(&value), ..Record::default() });
    (q, shard.append(q, &b.finish()).await.unwrap().base_offset)
}

async fn assert_found(shard: &Shard, placed: &[(QueueId, u64)], which: impl Fn(u64) -> bool) {
    for (n, at) in placed.iter().enumerate() {
        let got = shard.lookup(id_hash(&id(n as u64))).await.unwrap();
        assert_eq!(got.contains(at), which(n as u64), "message {n} at {at:?}: {got:?}");
    }
    let with_key3: Vec<(QueueId, u64)> =
        (0..placed.len()).filter(|n| n % 10 == 3 && which(*n as u64)).map(|n| placed[n]).collect();
    let got = shard.lookup(key_hash(b"key-3")).await.unwrap();
    assert_eq!(got, with_key3, "every stored message with key-3, nothing else");
}

#[test]
fn messages_are_found_by_id_and_key_from_memory_chunks_restarts_and_crashes() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().to_path_buf();
    let placed = run(move || async move {
        let shard = open_with(config(&p), &[1, 2]).await;
        let mut placed = Vec::new();
        for n in 0..40 {
            placed.push(append(&shard, n).await);
        }
        assert_found(&shard, &placed, |_| true).await;
        shard.checkpoint().await.unwrap();
        assert!(std::fs::read_dir(p.join("lookup")).unwrap().count() >= 1, "a chunk was written");
        for n in 40..60 {
            placed.push(append(&shard, n).await);
        }
        assert_found(&shard, &placed, |_| true).await;
        shard.close().await.unwrap();
        placed
    });
    let p = dir.path().to_path_buf();
    let placed = run(move || async move {
        let shard = open_with(config(&p), &[]).await;
        let mut placed = placed;
        assert_found(&shard, &placed, |_| true).await;
        for n in 60..80 {
            placed.push(append(&shard, n).await);
        }
        // No close: the executor dies here; the tail comes back from the log.
        placed
    });
    let p = dir.path().to_path_buf();
    run(move || async move {
        let shard = open_with(config(&p), &[]).await;
        assert_found(&shard, &placed, |_| true).await;
        shard.close().await.unwrap();
    });
}

#[test]
fn retention_removes_lookup_entries_with_the_segments() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().to_path_buf();
    run(move || async move {
        let cfg = ShardConfig { retention_bytes: Some(2 << 20), ..config(&p) };
        let shard = open_with(cfg, &[1, 2]).await;
        let mut placed = Vec::new();
        for n in 0..150 {
            placed.push(append(&shard, n).await);
            if n % 25 == 0 {
                shard.checkpoint().await.unwrap();
            }
        }
        shard.checkpoint().await.unwrap();
        // Retention also ran at rollovers: this pass may find nothing more.
        shard.apply_retention().await.unwrap();
        let stats = shard.stats();
        assert!(stats.segments_deleted + stats.segments_pooled > 0, "segments were retired");
        let starts = [shard.offsets(QueueId(1)).unwrap().0, shard.offsets(QueueId(2)).unwrap().0];
        let kept = |n: u64| placed[n as usize].1 >= starts[(n % 2) as usize];
        // Entries of deleted chunks are gone; a chunk that straddles the new
        // log start may still name removed offsets, which callers see as
        // below the queue's start.
        for (n, at) in placed.iter().enumerate() {
            let got = shard.lookup(id_hash(&id(n as u64))).await.unwrap();
            if kept(n as u64) {
                assert!(got.contains(at), "kept message {n} is found");
            } else if let Some((q, o)) = got.first() {
                assert!(*o < starts[(q.0 - 1) as usize], "a removed message is only named below its queue's start");
            }
        }
        let mut gone = 0;
        for n in (0..150u64).filter(|n| !kept(*n)) {
            gone += usize::from(shard.lookup(id_hash(&id(n))).await.unwrap().is_empty());
        }
        assert!(gone > 0, "removed messages' entries went with their chunks");
        let chunks = std::fs::read_dir(p.join("lookup")).unwrap().count();
        assert!(chunks < 7, "chunks of deleted segments are deleted: {chunks} left");
        shard.close().await.unwrap();
    });
}
