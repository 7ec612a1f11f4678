//! A topic's own retention and DeleteRecords. A queue whose topic sets
//! `retention.ms` or `retention.bytes` (and whose `cleanup.policy` deletes)
//! has its start moved past what it no longer keeps, every
//! `retention_check_interval`; DeleteRecords moves it where the client asks
//! and checkpoints before it answers. After each pass the lowest start of
//! every topic queue of the shard (and what the offsets and metadata logs
//! still need) is released to the storage engine, whose retention then
//! retires the segments wholly below it: the disk comes back once every
//! queue in a segment has let go of it.
//!
//! Time is compared with each batch's newest timestamp, by a binary search
//! over the queue's offsets (as Kafka deletes segment by segment from the
//! oldest, a record far in the future holds everything after it). Size is
//! estimated from up to `SIZE_SAMPLES` batches spread over the queue (bytes
//! per record), as Kafka's segment-sized steps are approximate too.
//! A tiered topic's queue (`remote.storage.enable`) keeps on local disk
//! what `local.retention.*` keeps, and never lets go of what the bucket
//! does not hold yet (the manifest's uploaded end) nor of the active
//! segment's records; older records are read from the bucket.
//! Leaders and single nodes only: followers keep what they mirror. Moved
//! starts are recorded in the log (core/queue_starts.rs), so a follower
//! promoted at fail-over starts each queue where its old leader had.

use crate::server::core::metadata::QueueSlot;
use crate::server::core::metrics::{Probe, Samples};
use crate::server::core::topic_configs::TopicConfigs;
use crate::server::core::{part_imports, queue_starts};
use crate::server::core::{Core, Failure, Reason};
use crate::server::internal::queues::METADATA;
use crate::server::internal::retention_floor;
use crate::server::internal::stored_batch::{batch_at, first_newer_than};
use ringmq_shards::{batch, QueueId, Shard, StorageError};
use std::cell::Cell;
use std::rc::Rc;

/// Batches read to estimate a queue's bytes per record.
const SIZE_SAMPLES: u64 = 8;

/// Tiered queues whose local retention waits for their uploads.
#[derive(Default)]
struct Held {
    queues: Cell<u64>,
}

impl Probe for Held {
    fn collect(&self, out: &mut Samples) {
        let help = "Tiered queues whose local retention waits for uploads: what the bucket does not hold yet stays on \
                    local disk.";
        out.gauge("ringmq_tiered_local_retention_held_queues", help, &[], self.queues.get() as f64);
    }
}

/// Runs a pass every `retention_check_interval` until the shard stops.
pub async fn run(core: Rc<Core>) {
    let held = Rc::new(Held::default());
    core.probes().register(&(held.clone() as Rc<dyn Probe>));
    while core.tasks().sleep(core.config().retention_check_interval).await {
        match pass(&core).await {
            Ok(queues) => held.queues.set(queues),
            Err(error) => tracing::warn!(shard = core.id(), %error, "a topic retention pass failed; will retry"),
        }
    }
}

/// Moves the starts of this shard's queues as their topics' retention
/// says, then releases what no queue reads any more; the tiered queues
/// whose local retention waits for uploads.
async fn pass(core: &Core) -> Result<u64, StorageError> {
    if let Err(failure) = core.carry_metadata_forward().await {
        tracing::warn!(%failure, "the metadata record was not carried forward; it holds old segments back");
    }
    let storage = core.storage();
    let now_ms = core.clock().now_ms() as i64;
    let metadata = core.metadata();
    let mut needed = vec![
        core.offsets().needed(),
        core.txn_marks().needed(),
        queue_starts::needed(storage)?,
        part_imports::needed(storage)?,
    ];
    if let Ok((_, end)) = storage.offsets(METADATA) {
        needed.push((METADATA, end.saturating_sub(1)));
    }
    let mut held = 0;
    for (name, _, slot) in metadata.slots_on(core.id()) {
        let queue = QueueId(slot.storage_id);
        let configs = &metadata.topics[&name].configs;
        if configs.cleanup_policy().deletes() {
            let kept = match configs.remote_storage() {
                true => locally_kept_from(core, queue, configs, now_ms, &mut held).await?,
                false => kept_from(storage, queue, configs.retention_age(), configs.retention_bytes(), now_ms).await?,
            };
            if let Some(from) = kept {
                let start = storage.trim(queue, from)?;
                tracing::debug!(topic = %name, queue = queue.0, start, "topic retention moved a queue's start");
            }
        }
        needed.push((queue, storage.log_start(queue)?));
    }
    core.record_queue_starts().await?;
    let floor = retention_floor::floor(storage, &needed).await?;
    tracing::debug!(shard = core.id(), floor = floor.0, ?needed, "released below the oldest record a queue needs");
    storage.release_below(floor);
    Ok(held)
}

