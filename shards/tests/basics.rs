//! Appends, reads, restarts and bad input on one shard.

mod common;

use common::*;
use ringmq_shards::{FormatError, QueueId, ReadWait, StorageError};
use std::time::{Duration, Instant};

#[test]
fn appended_batches_read_back_in_order_after_a_clean_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    let p = path.clone();
    run(move || async move {
        let shard = open_with(config(&p), &[1, 2]).await;
        for i in 0..50u64 {
            let q = QueueId(1 + (i % 2) as u32);
            let a = shard.append(q, &batch_with(&[&value(q.0, i, 100), &value(q.0, i + 1000, 10)])).await.unwrap();
            assert_eq!(a.base_offset, (i / 2) * 2, "offsets are per queue and count records");
            assert_eq!(a.record_count, 2);
        }
        shard.close().await.unwrap();
    });
    run(move || async move {
        let shard = open_with(config(&path), &[]).await;
        assert_eq!(shard.queues(), vec![QueueId(1), QueueId(2)]);
        for q in [1u32, 2] {
            let got = read_all(&shard, QueueId(q), 0).await;
            assert_eq!(got.len(), 50);
            let expected: Vec<u64> = (0..50).collect();
            assert_eq!(got.iter().map(|(o, _)| *o).collect::<Vec<_>>(), expected);
            let seqs: Vec<u64> = (0..50).filter(|i| i % 2 == u64::from(q - 1)).collect();
            for (k, i) in seqs.iter().enumerate() {
                assert_eq!(got[2 * k].1, value(q, *i, 100));
                assert_eq!(got[2 * k + 1].1, value(q, *i + 1000, 10));
            }
        }
        let a = shard.append(QueueId(1), &batch_of(b"after restart")).await.unwrap();
        assert_eq!(a.base_offset, 50, "appends continue after the last offset");
        shard.close().await.unwrap();
    });
}

#[test]
fn bad_input_gets_typed_errors_and_stored_data_stays_readable() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().to_path_buf();
    run(move || async move {
        let shard = open_with(config(&p), &[1]).await;
        shard.append(QueueId(1), &batch_of(b"kept")).await.unwrap();

        let good = batch_of(b"payload");
        let mut bad_crc = good.clone();
        *bad_crc.last_mut().unwrap() ^= 1;
        assert!(matches!(
            shard.append(QueueId(1), &bad_crc).await,
            Err(StorageError::Format(FormatError::CrcMismatch { .. }))
        ));
        assert!(matches!(
            shard.append(QueueId(1), &good[..good.len() - 3]).await,
            Err(StorageError::Format(FormatError::LengthMismatch { .. }))
        ));
        assert!(matches!(
            shard.append(QueueId(1), &good[..12]).await,
            Err(StorageError::Format(FormatError::BatchTooShort { .. }))
        ));
        let huge = batch_of(&vec![0u8; 300 << 10]);
        assert!(matches!(
            shard.append(QueueId(1), &huge).await,
            Err(StorageError::Format(FormatError::BatchTooLarge { .. }))
        ));
        assert!(matches!(shard.append(QueueId(9), &good).await, Err(StorageError::UnknownQueue(9))));
        assert!(matches!(shard.read(QueueId(9), 0, 1024, ReadWait::No).await, Err(StorageError::UnknownQueue(9))));
        assert!(matches!(
            shard.read(QueueId(1), 5, 1024, ReadWait::No).await,
            Err(StorageError::OffsetOutOfRange { offset: 5, start: 0, end: 1, .. })
        ));
        assert!(matches!(shard.create_queue(QueueId(1), None).await, Err(StorageError::QueueExists(1))));
        let err = shard.append(QueueId(1), &bad_crc).await.unwrap_err().to_string();
        assert!(err.contains("CRC mismatch"), "message says what is wrong: {err}");

        assert_eq!(read_all(&shard, QueueId(1), 0).await, vec![(0, b"kept".to_vec())]);
        assert_eq!(shard.append(QueueId(1), &good).await.unwrap().base_offset, 1);
        shard.close().await.unwrap();
    });
}

