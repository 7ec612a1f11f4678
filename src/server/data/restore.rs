//! Restoring a single node from tiered storage's bucket (`--tiered-restore`),
//! as a lost disk is replaced: shard 0 keeps a copy of the node's metadata
//! in the bucket (`NODE_METADATA`, stored again whenever it changes); a node
//! started with an empty data directory takes that copy before its shards
//! open (`node/restore.rs`), and each shard then makes its tiered queues
//! that hold no offset begin where its manifest says the bucket's objects
//! end. Reads below come from the bucket, appends go on from there, and the
//! uploads go on from the manifest's generation. What was not uploaded
//! (the local tail of the lost disk, untiered topics, consumer offsets) is
//! not in the bucket and is not restored.

use super::upload::{load_manifest, UploadError};
use crate::objects::ObjectError;
use crate::server::core::manifest::NODE_METADATA;
use crate::server::core::metadata::Metadata;
use crate::server::core::objects::ObjectLink;
use crate::server::core::Core;
use ringmq_shards::QueueId;
use std::rc::Rc;

/// Stores the node's metadata in the bucket unless `stored` is it already
/// (shard 0 of a single node, each upload round).
pub async fn keep_metadata(
    core: &Core,
    link: &ObjectLink,
    stored: &mut Option<Rc<Metadata>>,
) -> Result<(), ObjectError> {
    let current = core.metadata();
    if stored.as_ref().is_some_and(|s| Rc::ptr_eq(s, &current)) {
        return Ok(());
    }
    let body = current.encode();
    link.call(move |store| async move { store.put(NODE_METADATA, body.into()).await }).await?;
    *stored = Some(current);
    Ok(())
}

/// Makes each of this shard's queues that holds no offset begin where the
/// manifest has it uploaded to, and records those starts (a restored
/// node's shard, before it serves).
pub async fn begin_queues(core: &Core) -> Result<(), UploadError> {
    let Some(link) = core.objects() else { return Ok(()) };
    let manifest = load_manifest(core, link).await?;
    let storage = core.storage();
    let mut begun = 0;
    for (topic, queue, slot) in core.metadata().slots_on(core.id()) {
        let (id, uploaded) = (QueueId(slot.storage_id), manifest.uploaded_next(slot.storage_id));
        if uploaded > 0 && storage.next_offset(id)? == 0 {
            storage.begin_at(id, uploaded)?;
            tracing::info!(shard = core.id(), topic, queue, offset = uploaded, "restored from the bucket");
            begun += 1;
        }
    }
    if begun > 0 {
        core.record_queue_starts().await?;
    }
    Ok(())
}
