//! The compactor: every `compaction_check_interval`, each queue of this
//! shard whose topic's `cleanup.policy` compacts is compacted by the
//! storage engine (`Shard::compact`, on this core, paced to the
//! `compaction_cpu_percent` and `compaction_bytes_per_sec` bounds) when
//! Kafka's rules say so:
//!
//! - the dirty part (records since the last pass) is at least
//!   `min.cleanable.dirty.ratio` of the queue's records, or its oldest
//!   record is older than `max.compaction.lag.ms` (overdue);
//! - a pass never goes past the queue's last stable offset (an open
//!   transaction's records stay) or over records younger than
//!   `min.compaction.lag.ms`, nor into the log's active segment unless the
//!   queue is overdue (a shard's segments are shared and may take long to
//!   fill); only what is readable (in a cluster: replicated) is compacted;
//! - tombstones and transaction markers stay `delete.retention.ms` after
//!   their time; records of aborted transactions go;
//! - a queue moving to another broker group is not compacted (nor one a
//!   copy read lately, or a pass that ends as a copy begins): the copy reads
//!   on from the compacted part it found.
//!
//! Leaders and single nodes only, as retention: a follower keeps the log it
//! mirrors whole, and once promoted its own compactor compacts it by the
//! same rules (the compacted part is outside the replicated log, so
//! replication and its byte-identical logs are unchanged). The ratio is
//! counted in records, an estimate of Kafka's bytes.

use crate::server::core::topic_configs::TopicConfigs;
use crate::server::core::Core;
use crate::server::internal::stored_batch::{batch_at, first_newer_than};
use ringmq_shards::{batch, Compaction, QueueId, Shard, StorageError};
use std::collections::HashSet;
use std::rc::Rc;

/// Runs a pass every `compaction_check_interval` until the shard stops.
pub async fn run(core: Rc<Core>) {
    while core.tasks().sleep(core.config().compaction_check_interval).await {
        if let Err(error) = pass(&core).await {
            tracing::warn!(shard = core.id(), %error, "a compaction pass failed; will retry");
        }
    }
}

/// Compacts each compacted queue of this shard that is due.
pub async fn pass(core: &Core) -> Result<(), StorageError> {
    let storage = core.storage();
    if storage.is_mirror() {
        return Ok(());
    }
    let metadata = core.metadata();
    let moving: HashSet<(String, u32)> = core.moving_queues().into_iter().map(|m| (m.topic, m.queue)).collect();
    for (name, number, slot) in metadata.slots_on(core.id()) {
        let configs = &metadata.topics[&name].configs;
        let queue = QueueId(slot.storage_id);
        if !configs.cleanup_policy().compacts() || moving.contains(&(name.clone(), number)) || copied(core, queue) {
            continue;
        }
        let now_ms = core.clock().now_ms() as i64;
        let Some(until) = due(core, queue, configs, now_ms).await? else { continue };
        let aborted = core.txn_marks().aborted_between(queue, 0, until);
        let is_aborted = |producer: i64, offset: u64| {
            aborted.iter().any(|a| a.producer_id == producer && a.first <= offset && offset <= a.last)
        };
        let c = Compaction {
            until,
            tombstones_before_ms: now_ms.saturating_sub(configs.delete_retention().as_millis() as i64),
            aborted: &is_aborted,
            wanted: &|| !copied(core, queue),
        };
        let report = storage.compact(queue, &c).await?;
        tracing::debug!(topic = %name, queue = queue.0, ?report, "compacted a queue");
    }
    Ok(())
}

/// Whether `queue` is being copied to another broker group: a copy reads
/// on from the compacted part it found, so it is left as it is.
fn copied(core: &Core, queue: QueueId) -> bool {
    core.copied_out().recently(queue)
}

/// Where a pass over `queue` would end, if it is due.
async fn due(core: &Core, queue: QueueId, configs: &TopicConfigs, now_ms: i64) -> Result<Option<u64>, StorageError> {
    let storage = core.storage();
    let dirty_from = storage.log_start(queue)?;
    let end = storage.offsets(queue)?.1;
    if dirty_from >= end {
        return Ok(None);
    }
    let mut until = core.txn_marks().last_stable(queue, end);
    let lag = configs.min_compaction_lag().as_millis() as i64;
    if lag > 0 {
        until = until.min(first_newer_than(storage, queue, dirty_from, until, now_ms.saturating_sub(lag)).await?);
    }
    let sealed_until = until.min(active_segment_start(storage, queue, dirty_from, until).await?);
    let overdue = match configs.max_compaction_lag() {
        Some(max) if until > dirty_from => {
            let oldest = batch_at(storage, queue, dirty_from).await?;
            let oldest_ms = oldest.as_deref().and_then(batch::BatchHeader::decode).map(|h| h.first_timestamp_ms);
            oldest_ms.is_some_and(|t| t < now_ms.saturating_sub(max.as_millis() as i64))
        }
        _ => false,
    };
    // An overdue queue is compacted into the active segment too: a shard's
    // segment is shared and may take long to fill.
    let until = if overdue { until } else { sealed_until };
    if until <= dirty_from {
        return Ok(None);
    }
    let clean = storage.compacted(queue).map_or(0, |part| part.records);
    let dirty = until - dirty_from;
    let ratio = dirty as f64 / (dirty + clean) as f64;
    Ok((ratio >= configs.min_cleanable_dirty_ratio() || overdue).then_some(until))
}

/// The first offset in [from, until) whose batch lies in the log's active
/// (last) segment, or `until`: a pass stops before it, as Kafka's never
/// compacts the active segment.
async fn active_segment_start(storage: &Shard, queue: QueueId, from: u64, until: u64) -> Result<u64, StorageError> {
    let Some(active) = storage.segment_bases().last().copied() else { return Ok(until) };
    let (mut lo, mut hi) = (from, until);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if storage.entry(queue, mid).await?.position.0 < active {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    Ok(lo)
}
