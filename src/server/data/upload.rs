//! Tiered storage's uploader, one per shard of a broker with a bucket.
//! Every `UPLOAD_CHECK` the shard's leader (or single node) looks for the
//! oldest sealed segment that holds batches of a tiered topic's queue past
//! what the manifest has uploaded, wholly committed (in a cluster: below
//! the committed end, so a new leader holds it too). It exports that
//! segment (`Shard::export_segment`: only those batches, as stored, sealed
//! ones sealed) and uploads it as one object, a part at a time while the
//! next is read, paced to the shard's share of
//! `tiered_upload_bytes_per_sec`, within the node's
//! `tiered_uploads_in_flight`. Once the object is complete, the manifest's
//! next generation, naming it, is stored; the one before the last is
//! deleted. The append path never waits for any of it.
//!
//! The shard's place in the bucket is `OWNER/shard-K/` (`core/manifest.rs`),
//! objects under `objects/` named by segment, epoch and generation, so an
//! upload repeated after a crash replaces its own half-done object and a
//! deposed leader's late upload is named apart. Followers read the manifest
//! every `MANIFEST_REFRESH` (they hold the same segments at the same
//! positions), and a leader reads it when it starts, so the next leader
//! goes on from the last generation stored. A failed round is retried after
//! a wait that doubles with each failure (up to `UPLOAD_BACKOFF_MAX`); a
//! failure is logged when uploads begin to fail, and when they work again.
//! After each round that added objects, the uploader deletes the objects
//! no manifest will name (a crash between an upload and its manifest, a
//! deposed leader's late upload; as it begins, also a deletion that
//! failed): the first time every object of the shard is listed, then only
//! those from the newest segment named at the previous time on.

use super::restore::keep_metadata;
use super::retention::estimated_bytes;
use crate::objects::{ObjectError, Part};
use crate::server::core::manifest::{
    newest_key, object_key, place_of, Manifest, ManifestError, ObjectEntry, MANIFESTS, OBJECTS,
};
use crate::server::core::metrics::{Probe, Samples};
use crate::server::core::objects::ObjectLink;
use crate::server::core::pace::Pace;
use crate::server::core::{context::ShardRole, Core};
use ringmq_shards::tiered::{ExportStep, ObjectIndex, ObjectPart};
use ringmq_shards::{QueueId, StorageError};
use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::Range;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// How often a shard looks for a segment to upload.
const UPLOAD_CHECK: Duration = Duration::from_secs(1);
/// The longest wait between failed rounds: each failure doubles the wait
/// from `UPLOAD_CHECK` up to it, so a bucket that is down is not asked once
/// a second by every shard, and one that is back is used within this.
const UPLOAD_BACKOFF_MAX: Duration = Duration::from_secs(16);
/// How often a follower reads its group's manifest.
const MANIFEST_REFRESH: Duration = Duration::from_secs(10);

