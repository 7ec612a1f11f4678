//! Property test: random appends, reads, checkpoints, retention (segments
//! recycled through the pool of spares), clean and crash restarts and
//! segment rollovers give the same results as a simple in-memory model of
//! per-queue record lists. Recycled files are full of stale batches that
//! are CRC-valid in their earlier life; page-sized batches line them up with
//! the new life's, so a restart often finds one right at the log's end.

mod common;

use common::*;
use proptest::prelude::*;
use ringmq_shards::{QueueId, ReadWait, ShardConfig, StorageError};
use std::path::PathBuf;

const QUEUES: u32 = 3;

#[derive(Debug, Clone)]
enum Op {
    Append {
        queue: u32,
        sizes: Vec<usize>,
    },
    /// One batch of exactly `pages` pages.
    AppendPages {
        queue: u32,
        pages: usize,
    },
    Read {
        queue: u32,
        offset_pick: u64,
        max_bytes: usize,
    },
    Checkpoint,
    Retain,
    Restart {
        clean: bool,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..QUEUES, prop::collection::vec(1usize..40_000, 1..4)).prop_map(|(queue, sizes)| Op::Append { queue, sizes }),
        8 => (0..QUEUES, 1usize..60).prop_map(|(queue, pages)| Op::AppendPages { queue, pages }),
        4 => (0..QUEUES, any::<u64>(), 1usize..200_000).prop_map(|(queue, offset_pick, max_bytes)| Op::Read { queue, offset_pick, max_bytes }),
        1 => Just(Op::Checkpoint),
        1 => Just(Op::Retain),
        1 => any::<bool>().prop_map(|clean| Op::Restart { clean }),
    ]
}

type Model = Vec<Vec<Vec<u8>>>;

/// Runs ops on one shard life until a restart op; returns where it stopped.
fn life(dir: PathBuf, ops: Vec<Op>, mut model: Model, from: usize) -> (Model, usize) {
    run(move || async move {
        // Retention keeps about 2 segments and pools at most 2 retired ones.
        let cfg =
            ShardConfig { segment_bytes: 1 << 20, retention_bytes: Some(1 << 20), segment_pool_max: 2, ..config(&dir) };
        let shard = open_with(cfg, &(0..QUEUES).collect::<Vec<_>>()).await;
        for q in 0..QUEUES {
            // A crash may undo a retention pass that had not retired its segments yet.
            let (start, end) = shard.offsets(QueueId(q)).unwrap();
            assert_eq!(end, model[q as usize].len() as u64, "queue {q} after restart");
            assert!(start <= end, "queue {q} starts at {start}");
        }
        let mut i = from;
        while i < ops.len() {
            match &ops[i] {
                Op::Append { queue, sizes } => {
                    let base = model[*queue as usize].len() as u64;
                    let values: Vec<Vec<u8>> =
                        sizes.iter().enumerate().map(|(k, s)| value(*queue, base + k as u64, *s)).collect();
                    append(&shard, *queue, values, &mut model).await;
                }
                Op::AppendPages { queue, pages } => {
                    let base = model[*queue as usize].len() as u64;
                    let values = vec![value(*queue, base, page_value_len(*pages))];
                    append(&shard, *queue, values, &mut model).await;
                }
                Op::Read { queue, offset_pick, max_bytes } => {
                    let stored = &model[*queue as usize];
                    let offset = offset_pick % (stored.len() as u64 + 2);
                    let result = shard.read(QueueId(*queue), offset, *max_bytes, ReadWait::No).await;
                    // Retention, also at rollovers, may retire an offset while it
                    // is read: then either the read came first or it is out of range.
                    let start = shard.offsets(QueueId(*queue)).unwrap().0;
                    if let Err(StorageError::OffsetOutOfRange { .. }) = result {
                        let len = stored.len();
                        assert!(offset > len as u64 || offset < start, "offset {offset} is in [{start}, {len}]");
                    } else {
                        assert!(offset <= stored.len() as u64, "offset {offset} past the end was read");
                        let r = result.unwrap();
                        let got: Vec<(u64, Vec<u8>)> =
                            records(&r.bytes).into_iter().filter(|(o, _)| *o >= offset).collect();
                        if offset < stored.len() as u64 {
                            assert!(!got.is_empty(), "a readable offset returns at least one batch");
                        }
                        for (k, (o, v)) in got.iter().enumerate() {
                            assert_eq!(*o, offset + k as u64, "records are contiguous from the offset");
                            assert!(v == &stored[*o as usize], "record {o} of queue {queue} differs from the model");
                        }
                        assert_eq!(r.next_offset, offset + got.len() as u64);
                    }
                }
                Op::Checkpoint => shard.checkpoint().await.unwrap(),
                Op::Retain => {
                    shard.apply_retention().await.unwrap();
                }
                Op::Restart { clean } => {
                    if *clean {
                        shard.close().await.unwrap();
                    }
                    return (model, i + 1);
                }
            }
            i += 1;
        }
        shard.close().await.unwrap();
        (model, ops.len())
    })
}

/// Appends `values` to `queue` as one batch, and to the model.
async fn append(shard: &ringmq_shards::Shard, queue: u32, values: Vec<Vec<u8>>, model: &mut Model) {
    let base = model[queue as usize].len() as u64;
    let refs: Vec<&[u8]> = values.iter().map(|v| v.as_slice()).collect();
    let a = shard.append(QueueId(queue), &batch_with(&refs)).await.unwrap();
    assert_eq!(a.base_offset, base);
    model[queue as usize].extend(values);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn shard_matches_an_in_memory_model(ops in prop::collection::vec(op(), 1..250)) {
        let dir = tempfile::tempdir().unwrap();
        let mut model: Model = vec![Vec::new(); QUEUES as usize];
        let mut at = 0;
        while at < ops.len() {
            (model, at) = life(dir.path().to_path_buf(), ops.clone(), model, at);
        }
        // A last restart checks that everything acknowledged survived.
        life(dir.path().to_path_buf(), vec![], model, 0);
    }
}