#[test]
fn long_poll_parks_until_data_arrives_or_the_wait_ends() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().to_path_buf();
    run(move || async move {
        let shard = open_with(config(&p), &[1]).await;
        let empty = shard.read(QueueId(1), 0, 1024, ReadWait::No).await.unwrap();
        assert!(empty.bytes.is_empty());
        let waited = Instant::now();
        let timed_out = shard.read(QueueId(1), 0, 1024, ReadWait::Upto(Duration::from_millis(50))).await.unwrap();
        assert!(timed_out.bytes.is_empty() && waited.elapsed() >= Duration::from_millis(50));

        let reader = shard.clone();
        let parked = glommio::spawn_local(async move {
            reader.read(QueueId(1), 0, 1024, ReadWait::Upto(Duration::from_secs(60))).await
        });
        glommio::timer::sleep(Duration::from_millis(20)).await;
        let started = Instant::now();
        shard.append(QueueId(1), &batch_of(b"wake up")).await.unwrap();
        let got = parked.await.unwrap();
        assert_eq!(records(&got.bytes), vec![(0, b"wake up".to_vec())]);
        assert!(started.elapsed() < Duration::from_secs(30), "woken by the append, not by the 60 s limit");
        shard.close().await.unwrap();
    });
}

#[test]
fn a_durable_write_acknowledges_its_appends_before_it_wakes_parked_reads() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().to_path_buf();
    run(move || async move {
        let shard = open_with(config(&p), &[1]).await;
        let order = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
        let (reader, read_order) = (shard.clone(), order.clone());
        let parked = glommio::spawn_local(async move {
            let got = reader.read(QueueId(1), 0, 1024, ReadWait::Upto(Duration::from_secs(60))).await;
            read_order.borrow_mut().push("read");
            got
        });
        glommio::timer::sleep(Duration::from_millis(20)).await;
        let (writer, ack_order) = (shard.clone(), order.clone());
        let appended = glommio::spawn_local(async move {
            let a = writer.append(QueueId(1), &batch_of(b"first")).await;
            ack_order.borrow_mut().push("ack");
            a
        });
        appended.await.unwrap();
        assert_eq!(records(&parked.await.unwrap().bytes), vec![(0, b"first".to_vec())]);
        // The ack lets a producer send its next batch; the fetch reply can follow.
        assert_eq!(*order.borrow(), ["ack", "read"]);
        shard.close().await.unwrap();
    });
}

#[test]
fn async_policy_acknowledges_before_sync_and_data_becomes_readable() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().to_path_buf();
    run(move || async move {
        let shard = open_with(config(&p), &[]).await;
        shard.create_queue(QueueId(1), Some(ringmq_shards::FlushPolicy::Async)).await.unwrap();
        for i in 0..20u64 {
            shard.append(QueueId(1), &batch_of(&value(1, i, 64))).await.unwrap();
        }
        let got = shard.read(QueueId(1), 0, 1 << 20, ReadWait::Upto(Duration::from_secs(5))).await.unwrap();
        assert!(!got.bytes.is_empty(), "async appends become readable after the flusher writes them");
        shard.close().await.unwrap();
        let stats = shard.stats();
        assert!(stats.fsyncs >= 1, "close syncs what async appends left unsynced");
        assert!(stats.fsyncs < 20, "async appends do not each wait for an fdatasync: {stats:?}");
    });
}

