//! A queue copied batch by batch from another log (a queue moving between
//! broker groups) keeps its offsets from a start above 0: on the copy, on
//! its follower, and through a crash of both; a batch out of order is
//! refused with nothing stored, and a producer's retry of a copied batch is
//! still recognised.

mod common;

use common::*;
use ringmq_shards::batch::{self, BatchBuilder};
use ringmq_shards::{QueueId, ReadWait, Record, Shard, StorageError};

const SOURCE: QueueId = QueueId(1);
const COPY: QueueId = QueueId(7);
/// Records per batch, and where the source's start is moved (inside a
/// batch, and not on an index page's boundary).
const PER_BATCH: u64 = 3;
const START: u64 = 301;

/// The source's client batches, in order, each record with a message id
/// (a batch is recognised again by its first one).
fn produced(n: u64) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| {
            let mut b = BatchBuilder::new(1_700_000_000_000);
            for seq in i * PER_BATCH..(i + 1) * PER_BATCH {
                let mut message_id = [0; 16];
                message_id[..8].copy_from_slice(&(seq + 1).to_le_bytes());
                b.push(&Record { message_id, value: Some(&value(1, seq, 40)), ..Record::default() });
            }
            b.finish()
        })
        .collect()
}

/// The source's stored batches from `offset` on, as a reader gets them.
async fn batches_from(source: &Shard, mut offset: u64) -> Vec<Vec<u8>> {
    let (_, end) = source.offsets(SOURCE).unwrap();
    let mut out = Vec::new();
    while offset < end {
        let read = source.read(SOURCE, offset, 16 << 10, ReadWait::No).await.unwrap();
        out.extend(batch::split(&read.bytes).map(<[u8]>::to_vec));
        offset = read.next_offset;
    }
    out
}

#[test]
fn a_copied_queue_keeps_its_offsets_on_its_follower_and_through_a_crash() {
    let (a, b, c) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (pa, pb, pc) = (a.path().to_path_buf(), b.path().to_path_buf(), c.path().to_path_buf());
    let batches = produced(200);
    let last = batches.last().unwrap().clone();
    let expected = run(move || async move {
        let source = open_with(config(&pa), &[SOURCE.0]).await;
        for b in &batches {
            source.append(SOURCE, b).await.unwrap();
        }
        assert_eq!(source.trim(SOURCE, START).unwrap(), START);
        let copied = batches_from(&source, START).await;
        let first = batch::verify_stored(&copied[0]).unwrap().base_offset;
        assert!(first < START && START < first + PER_BATCH, "the first batch holds the start");

        let copy = open_with(config(&pb), &[COPY.0]).await;
        let follower = Shard::open_mirror(config(&pc), None).await.unwrap();
        let begun = copy.append_copied(COPY, &copied[0]).await.unwrap();
        assert_eq!(begun.base_offset, first, "the first batch begins the queue at its offset");
        // Out of order: refused, nothing stored.
        let err = copy.append_copied(COPY, &copied[2]).await.unwrap_err();
        assert!(
            matches!(err, StorageError::NotNextOffset { offset, next, .. } if offset == first + 2 * PER_BATCH && next == first + PER_BATCH),
            "{err}"
        );
        for (i, b) in copied.iter().enumerate().skip(1) {
            copy.append_copied(COPY, b).await.unwrap();
            if i == 5 {
                // Its index pages, the empty entries below its start too, reach the disk.
                copy.checkpoint().await.unwrap();
            }
        }
        assert_eq!(copy.trim(COPY, START).unwrap(), START);
        assert_eq!(copy.offsets(COPY).unwrap(), source.offsets(SOURCE).unwrap());
        let expected = read_all(&source, SOURCE, START).await;
        assert_eq!(read_all(&copy, COPY, START).await, expected);

        // The producer retries its last batch after the move: recognised where the copy holds it.
        let retried = copy.append(COPY, &last).await.unwrap();
        assert!(retried.duplicate, "{retried:?}");
        assert_eq!(retried.base_offset, 199 * PER_BATCH);

        catch_up(&copy, &follower).await;
        assert_eq!(follower.offsets(COPY).unwrap().1, copy.offsets(COPY).unwrap().1);
        assert_eq!(read_all(&follower, COPY, START).await, expected);
        source.close().await.unwrap();
        // The copy and its follower crash here: no checkpoint, recovery reads their logs.
        expected
    });
    let (pb, pc) = (b.path().to_path_buf(), c.path().to_path_buf());
    run(move || async move {
        let copy = open_with(config(&pb), &[]).await;
        let follower = Shard::open_mirror(config(&pc), None).await.unwrap();
        let end = 200 * PER_BATCH;
        assert_eq!(copy.offsets(COPY).unwrap().1, end, "the copy's offsets come back from its log");
        assert_eq!(follower.offsets(COPY).unwrap().1, end);
        assert_eq!(read_all(&copy, COPY, START).await, expected);
        assert_eq!(read_all(&follower, COPY, START).await, expected);
        let next = copy.append(COPY, &batch_of(b"after the move")).await.unwrap();
        assert_eq!(next.base_offset, end, "appends go on at the source's offsets");
        copy.close().await.unwrap();
        follower.close().await.unwrap();
    });
}

