//! Produce on the queue's owner: every batch of a request is checked before
//! any is stored, so a refused request stores nothing; ProduceMany entries
//! are appended wherever their queues live.

use crate::protocol::messages::QueueRef;
use crate::server::core::metadata::QueueSlot;
use crate::server::core::{Core, Failure};

/// Appends every batch to one of this shard's queues, all or none refused;
/// each batch's base offset and record count.
pub async fn produce(core: &Core, slot: QueueSlot, batches: &[&[u8]]) -> Result<Vec<(u64, u32)>, Failure> {
    for b in batches {
        ringmq_shards::batch::check(b, core.config().batch_limits())?;
    }
    let appends = batches.iter().map(|b| core.append_here(slot, b));
    let stored = futures_util::future::join_all(appends).await.into_iter();
    stored.map(|s| s.map(|s| (s.base, s.count))).collect()
}

/// Appends every ProduceMany entry where its queue lives (a producer that
/// has not yet seen a metadata change may send one to the wrong shard).
/// Entries start in order, so each queue's batches are placed in request order.
pub async fn produce_many(core: &Core, entries: &[(QueueRef, &[u8])]) -> Vec<Result<(u64, u32), Failure>> {
    let appends = entries.iter().map(|(queue, batch)| core.append(queue, batch));
    let stored = futures_util::future::join_all(appends).await.into_iter();
    stored.map(|s| s.map(|s| (s.base, s.count))).collect()
}
