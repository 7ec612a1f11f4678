//! One stored batch of any queue read back: the batch holding an offset,
//! and its newest record time (what retention compares, and the time a
//! LogAppendTime batch was stored at).

use ringmq_shards::{batch, QueueId, ReadWait, Shard, StorageError};

/// The stored batch holding `offset`, if one is readable there.
pub async fn batch_at(storage: &Shard, queue: QueueId, offset: u64) -> Result<Option<Vec<u8>>, StorageError> {
    let mut bytes = storage.read(queue, offset, 1, ReadWait::No).await?.bytes;
    let Some(first) = batch::split(&bytes).next().map(<[u8]>::len) else { return Ok(None) };
    bytes.truncate(first);
    Ok(Some(bytes))
}

/// The newest timestamp of the batch holding `offset`.
pub async fn newest_timestamp(storage: &Shard, queue: QueueId, offset: u64) -> Result<i64, StorageError> {
    let Some(first) = batch_at(storage, queue, offset).await? else {
        let (start, end) = storage.offsets(queue)?;
        return Err(StorageError::OffsetOutOfRange { queue: queue.0, offset, start, end });
    };
    Ok(batch::newest_timestamp(&first)?)
}
