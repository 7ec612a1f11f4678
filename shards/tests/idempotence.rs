//! Idempotent appends: a batch appended again byte for byte (a client's
//! retry) is answered with where it was stored and stored once, also after
//! the shard crashed or stopped, and on a follower promoted after mirroring
//! it; a batch
//! with the same first id but other bytes is a new batch; a window of 0
//! stores every append.

mod common;

use common::*;
use ringmq_shards::batch::BatchBuilder;
use ringmq_shards::{QueueId, ReadWait, Record, Shard, ShardConfig};
use std::time::Duration;

const Q: QueueId = QueueId(1);

/// A one-record batch of a client: its message id is `id`.
fn client_batch(id: u8, value: &[u8]) -> Vec<u8> {
    let mut b = BatchBuilder::new(1_700_000_000_000);
    b.push(&Record { message_id: [id; 16], value: Some(value), ..Record::default() });
    b.finish()
}

#[test]
fn a_batch_appended_again_is_stored_once_also_after_a_crash_or_a_clean_stop() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    run(move || async move {
        let shard = open_with(config(&path), &[Q.0]).await;
        shard.append(Q, &client_batch(1, b"before")).await.unwrap();
        let first = shard.append(Q, &client_batch(2, b"once")).await.unwrap();
        let again = shard.append(Q, &client_batch(2, b"once")).await.unwrap();
        assert!(!first.duplicate && again.duplicate, "{first:?} {again:?}");
        assert_eq!((again.base_offset, again.position), (first.base_offset, first.position));
        let other = shard.append(Q, &client_batch(2, b"other bytes")).await.unwrap();
        assert!(!other.duplicate, "the same id with other bytes is another batch");
        assert_eq!(shard.offsets(Q).unwrap(), (0, 3));
        assert_eq!(shard.stats().duplicates, 1);
        // Not closed: the process dies here, and its answers may never have left.
    });
    let path = dir.path().to_path_buf();
    run(move || async move {
        let shard = open_with(config(&path), &[Q.0]).await;
        let again = shard.append(Q, &client_batch(2, b"once")).await.unwrap();
        assert!(again.duplicate, "recovery remembers the batches it scanned past the checkpoint");
        assert_eq!(again.base_offset, 1);
        let values: Vec<_> = read_all(&shard, Q, 0).await.into_iter().map(|(_, v)| v).collect();
        assert_eq!(values, [b"before".to_vec(), b"once".to_vec(), b"other bytes".to_vec()]);
        shard.close().await.unwrap();
    });
    let path = dir.path().to_path_buf();
    run(move || async move {
        let shard = open_with(config(&path), &[Q.0]).await;
        let again = shard.append(Q, &client_batch(2, b"once")).await.unwrap();
        assert!(again.duplicate, "a clean stop saved the window");
        assert_eq!(shard.offsets(Q).unwrap(), (0, 3));
        shard.close().await.unwrap();
    });
}

#[test]
fn a_promoted_follower_knows_the_batches_it_mirrored() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (pa, pb) = (a.path().to_path_buf(), b.path().to_path_buf());
    run(move || async move {
        let leader = open_with(config(&pa), &[Q.0]).await;
        let follower = Shard::open_mirror(config(&pb), None).await.unwrap();
        leader.append(Q, &client_batch(3, b"acked, answer lost")).await.unwrap();
        let range = leader.read_range(0, 1 << 20, ReadWait::Upto(Duration::from_millis(20))).await.unwrap();
        follower.mirror(range.from, &range.bytes).await.unwrap();
        leader.close().await.unwrap();
        follower.close().await.unwrap();
    });
    // The node restarts its shards in the leader's role.
    let pb = b.path().to_path_buf();
    run(move || async move {
        let follower = Shard::open_mirror(config(&pb), None).await.unwrap();
        follower.lead();
        let retried = follower.append(Q, &client_batch(3, b"acked, answer lost")).await.unwrap();
        assert!(retried.duplicate);
        assert_eq!((retried.base_offset, retried.position.0), (0, 0));
        assert_eq!(follower.offsets(Q).unwrap(), (0, 1), "the new leader holds it once");
        follower.close().await.unwrap();
    });
}

#[test]
fn with_a_window_of_zero_every_append_is_stored() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    run(move || async move {
        let shard = open_with(ShardConfig { recent_batches: 0, ..config(&path) }, &[Q.0]).await;
        for _ in 0..2 {
            assert!(!shard.append(Q, &client_batch(4, b"twice")).await.unwrap().duplicate);
        }
        assert_eq!(shard.offsets(Q).unwrap(), (0, 2));
        shard.close().await.unwrap();
    });
}
