//! Opening a shard whose files hold anything: a checkpoint, a lookup chunk
//! and the first segment come from the input (u16 checkpoint length, u16
//! chunk length, then the checkpoint, the chunk and the segment's first
//! bytes). Recovery must open it or refuse it with an error, never panic,
//! and whatever it opens must read back without panicking.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ringmq_shards::{QueueId, ReadWait, Shard, ShardConfig};
use std::path::Path;

thread_local! {
    static EXECUTOR: glommio::LocalExecutor = glommio::LocalExecutor::default();
}

const SEGMENT_BYTES: u64 = 1 << 20;

fn split(data: &[u8]) -> Option<(&[u8], &[u8], &[u8])> {
    let (lens, rest) = data.split_at_checked(4)?;
    let ckpt = usize::from(u16::from_le_bytes([lens[0], lens[1]]));
    let chunk = usize::from(u16::from_le_bytes([lens[2], lens[3]]));
    let (ckpt, rest) = rest.split_at_checked(ckpt.min(rest.len()))?;
    let (chunk, segment) = rest.split_at_checked(chunk.min(rest.len()))?;
    Some((ckpt, chunk, &segment[..segment.len().min(SEGMENT_BYTES as usize)]))
}

fn lay_out(dir: &Path, ckpt: &[u8], chunk: &[u8], segment: &[u8]) {
    for queue in [1, 2] {
        std::fs::create_dir_all(dir.join(format!("index/{queue:010}"))).unwrap();
    }
    std::fs::create_dir_all(dir.join("lookup")).unwrap();
    if !ckpt.is_empty() {
        std::fs::write(dir.join("checkpoint"), ckpt).unwrap();
    }
    if !chunk.is_empty() {
        std::fs::write(dir.join(format!("lookup/{:020}-{:020}.lkp", 0, 4096)), chunk).unwrap();
    }
    let mut bytes = segment.to_vec();
    bytes.resize(SEGMENT_BYTES as usize, 0);
    std::fs::write(dir.join(ringmq_shards::segment_name(0, ringmq_shards::batch::Generation::WIRE)), bytes).unwrap();
}

fuzz_target!(|data: &[u8]| {
    let Some((ckpt, chunk, segment)) = split(data) else { return };
    let dir = tempfile::tempdir().unwrap();
    lay_out(dir.path(), ckpt, chunk, segment);
    let config = ShardConfig { segment_bytes: SEGMENT_BYTES, ..ShardConfig::small(dir.path()) };
    EXECUTOR.with(|ex| {
        ex.run(async move {
            let Ok(shard) = Shard::open(config).await else { return };
            for queue in shard.queues() {
                let Ok((start, end)) = shard.offsets(queue) else { continue };
                let mut at = start;
                while at < end {
                    match shard.read(QueueId(queue.0), at, 1 << 16, ReadWait::No).await {
                        Ok(read) if read.next_offset > at => at = read.next_offset,
                        _ => break,
                    }
                }
            }
            let _ = shard.lookup(0).await;
            let _ = shard.close().await;
        })
    });
});
