//! Helpers shared by the storage engine's integration tests.
#![allow(dead_code)]

use ringmq_shards::batch::{self, BatchBuilder};
use ringmq_shards::{QueueId, ReadWait, Record, Shard, ShardConfig};
use std::future::Future;
use std::path::Path;

/// Runs `fut` on a fresh glommio executor; when it returns, the executor and
/// every task still on it are dropped, as if the process had died there.
pub fn run<T: Send + 'static, F: Future<Output = T> + 'static>(make: impl FnOnce() -> F + Send + 'static) -> T {
    run_on(glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound), make)
}

/// `run` on an executor made by `builder`.
pub fn run_on<T: Send + 'static, F: Future<Output = T> + 'static>(
    builder: glommio::LocalExecutorBuilder,
    make: impl FnOnce() -> F + Send + 'static,
) -> T {
    builder
        .name("test-shard")
        .spawn(move || async move { make().await })
        .expect("spawn executor")
        .join()
        .expect("executor thread")
}

/// A one-record batch whose value is `value`.
pub fn batch_of(value: &[u8]) -> Vec<u8> {
    batch_with(&[value])
}

/// A batch with one record per value.
pub fn batch_with(values: &[&[u8]]) -> Vec<u8> {
    let mut b = BatchBuilder::new(1_700_000_000_000);
    for v in values {
        b.push(&Record { value: Some(v), tag: b"t", ..Record::default() });
    }
    b.finish()
}

/// A value that names its queue and sequence number, padded to `len`.
pub fn value(queue: u32, seq: u64, len: usize) -> Vec<u8> {
    let mut v = format!("q{queue}-m{seq}-").into_bytes();
    v.resize(len.max(v.len()), b'x');
    v
}

/// Values of every record of every batch in `bytes`, with their offsets.
pub fn records(bytes: &[u8]) -> Vec<(u64, Vec<u8>)> {
    let mut out = Vec::new();
    for b in batch::split(bytes) {
        let header = batch::verify_stored(b).expect("returned batches verify");
        for (i, r) in ringmq_shards::record::RecordIter::new(&b[batch::HEADER_BYTES..]).enumerate() {
            out.push((header.base_offset + i as u64, r.unwrap().value.unwrap().to_vec()));
        }
    }
    out
}

/// Reads every record of `queue` from `from` to its readable end.
pub async fn read_all(shard: &Shard, queue: QueueId, from: u64) -> Vec<(u64, Vec<u8>)> {
    let (_, end) = shard.offsets(queue).unwrap();
    let mut out = Vec::new();
    let mut offset = from;
    while offset < end {
        let r = shard.read(queue, offset, 64 << 10, ReadWait::No).await.unwrap();
        out.extend(records(&r.bytes).into_iter().filter(|(o, _)| *o >= offset));
        assert!(r.next_offset > offset, "reads make progress");
        offset = r.next_offset;
    }
    out
}

/// Ships ranges of at most 48 KiB from the leader to the follower until the
/// follower's durable end is the leader's written end; returns the ranges shipped.
pub async fn catch_up(leader: &Shard, follower: &Shard) -> usize {
    let mut ranges = 0;
    loop {
        let (_, _, durable) = follower.log_positions();
        let (_, written, _) = leader.log_positions();
        if durable == written {
            return ranges;
        }
        let wait = ReadWait::Upto(std::time::Duration::from_millis(20));
        let range = leader.read_range(durable, 48 << 10, wait).await.unwrap();
        assert_eq!(range.from, durable);
        let end = follower.mirror(range.from, &range.bytes).await.unwrap();
        assert_eq!(end, range.next, "the follower is durable up to what it took");
        ranges += 1;
    }
}

/// Small-sized shard configuration in `dir`, with checkpoints only on demand.
pub fn config(dir: &Path) -> ShardConfig {
    ShardConfig { checkpoint_interval: std::time::Duration::from_secs(3600), ..ShardConfig::small(dir) }
}

/// Opens a shard in `dir` and makes sure `queues` exist.
pub async fn open_with(cfg: ShardConfig, queues: &[u32]) -> Shard {
    let shard = Shard::open(cfg).await.expect("open shard");
    for q in queues {
        if !shard.queues().contains(&QueueId(*q)) {
            shard.create_queue(QueueId(*q), None).await.unwrap();
        }
    }
    shard
}

/// (queue, offset, value) of every acknowledged append.
pub type AckLog = std::rc::Rc<std::cell::RefCell<Vec<(u32, u64, Vec<u8>)>>>;

/// Writer `w` appends 3 KB batches to `queue` until an append fails, noting
/// each acknowledged one. Writers pause between appends for different times,
/// so appends keep arriving while a write is in flight (writers that all wait
/// for one round would all land in the next one together).
pub async fn write_until_failure(shard: Shard, w: u32, queue: u32, acked: AckLog) -> ringmq_shards::StorageError {
    let pause = std::time::Duration::from_micros(50 + 60 * u64::from(w % 8));
    for i in 0.. {
        let v = value(w, i, 3000);
        match shard.append(QueueId(queue), &batch_of(&v)).await {
            Ok(a) => acked.borrow_mut().push((queue, a.base_offset, v)),
            Err(e) => return e,
        }
        glommio::timer::sleep(pause).await;
    }
    unreachable!("the loop only ends by returning")
}

/// Polls `done` every 5 ms until it holds or `limit` passes; the caller's
/// assertions then say what is missing.
pub async fn wait_until(limit: std::time::Duration, done: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + limit;
    while !done() && std::time::Instant::now() < deadline {
        glommio::timer::sleep(std::time::Duration::from_millis(5)).await;
    }
}

/// The value length that makes a one-record batch exactly `pages` pages long.
pub fn page_value_len(pages: usize) -> usize {
    let target = pages * ringmq_shards::position::PAGE_BYTES as usize;
    (target.saturating_sub(200)..target)
        .find(|len| batch_of(&vec![b'x'; *len]).len() == target)
        .expect("some value length fills the pages exactly")
}
