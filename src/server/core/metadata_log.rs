//! The topic metadata also lives in shard 0's log (internal queue
//! `METADATA`, one record per change), so that it replicates to a broker
//! group's followers with everything else: a follower writes the newest
//! record to its metadata file, and a node that starts as leader takes the
//! newest record over its file (a follower's file may lag its log).

use super::failure::Reason;
use super::metadata::Metadata;
use super::Failure;
use crate::server::internal::queues::{self, METADATA};
use ringmq_shards::{FlushPolicy, Shard, StorageError};
use std::path::Path;

/// Creates shard 0's metadata log if it lacks one.
pub async fn open(storage: &Shard) -> Result<(), StorageError> {
    queues::ensure(storage, &[(METADATA, FlushPolicy::Sync)]).await
}

/// Appends `metadata` as the newest record (shard 0, before the file is stored).
pub async fn append(storage: &Shard, metadata: &Metadata, now_ms: i64) -> Result<(), StorageError> {
    queues::append_one(storage, METADATA, b"", &metadata.encode(), now_ms).await
}

/// The end offset of the metadata log (0 while there is none).
pub fn end(storage: &Shard) -> u64 {
    storage.offsets(METADATA).map_or(0, |(_, end)| end)
}

/// The newest metadata record in shard 0's log, if there is one.
pub async fn newest(storage: &Shard) -> Result<Option<Metadata>, Failure> {
    if !storage.queues().contains(&METADATA) {
        return Ok(None);
    }
    let (start, end) = storage.offsets(METADATA)?;
    if end == start {
        return Ok(None);
    }
    let decoded =
        queues::with_record(storage, METADATA, end - 1, |r| Metadata::decode(r.value.unwrap_or_default())).await?;
    match decoded {
        Some(Ok(m)) => Ok(Some(m)),
        Some(Err(e)) => Err(damaged(format!("the newest metadata record does not decode: {e}"))),
        None => Ok(None),
    }
}

/// Makes the metadata file hold the newest record of the log, if it differs;
/// true if it was rewritten.
pub async fn store_newest(storage: &Shard, data_dir: &Path) -> Result<bool, Failure> {
    let Some(newest) = newest(storage).await? else { return Ok(false) };
    let dir = data_dir.to_path_buf();
    let current = Metadata::load(&dir).map_err(|e| damaged(format!("loading metadata: {e}")))?;
    if current == newest {
        return Ok(false);
    }
    glommio::executor()
        .spawn_blocking(move || newest.store(&dir))
        .await
        .map_err(|e| damaged(format!("storing metadata: {e}")))?;
    Ok(true)
}

fn damaged(why: String) -> Failure {
    Failure(Reason::StorageFailed, why)
}
