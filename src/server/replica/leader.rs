//! A leader's shard answering a follower's ReplicaFetch: the follower's
//! `from` is its durable end, which moves the committed end; the answer is
//! the log from there, parked at the written end up to the asked wait.

use crate::protocol::messages::{ReplicaFetch, ReplicaRange};
use crate::protocol::Writer;
use crate::server::core::context::ShardRole;
use crate::server::core::Reason;
use crate::server::core::{Core, Failure};
use ringmq_shards::ReadWait;
use std::time::Duration;

/// Most log bytes one ReplicaFetch answer carries.
pub const REPLICA_FETCH_BYTES_MAX: u32 = 4 << 20;

/// Serves `f` on this shard, which must lead `f.group` in `f.epoch`.
pub async fn serve_fetch(core: &Core, f: &ReplicaFetch, w: &mut Writer) -> Result<(), Failure> {
    let ShardRole::Leader(replication) = core.role() else {
        return Err(Failure(Reason::NotLeader, "this node does not lead a broker group".into()));
    };
    if f.broker_group != replication.group() || f.epoch != replication.epoch() {
        let m = format!(
            "this node leads broker group {:?} in epoch {}, not {:?} in epoch {}",
            replication.group(),
            replication.epoch(),
            f.broker_group,
            f.epoch
        );
        return Err(Failure(Reason::NotLeader, m));
    }
    let storage = core.storage();
    replication.fetched(storage, &f.follower, f.from, std::time::Instant::now());
    let wait = ReadWait::Upto(Duration::from_millis(u64::from(f.max_wait_ms)));
    let range = storage.read_range(f.from, f.max_bytes.min(REPLICA_FETCH_BYTES_MAX) as usize, wait).await?;
    w.buf.reserve(range.bytes.len() + 64);
    ReplicaRange {
        epoch: replication.epoch(),
        from: range.from,
        next: range.next,
        log_start: range.log_start,
        shipped_end: range.shipped_end,
        committed_end: replication.committed(),
        batches: &range.bytes,
    }
    .encode(w);
    Ok(())
}