/// Why an upload round stopped.
#[derive(Debug, thiserror::Error)]
pub enum UploadError {
    #[error(transparent)]
    Bucket(#[from] ObjectError),
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error(transparent)]
    Manifest(#[from] ManifestError),
}

/// What the uploads did.
#[derive(Default)]
struct UploadStats {
    objects: Cell<u64>,
    bytes: Cell<u64>,
    failed_rounds: Cell<u64>,
    /// Whether the last round failed.
    failing: Cell<bool>,
    generation: Cell<u64>,
    orphans_deleted: Cell<u64>,
}

impl Probe for UploadStats {
    fn collect(&self, out: &mut Samples) {
        let help = "Objects this shard uploaded to tiered storage's bucket (each a sealed segment's tiered batches).";
        out.counter("ringmq_tiered_uploaded_objects", help, &[], self.objects.get());
        let help = "Bytes of the objects this shard uploaded to the bucket.";
        out.counter("ringmq_tiered_uploaded_bytes", help, &[], self.bytes.get());
        let help = "Upload rounds that failed (the bucket or the segment's read); each is retried.";
        out.counter("ringmq_tiered_upload_failures", help, &[], self.failed_rounds.get());
        let help = "1 while this shard's tiered storage rounds fail (a leader's uploads, a follower's manifest reads; \
                    retried with back-off), else 0.";
        out.gauge("ringmq_tiered_uploads_failing", help, &[], f64::from(u8::from(self.failing.get())));
        let help = "Objects of this shard deleted from the bucket because no manifest names them (uploads whose \
                    manifest was never stored: a crash, a deposed leader).";
        out.counter("ringmq_tiered_orphans_deleted", help, &[], self.orphans_deleted.get());
        let help = "Generation of the shard's tiered storage manifest this node knows (0: nothing uploaded).";
        out.gauge("ringmq_tiered_manifest_generation", help, &[], self.generation.get() as f64);
    }
}

/// Uploads until the shard stops (a broker with a bucket).
pub async fn run(core: Rc<Core>) {
    let Some(link) = core.objects().cloned() else { return };
    let stats = Rc::new(UploadStats::default());
    core.probes().register(&(stats.clone() as Rc<dyn Probe>));
    let mut failing = false;
    // Read at once: until then a tiered queue's first offset is not known.
    // A follower counts it as its first refresh.
    let mut refreshed = match load_manifest(&core, &link).await {
        Ok(_) => Some(Instant::now()),
        Err(error) => {
            tracing::debug!(shard = core.id(), %error, "the manifest is read at the next round");
            None
        }
    };
    let mut wait = UPLOAD_CHECK;
    let (mut metadata_kept, mut swept_from) = (None, None);
    while core.tasks().sleep(wait).await {
        let result = match core.role() {
            // Shard 0 of a single node keeps its metadata in the bucket, for a restore.
            ShardRole::Single if core.id() == 0 => match keep_metadata(&core, &link, &mut metadata_kept).await {
                Ok(()) => upload_due(&core, &link, &stats, &mut swept_from).await,
                Err(e) => Err(e.into()),
            },
            ShardRole::Follower { .. } if refreshed.is_some_and(|at| at.elapsed() < MANIFEST_REFRESH) => Ok(()),
            ShardRole::Follower { .. } => load_manifest(&core, &link).await.map(|_| refreshed = Some(Instant::now())),
            ShardRole::Single | ShardRole::Leader(_) => upload_due(&core, &link, &stats, &mut swept_from).await,
        };
        if let Some(manifest) = core.manifest().current() {
            stats.generation.set(manifest.generation());
        }
        stats.failing.set(result.is_err());
        match result {
            Err(error) => {
                stats.failed_rounds.set(stats.failed_rounds.get() + 1);
                wait = (wait * 2).min(UPLOAD_BACKOFF_MAX);
                if !failing {
                    tracing::warn!(shard = core.id(), %error, "tiered storage uploads are failing; retrying");
                }
                failing = true;
            }
            Ok(()) if failing => {
                tracing::info!(shard = core.id(), "tiered storage uploads work again");
                (failing, wait) = (false, UPLOAD_CHECK);
            }
            Ok(()) => {}
        }
    }
}

/// Uploads every segment that is due, one after the other, applies total
/// retention, and deletes orphaned objects where new ones may be
/// (`swept_from`: the segment the next look begins at; None: every object).
async fn upload_due(
    core: &Core,
    link: &ObjectLink,
    stats: &UploadStats,
    swept_from: &mut Option<u64>,
) -> Result<(), UploadError> {
    let mut manifest = known_manifest(core, link).await?;
    if manifest.epoch() > epoch(core) {
        // A later leader stores the manifest: this one was deposed.
        return Ok(());
    }
    let mut pace = Pace::new(core.config().tiered_upload_bytes_per_sec / core.shards().max(1) as u64);
    while !core.tasks().stopping() {
        let tiered = tiered_from(core, &manifest)?;
        let Some(base) = due_segment(core, &tiered).await? else { break };
        let Some(object) = upload_segment(core, link, &manifest, base, &tiered, &mut pace).await? else { break };
        let bytes = object.bytes;
        manifest = change_manifest(core, link, |m| (m.with_object(epoch(core), object), ())).await?.0;
        stats.objects.set(stats.objects.get() + 1);
        stats.bytes.set(stats.bytes.get() + bytes);
    }
    expire(core, link).await?;
    let newest = manifest.objects().last().map_or(0, |o| o.segment);
    if swept_from.is_none_or(|from| from < newest) {
        let deleted = delete_orphans(core, link, *swept_from).await?;
        stats.orphans_deleted.set(stats.orphans_deleted.get() + deleted);
        *swept_from = Some(newest);
    }
    Ok(())
}

/// Deletes the shard's objects no manifest will name (`Manifest::orphans`)
/// of segment `from` on (None: all of them); how many. Run by the uploader
/// between its uploads, so an upload of its own is never under way.
async fn delete_orphans(core: &Core, link: &ObjectLink, from: Option<u64>) -> Result<u64, UploadError> {
    let manifest = known_manifest(core, link).await?;
    let place = place_of(core);
    let prefix = format!("{place}{OBJECTS}");
    // A key's segment comes first: every object of segment `from` sorts after its bare number.
    let after = from.map(|segment| format!("{prefix}{segment:020}"));
    let listed = link.call(move |store| async move { store.list_after(&prefix, after.as_deref()).await }).await?;
    let keys = listed.iter().filter_map(|l| l.key.strip_prefix(place.as_str()));
    let orphans: Vec<String> = manifest.orphans(keys).into_iter().map(|key| format!("{place}{key}")).collect();
    if orphans.is_empty() {
        return Ok(0);
    }
    tracing::info!(shard = core.id(), objects = ?orphans, "deleting objects no manifest names");
    let deleted = orphans.len() as u64;
    link.call(move |store| async move {
        for key in &orphans {
            store.delete(key).await?;
        }
        Ok(())
    })
    .await?;
    Ok(deleted)
}

/// Moves the tiered queues' starts in the manifest past the objects their
/// total retention no longer keeps, as Kafka deletes remote segments: an
/// object goes once the queue's newest record in it is older than
/// `retention.ms`, or, oldest first, while the queue holds more than
/// `retention.bytes` (its objects below the local start, and local disk);
/// then deletes the objects no queue reads any more. A queue the shard no
/// longer stores (its topic deleted, or moved to another broker group,
/// which copied it whole) leaves the manifest, and the objects only it
/// read are deleted, as Kafka deletes a deleted topic's remote segments.
async fn expire(core: &Core, link: &ObjectLink) -> Result<(), UploadError> {
    let Some(manifest) = core.manifest().current() else { return Ok(()) };
    let metadata = core.metadata();
    let now_ms = core.clock().now_ms() as i64;
    let mut starts = BTreeMap::new();
    for (name, _, slot) in metadata.slots_on(core.id()) {
        let configs = &metadata.topics[&name].configs;
        if !configs.remote_storage() || !configs.cleanup_policy().deletes() {
            continue;
        }
        let (queue, was) = (slot.storage_id, manifest.start(slot.storage_id));
        // In upload order, which is the queue's offset order.
        let objects: Vec<&ObjectEntry> =
            manifest.objects().iter().filter(|o| o.queues.get(&queue).is_some_and(|r| r.1 > was)).collect();
        let mut start = was;
        if let Some(age) = configs.retention_age() {
            let cutoff = now_ms.saturating_sub(age.as_millis() as i64);
            let expired = objects.iter().take_while(|o| o.newest_ms.get(&queue).is_some_and(|&t| t < cutoff));
            start = expired.map(|o| o.queues[&queue].1).fold(start, u64::max);
        }
        if let Some(limit) = configs.retention_bytes() {
            let local_start = core.storage().log_start(QueueId(queue))?;
            let remote = objects.iter().filter(|o| o.queues[&queue].0 < local_start);
            let remote: Vec<(u64, u64)> =
                remote.map(|o| (o.queues[&queue].1, o.queue_bytes.get(&queue).copied().unwrap_or(0))).collect();
            let mut held =
                estimated_bytes(core.storage(), QueueId(queue)).await? + remote.iter().map(|r| r.1).sum::<u64>();
            for (next, bytes) in remote {
                if held <= limit {
                    break;
                }
                held -= bytes;
                start = start.max(next);
            }
        }
        if start > was {
            starts.insert(queue, start);
        }
    }
    // Topic queues have ids below `next_storage_id`: one of them the shard no longer stores was deleted or moved away.
    let stored: BTreeSet<u32> = metadata.slots_on(core.id()).into_iter().map(|(_, _, slot)| slot.storage_id).collect();
    let gone: BTreeSet<u32> =
        manifest.queues().into_iter().filter(|q| *q < metadata.next_storage_id && !stored.contains(q)).collect();
    if !gone.is_empty() {
        tracing::debug!(shard = core.id(), ?gone, "queues deleted or moved away leave the bucket");
        let (_, objects) = change_manifest(core, link, |m| m.without_queues(epoch(core), &gone)).await?;
        delete_objects(core, link, objects).await;
    }
    if starts.is_empty() {
        return Ok(());
    }
    tracing::debug!(shard = core.id(), ?starts, "retention moves tiered queues' starts");
    move_starts(core, link, &starts).await
}

/// Moves tiered queues' starts in the bucket forward to `starts` (total
/// retention, or DeleteRecords below a queue's local start): the manifest's
/// next generation says so, then the objects no queue reads any more are
/// deleted.
pub(super) async fn move_starts(
    core: &Core,
    link: &ObjectLink,
    starts: &BTreeMap<u32, u64>,
) -> Result<(), UploadError> {
    let (_, gone) = change_manifest(core, link, |m| m.with_starts(epoch(core), starts)).await?;
    delete_objects(core, link, gone).await;
    Ok(())
}

/// Deletes `objects`, which the manifest stored last no longer names (one
/// that fails stays, an orphan the uploader deletes after its next start).
async fn delete_objects(core: &Core, link: &ObjectLink, objects: Vec<ObjectEntry>) {
    let place = place_of(core);
    for object in objects {
        let key = format!("{place}{}", object.key);
        if let Err(error) = link.call(move |store| async move { store.delete(&key).await }).await {
            tracing::warn!(%error, "an object no queue reads any more stays in the bucket");
        }
    }
}

/// The epoch manifests are stored under: the leader's (0 for a single node).
fn epoch(core: &Core) -> u64 {
    core.config().cluster.as_ref().map_or(0, |c| c.epoch)
}

/// The shard's manifest as this node knows it, read from the bucket if it
/// knows none yet.
async fn known_manifest(core: &Core, link: &ObjectLink) -> Result<Rc<Manifest>, UploadError> {
    match core.manifest().current() {
        Some(manifest) => Ok(manifest),
        None => load_manifest(core, link).await,
    }
}

/// Reads the newest manifest stored for this shard (none: generation 0)
/// and takes it if it is newer than the one known.
pub(super) async fn load_manifest(core: &Core, link: &ObjectLink) -> Result<Rc<Manifest>, UploadError> {
    let place = place_of(core);
    let prefix = format!("{place}{MANIFESTS}");
    let listed = link.call(move |store| async move { store.list(&prefix).await }).await?;
    let keys: Vec<&str> = listed.iter().filter_map(|l| l.key.strip_prefix(place.as_str())).collect();
    let stored = match newest_key(keys) {
        None => Manifest::default(),
        Some(key) => {
            let full = format!("{place}{key}");
            let bytes = link.call(move |store| async move { store.get(&full, None).await }).await?;
            Manifest::decode(key, &bytes)?
        }
    };
    core.manifest().offer(stored);
    Ok(core.manifest().current().expect("a manifest was offered"))
}

/// Stores the manifest's next generation, `change` made to the current one
/// (one change at a time), and makes it the shard's; the generations stored
/// before the current one are deleted. The new manifest, and what `change`
/// gave besides.
async fn change_manifest<T>(
    core: &Core,
    link: &ObjectLink,
    change: impl FnOnce(&Manifest) -> (Manifest, T),
) -> Result<(Rc<Manifest>, T), UploadError> {
    let _one_at_a_time = core.manifest().change().await;
    let previous = known_manifest(core, link).await?;
    let (next, besides) = change(&previous);
    let place = place_of(core);
    let key = format!("{place}{}", next.key());
    let body = next.encode();
    link.call(move |store| async move { store.put(&key, body.into()).await }).await?;
    assert!(core.manifest().offer(next), "the uploader's manifest is the newest");
    let prefix = format!("{place}{MANIFESTS}");
    let kept_from = format!("{place}{}", previous.key());
    let pruned = link
        .call(move |store| async move {
            for old in store.list(&prefix).await?.into_iter().filter(|l| l.key < kept_from) {
                store.delete(&old.key).await?;
            }
            Ok(())
        })
        .await;
    if let Err(error) = pruned {
        tracing::debug!(%error, "old manifests stay in the bucket until the next upload");
    }
    Ok((core.manifest().current().expect("just stored"), besides))
}

/// The tiered queues of this shard, each with the first offset an upload
/// takes: where the manifest has it uploaded to, or its start if later.
fn tiered_from(core: &Core, manifest: &Manifest) -> Result<HashMap<QueueId, u64>, StorageError> {
    let metadata = core.metadata();
    let mut tiered = HashMap::new();
    for (name, _, slot) in metadata.slots_on(core.id()) {
        if metadata.topics[&name].configs.remote_storage() {
            let queue = QueueId(slot.storage_id);
            tiered.insert(queue, manifest.uploaded_next(queue.0).max(core.storage().log_start(queue)?));
        }
    }
    Ok(tiered)
}

/// The sealed, committed segment holding the oldest batch still to upload.
async fn due_segment(core: &Core, tiered: &HashMap<QueueId, u64>) -> Result<Option<u64>, StorageError> {
    let storage = core.storage();
    let mut oldest: Option<u64> = None;
    for (&queue, &from) in tiered {
        if from < storage.offsets(queue)?.1 {
            let position = storage.entry(queue, from).await?.position.0;
            oldest = Some(oldest.map_or(position, |o| o.min(position)));
        }
    }
    let Some(position) = oldest else { return Ok(None) };
    let bases = storage.segment_bases();
    let Some(at) = bases.partition_point(|b| *b <= position).checked_sub(1) else { return Ok(None) };
    // The segment after it has begun (so it is sealed) and everything up to it is committed.
    Ok(bases.get(at + 1).filter(|&&end| end <= committed_end(core)).map(|_| bases[at]))
}

/// Where the log is committed: in a cluster, replicated as the mode says;
/// on a single node, durable.
fn committed_end(core: &Core) -> u64 {
    match core.role() {
        ShardRole::Leader(replication) => replication.committed(),
        _ => core.storage().log_positions().2,
    }
}

/// Uploads segment `base`'s batches of the `tiered` queues past their
/// offsets as one object; what the manifest is to say of it (None: the
/// segment held none of them after all).
async fn upload_segment(
    core: &Core,
    link: &ObjectLink,
    manifest: &Manifest,
    base: u64,
    tiered: &HashMap<QueueId, u64>,
    pace: &mut Pace,
) -> Result<Option<ObjectEntry>, UploadError> {
    let storage = core.storage();
    let wanted = |queue: QueueId, offsets: Range<u64>| tiered.get(&queue).is_some_and(|&from| offsets.end > from);
    let key = object_key(base, epoch(core), manifest.generation() + 1);
    let (parts, received) = tokio::sync::mpsc::channel(1);
    let export = async move {
        let mut export = storage.export_segment(base, &wanted)?;
        loop {
            match export.step().await? {
                ExportStep::Part(part) => {
                    pace.took(part.len());
                    pace.wait().await;
                    if parts.send(Part::More(chunks(part))).await.is_err() {
                        return Ok(None);
                    }
                }
                // Dropping `parts` before the last part aborts the upload.
                ExportStep::Done(closing) if closing.is_empty() => return Ok(None),
                ExportStep::Done(closing) => {
                    // The footer is sorted and encoded on the S3 thread, off the shard's.
                    let finished = link.call(move |_| async move { Ok(closing.finish()) }).await;
                    let (last, index) = finished.map_err(|e| StorageError::Remote(e.to_string()))?;
                    let footer = ObjectIndex::footer_of(last.tail())?;
                    pace.took(last.len());
                    let sent = parts.send(Part::Last(chunks(last))).await.is_ok();
                    return Ok(sent.then_some((index, footer)));
                }
            }
        }
    };
    let full_key = format!("{}{key}", place_of(core));
    let (exported, uploaded) = futures_lite::future::zip(export, link.upload(full_key, received)).await;
    let exported: Result<_, StorageError> = exported;
    let Some((index, footer)) = exported? else {
        // The segment held none of them (the upload was given up), or the upload failed.
        return match uploaded {
            Err(ObjectError::GivenUp { .. }) => Ok(None),
            Err(error) => Err(error.into()),
            Ok(_) => unreachable!("an upload completes only with its last part"),
        };
    };
    let bytes = uploaded?;
    tracing::debug!(shard = core.id(), segment = base, bytes, %key, "uploaded a segment to tiered storage");
    let (mut newest_ms, mut queue_bytes) = (BTreeMap::new(), BTreeMap::new());
    for slice in &index.slices {
        let newest = newest_ms.entry(slice.queue).or_insert(slice.newest_ms);
        *newest = (*newest).max(slice.newest_ms);
        *queue_bytes.entry(slice.queue).or_insert(0) += u64::from(slice.len);
    }
    Ok(Some(ObjectEntry {
        key,
        segment: base,
        bytes,
        footer_pos: footer.pos,
        footer_len: footer.len,
        footer_crc: footer.crc,
        queues: index.queues(),
        key_ids: index.key_ids,
        newest_ms,
        queue_bytes,
    }))
}

/// A part's chunks as the S3 thread takes them (it joins them, off the shard's core).
fn chunks(part: ObjectPart) -> Vec<bytes::Bytes> {
    part.into_chunks().into_iter().map(bytes::Bytes::from).collect()
}
