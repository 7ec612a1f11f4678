//! The user-space cache: reads after eviction come from disk and equal the
//! bytes a cached read returned.

mod common;

use common::*;
use ringmq_shards::{QueueId, ReadWait, ShardConfig};

#[test]
fn a_read_after_eviction_returns_the_same_bytes_as_a_cached_read() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().to_path_buf();
    run(move || async move {
        // 4 chunks of 64 KiB: 2 MiB of data cannot stay cached.
        let cfg = ShardConfig { cache_bytes: 256 << 10, segment_bytes: 4 << 20, ..config(&p) };
        let shard = open_with(cfg, &[1]).await;
        let mut cached = Vec::new();
        for i in 0..256u64 {
            shard.append(QueueId(1), &batch_with(&[&value(1, i, 8000)])).await.unwrap();
            // Read right after the append: the tail comes from memory.
            cached.push(shard.read(QueueId(1), i, 1, ReadWait::No).await.unwrap());
        }
        let tail = shard.stats();
        assert_eq!(tail.cache_misses, 0, "reads at the tail never touch the disk: {tail:?}");
        assert!(tail.cache_evictions > 0, "{tail:?}");
        for (i, expected) in cached.iter().enumerate() {
            let again = shard.read(QueueId(1), i as u64, 1, ReadWait::No).await.unwrap();
            let first_diff = again.bytes.iter().zip(&expected.bytes).position(|(a, b)| a != b);
            assert!(
                again.bytes == expected.bytes,
                "offset {i}: {} vs {} bytes, first difference at {first_diff:?}",
                again.bytes.len(),
                expected.bytes.len()
            );
        }
        let after = shard.stats();
        assert!(after.cache_misses > 0, "old data was evicted and read back with O_DIRECT: {after:?}");
        assert!(after.cache_readahead > 0, "sequential misses read ahead: {after:?}");
        assert!(after.cache_misses < 256 / 2, "read-ahead saves misses: {after:?}");
        shard.close().await.unwrap();
    });
}

#[test]
fn old_index_pages_are_read_back_from_disk_after_a_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().to_path_buf();
    run(move || async move {
        let shard = open_with(config(&p), &[1]).await;
        for i in 0..3000u64 {
            shard.append(QueueId(1), &batch_with(&[&value(1, i, 16)])).await.unwrap();
        }
        let before = read_all(&shard, QueueId(1), 0).await;
        shard.checkpoint().await.unwrap();
        let after = read_all(&shard, QueueId(1), 0).await;
        assert_eq!(before, after);
        assert!(shard.stats().index_page_reads > 0, "entries below the checkpoint come from index files");
        let e = shard.entry(QueueId(1), 5).await.unwrap();
        assert_eq!(e.tag_hash, ringmq_shards::record::tag_hash(b"t"));
        shard.close().await.unwrap();
    });
}

#[test]
fn a_checkpoint_of_several_background_writes_reads_back_whole_after_a_restart() {
    // 20,000 entries of one queue: 320 KB of index pages in one index file and
    // a 400 KB lookup chunk, each written in several 128 KiB writes.
    let cfg = |p: &std::path::Path| ShardConfig {
        index_file_entries: 1 << 16,
        index_mem_entries_max: 1 << 20,
        segment_bytes: 16 << 20,
        ..config(p)
    };
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().to_path_buf();
    let before = run(move || async move {
        let shard = open_with(cfg(&p), &[1]).await;
        for b in 0..200u64 {
            let values: Vec<Vec<u8>> = (0..100).map(|i| value(1, b * 100 + i, 16)).collect();
            let refs: Vec<&[u8]> = values.iter().map(Vec::as_slice).collect();
            shard.append(QueueId(1), &batch_with(&refs)).await.unwrap();
        }
        shard.checkpoint().await.unwrap();
        let before = read_all(&shard, QueueId(1), 0).await;
        shard.close().await.unwrap();
        before
    });
    assert_eq!(before.len(), 20_000);
    let p = dir.path().to_path_buf();
    run(move || async move {
        let shard = open_with(cfg(&p), &[]).await;
        assert!(read_all(&shard, QueueId(1), 0).await == before, "every record reads back after the restart");
        assert!(shard.stats().index_page_reads > 0, "the entries came from the index file");
        let last = shard.entry(QueueId(1), 19_999).await.unwrap();
        assert_eq!(last.tag_hash, ringmq_shards::record::tag_hash(b"t"), "the last slice's last entry");
        shard.close().await.unwrap();
    });
}

#[test]
fn the_tail_reads_back_as_written_while_old_reads_churn_a_tiny_cache() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().to_path_buf();
    run(move || async move {
        // 3 chunks of 64 KiB. Each round is copied into the cache while it is
        // written, before its chunk is pinned; the reader of old offsets
        // evicts chunks all the while.
        let cfg = ShardConfig { cache_bytes: 192 << 10, segment_bytes: 4 << 20, ..config(&p) };
        let shard = open_with(cfg, &[1]).await;
        let done = std::rc::Rc::new(std::cell::Cell::new(false));
        let churn = glommio::spawn_local({
            let (shard, done) = (shard.clone(), done.clone());
            async move {
                let mut rng = 0x9e37_79b9_7f4a_7c15u64;
                let mut reads = 0u64;
                while !done.get() {
                    let (_, end) = shard.offsets(QueueId(1)).unwrap();
                    if end > 0 {
                        rng ^= rng << 13;
                        rng ^= rng >> 7;
                        rng ^= rng << 17;
                        shard.read(QueueId(1), rng % end, 1, ReadWait::No).await.unwrap();
                        reads += 1;
                    }
                    glommio::yield_if_needed().await;
                    futures_lite::future::yield_now().await;
                }
                reads
            }
        });
        for i in 0..300u64 {
            let v = value(1, i, 9000);
            shard.append(QueueId(1), &batch_with(&[&v])).await.unwrap();
            assert_eq!(read_all(&shard, QueueId(1), i).await, vec![(i, v)], "offset {i} right after its append");
        }
        done.set(true);
        let reads = churn.await;
        let stats = shard.stats();
        assert!(reads > 0 && stats.cache_misses > 0 && stats.cache_evictions > 0, "{reads} reads: {stats:?}");
        shard.close().await.unwrap();
    });
}