#[test]
fn segments_roll_over_into_preallocated_zero_filled_files() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().to_path_buf();
    let seg_bytes = 1u64 << 20;
    let (bases, shard_dir) = run(move || async move {
        let shard = open_with(config(&p), &[1]).await;
        for i in 0..40u64 {
            shard.append(QueueId(1), &batch_of(&value(1, i, 100 << 10))).await.unwrap();
        }
        let bases = shard.segment_bases();
        let stats = shard.stats();
        assert!(stats.segments_created >= 3, "{stats:?}");
        glommio::timer::sleep(Duration::from_millis(200)).await;
        shard.close().await.unwrap();
        (bases, p)
    });
    assert!(bases.len() >= 4, "40 x 100 KiB fill at least 4 segments of 1 MiB: {bases:?}");
    for (i, base) in bases.iter().enumerate() {
        assert_eq!(*base, i as u64 * seg_bytes, "segments are contiguous, named by base position");
        let path = shard_dir.join(ringmq_shards::segment_name(*base, ringmq_shards::batch::Generation::WIRE));
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!(meta.len(), seg_bytes, "segments are created at full size");
    }
    // The spare segment made ahead of need is allocated and zero-filled.
    let mut names: Vec<_> =
        std::fs::read_dir(&shard_dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    names.sort();
    let spare = names.iter().filter_map(|n| ringmq_shards::parse_segment_name(n)).map(|(base, _)| base).max().unwrap();
    assert!(spare > *bases.last().unwrap(), "a spare segment was preallocated: {names:?}");
    let bytes =
        std::fs::read(shard_dir.join(ringmq_shards::segment_name(spare, ringmq_shards::batch::Generation::WIRE)))
            .unwrap();
    assert_eq!(bytes.len() as u64, seg_bytes);
    assert!(bytes.iter().all(|b| *b == 0), "the spare segment is zero-filled");
    let out = std::process::Command::new("du")
        .arg("-B1")
        .arg(shard_dir.join(ringmq_shards::segment_name(spare, ringmq_shards::batch::Generation::WIRE)))
        .output()
        .unwrap();
    let used: u64 = String::from_utf8_lossy(&out.stdout).split_whitespace().next().unwrap().parse().unwrap();
    assert!(used >= seg_bytes, "the spare segment's blocks are allocated, not sparse: {used}");
}

#[test]
fn index_files_are_preallocated_ahead_of_appends_not_by_checkpoints() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    let p = path.clone();
    let queue_dir = path.join("index").join("0000000001");
    let idx = |base: u64| queue_dir.join(format!("{base:020}.idx"));
    let (first, second) = (idx(0), idx(1024));
    run(move || async move {
        // 1024-entry files: past offset 512 the file at 1024 is wanted.
        let shard = open_with(config(&p), &[1]).await;
        for i in 0..600u64 {
            shard.append(QueueId(1), &batch_of(&value(1, i, 20))).await.unwrap();
        }
        wait_until(Duration::from_secs(10), || shard.stats().index_files_created >= 2).await;
        let stats = shard.stats();
        assert_eq!(stats.checkpoints, 0, "600 entries are below the checkpoint bound");
        assert_eq!(stats.index_files_created, 2, "the file holding offset 600 and the next one");
        for file in [&first, &second] {
            assert_eq!(std::fs::metadata(file).unwrap().len(), 1024 * 16, "{} is preallocated", file.display());
        }
        shard.close().await.unwrap();
        assert_eq!(shard.stats().index_files_created, 2, "the closing checkpoint found its file ready");
    });
    run(move || async move {
        let shard = open_with(config(&path), &[]).await;
        let got = read_all(&shard, QueueId(1), 0).await;
        assert_eq!(got.len(), 600);
        assert_eq!(got[599].1, value(1, 599, 20));
        shard.close().await.unwrap();
    });
}

#[test]
fn an_index_file_that_cannot_be_created_is_retried_while_appends_go_on() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    let p = path.clone();
    let queue_dir = path.join("index").join("0000000001");
    let q = queue_dir.clone();
    run(move || async move {
        let shard = open_with(config(&p), &[1]).await;
        // Creating files in a missing directory fails (ENOENT) until it is back.
        std::fs::remove_dir_all(&q).unwrap();
        for i in 0..600u64 {
            shard.append(QueueId(1), &batch_of(&value(1, i, 20))).await.unwrap();
        }
        glommio::timer::sleep(Duration::from_millis(300)).await;
        assert_eq!(shard.stats().index_files_created, 0, "the directory is gone");
        assert_eq!(read_all(&shard, QueueId(1), 0).await.len(), 600, "reads are served from memory meanwhile");
        std::fs::create_dir(&q).unwrap();
        wait_until(Duration::from_secs(10), || shard.stats().index_files_created >= 2).await;
        assert_eq!(shard.stats().index_files_created, 2, "the retry created both files");
        shard.append(QueueId(1), &batch_of(b"after")).await.unwrap();
        shard.close().await.unwrap();
    });
    run(move || async move {
        let shard = open_with(config(&path), &[]).await;
        let got = read_all(&shard, QueueId(1), 0).await;
        assert_eq!(got.len(), 601);
        assert_eq!(got[600].1, b"after".to_vec());
        shard.close().await.unwrap();
    });
}