/// The first offset a tiered queue keeps on local disk: past what its
/// `local.retention.*` (or its total retention) lets go, but never past
/// what the bucket holds (the manifest's uploaded end). A queue whose
/// sealed segments wait for uploads is counted in `held`.
async fn locally_kept_from(
    core: &Core,
    queue: QueueId,
    configs: &TopicConfigs,
    now_ms: i64,
    held: &mut u64,
) -> Result<Option<u64>, StorageError> {
    let storage = core.storage();
    let total = kept_from(storage, queue, configs.retention_age(), configs.retention_bytes(), now_ms).await?;
    let local =
        kept_from(storage, queue, configs.local_retention_age(), configs.local_retention_bytes(), now_ms).await?;
    let Some(wanted) = total.max(local) else { return Ok(None) };
    let uploaded = core.manifest().current().map_or(0, |m| m.uploaded_next(queue.0));
    if uploaded < wanted && sealed_at(storage, queue, uploaded).await? {
        *held += 1;
    }
    Ok(Some(wanted.min(uploaded)).filter(|&from| from > storage.log_start(queue).unwrap_or(from)))
}

/// Whether `queue`'s `offset` lies in a sealed segment (one an upload
/// could have taken; the active segment's are not due).
async fn sealed_at(storage: &Shard, queue: QueueId, offset: u64) -> Result<bool, StorageError> {
    let Some(&active) = storage.segment_bases().last() else { return Ok(false) };
    if offset < storage.log_start(queue)? || offset >= storage.offsets(queue)?.1 {
        return Ok(false);
    }
    Ok(storage.entry(queue, offset).await?.position.0 < active)
}

/// The first offset a queue keeps under a retention of `age` and `bytes`, if past its start.
async fn kept_from(
    storage: &Shard,
    queue: QueueId,
    age: Option<std::time::Duration>,
    bytes: Option<u64>,
    now_ms: i64,
) -> Result<Option<u64>, StorageError> {
    let (start, end) = storage.offsets(queue)?;
    if start == end {
        return Ok(None);
    }
    let mut from = start;
    if let Some(age) = age {
        from = first_newer_than(storage, queue, start, end, now_ms.saturating_sub(age.as_millis() as i64)).await?;
    }
    if let Some(bytes) = bytes {
        let per_record = bytes_per_record(storage, queue, start, end).await?;
        from = from.max(end.saturating_sub(bytes / per_record));
    }
    Ok((from > start).then_some(from))
}

/// About how many bytes a queue holds: its records times the bytes per
/// record of up to `SIZE_SAMPLES` batches spread over it (0 when empty).
pub async fn estimated_bytes(storage: &Shard, queue: QueueId) -> Result<u64, StorageError> {
    let (start, end) = storage.offsets(queue)?;
    if start == end {
        return Ok(0);
    }
    Ok((end - start).saturating_mul(bytes_per_record(storage, queue, start, end).await?))
}

/// Bytes per record (at least 1) of up to `SIZE_SAMPLES` batches spread over [start, end).
async fn bytes_per_record(storage: &Shard, queue: QueueId, start: u64, end: u64) -> Result<u64, StorageError> {
    let step = ((end - start) / SIZE_SAMPLES).max(1);
    let (mut sampled_bytes, mut sampled_records) = (0u64, 0u64);
    for offset in (start..end).step_by(step as usize).take(SIZE_SAMPLES as usize) {
        let first = batch_at(storage, queue, offset).await?;
        if let Some(header) = first.as_deref().and_then(batch::BatchHeader::decode) {
            sampled_bytes += u64::from(header.length);
            sampled_records += u64::from(header.record_count);
        }
    }
    Ok(sampled_bytes.checked_div(sampled_records).unwrap_or(1).max(1))
}

/// DeleteRecords on the queue's owner: its records below `offset` removed
/// (`None`: all it holds), recorded durably before the answer; the queue's
/// new start.
pub async fn delete_records(core: &Core, slot: QueueSlot, offset: Option<u64>) -> Result<u64, Failure> {
    let metadata = core.metadata();
    let topic = metadata.slots_on(core.id()).into_iter().find(|(_, _, s)| s.storage_id == slot.storage_id);
    if let Some((name, _, _)) = topic.filter(|(name, _, _)| !metadata.topics[name].configs.cleanup_policy().deletes()) {
        let why = format!(
            "topic {name:?} only compacts (cleanup.policy=compact): its records go by compaction, not DeleteRecords; \
             set cleanup.policy=compact,delete to delete records"
        );
        return Err(Failure(Reason::PolicyViolation, why));
    }
    let storage = core.storage();
    let queue = QueueId(slot.storage_id);
    let (local_start, end) = storage.offsets(queue)?;
    // Past the end is refused (as the engine would) before anything changes.
    let offset = offset.unwrap_or(end);
    if offset > end {
        return Err(StorageError::OffsetOutOfRange { queue: queue.0, offset, start: local_start, end }.into());
    }
    let readers_start = core.queue_offsets(queue)?.0;
    if readers_start < offset.min(local_start) {
        // A tiered queue's records below it in the bucket go first: the
        // manifest's next generation moves the queue's start there.
        let link = core.objects().expect("a queue reaches into the bucket only on a broker with one");
        let starts = [(queue.0, offset)].into_iter().collect();
        super::upload::move_starts(core, link, &starts)
            .await
            .map_err(|e| Failure(Reason::RemoteUnavailable, e.to_string()))?;
    }
    storage.trim(queue, offset)?;
    core.record_queue_starts().await?;
    Ok(core.queue_offsets(queue)?.0)
}
