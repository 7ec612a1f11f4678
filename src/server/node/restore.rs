//! `--tiered-restore`'s first step, before the shards open: a single node
//! whose data directory holds no topics takes the copy of its metadata
//! that shard 0 keeps in the bucket (`data/restore.rs`), so each shard
//! opens with the topics' queues where they were stored.

use super::NodeError;
use crate::objects::ObjectError;
use crate::server::core::manifest::NODE_METADATA;
use crate::server::core::metadata::Metadata;
use crate::server::core::objects::ObjectLink;
use std::path::Path;

/// Stores the bucket's metadata in `data_dir` unless it holds topics of its own.
pub fn take_metadata(data_dir: &Path, shards: usize, link: &ObjectLink) -> Result<(), NodeError> {
    let failed = |why: String| NodeError::Restore(why);
    let own = Metadata::load(data_dir).map_err(|e| failed(e.to_string()))?;
    if !own.topics.is_empty() {
        tracing::info!(topics = own.topics.len(), "--tiered-restore: the data directory has its own topics; kept");
        return Ok(());
    }
    let fetched =
        futures_lite::future::block_on(link.call(|store| async move { store.get(NODE_METADATA, None).await }));
    let bytes = match fetched {
        Ok(bytes) => bytes,
        Err(ObjectError::NotFound { .. }) => {
            return Err(failed(format!(
                "the bucket holds no {NODE_METADATA} (a single node with a bucket stores it; check --s3-bucket and --s3-prefix)"
            )))
        }
        Err(e) => return Err(failed(e.to_string())),
    };
    let metadata = Metadata::decode(&bytes).map_err(|e| failed(format!("{NODE_METADATA}: {e}")))?;
    let used =
        metadata.topics.values().flat_map(|t| t.queues.iter().filter_map(|h| h.stored())).map(|s| s.shard as usize + 1);
    let needed = used.max().unwrap_or(0);
    if needed > shards {
        return Err(failed(format!(
            "the bucket's topics are stored on {needed} shards: start with --cores naming {needed} CPUs"
        )));
    }
    metadata.store(data_dir).map_err(|e| failed(format!("storing the metadata in {}: {e}", data_dir.display())))?;
    tracing::info!(topics = metadata.topics.len(), "--tiered-restore: topics taken from the bucket");
    Ok(())
}