#[test]
fn a_frozen_queue_refuses_appends_and_tells_its_final_end_until_it_thaws() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    run(move || async move {
        let shard = open_with(config(&path), &[SOURCE.0, COPY.0]).await;
        let batches = produced(3);
        shard.append(SOURCE, &batches[0]).await.unwrap();
        assert_eq!(shard.frozen_end(SOURCE).unwrap(), None);
        // Refused where an append is placed, not where it is called: one
        // made before the freeze and placed after it is refused too.
        let queued = shard.append(SOURCE, &batches[1]);
        shard.freeze_queues([SOURCE].into_iter().collect());
        let refused = queued.await.unwrap_err();
        assert!(matches!(refused, StorageError::QueueFrozen(1)), "{refused}");
        assert!(matches!(shard.append_copied(SOURCE, &batches[1]).await, Err(StorageError::QueueFrozen(1))));
        assert_eq!(shard.frozen_end(SOURCE).unwrap(), Some(PER_BATCH), "nothing passed the end");
        assert_eq!(shard.next_offset(SOURCE).unwrap(), PER_BATCH);
        shard.append(COPY, &batches[2]).await.expect("other queues go on");
        shard.freeze_queues(Default::default());
        assert_eq!(shard.append(SOURCE, &batches[1]).await.unwrap().base_offset, PER_BATCH, "thawed");
        assert_eq!(shard.frozen_end(SOURCE).unwrap(), None);
        assert!(matches!(shard.frozen_end(QueueId(99)), Err(StorageError::UnknownQueue(99))));
        shard.close().await.unwrap();
    });
}

#[test]
fn a_queue_that_never_held_an_offset_begins_empty_where_its_source_ended() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    run(move || async move {
        let shard = open_with(config(&path), &[SOURCE.0, COPY.0]).await;
        for q in [SOURCE, COPY] {
            shard.begin_at(q, START).unwrap();
            assert_eq!(shard.offsets(q).unwrap(), (START, START), "empty, from the source's end");
        }
        assert!(matches!(shard.begin_at(COPY, 7), Err(StorageError::NotNextOffset { .. })), "once only");
        let appended = shard.append(SOURCE, &produced(1)[0]).await.unwrap();
        assert_eq!(appended.base_offset, START, "appends go on from there");
        let copied = batches_from(&shard, START).await;
        assert_eq!(shard.append_copied(COPY, &copied[0]).await.unwrap().base_offset, START);
        assert_eq!(shard.offsets(COPY).unwrap(), (START, START + PER_BATCH));
        assert!(matches!(shard.begin_at(SOURCE, 9), Err(StorageError::NotNextOffset { .. })), "it holds offsets");
        shard.close().await.unwrap();
    });
}
