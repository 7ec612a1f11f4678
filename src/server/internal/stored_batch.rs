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

/// The first offset in [from, until) whose batch's newest record is at or
/// after `cutoff_ms` (or `until`), by a binary search over the offsets:
/// what time retention and the compaction lag go by (a record far in the
/// future holds everything after it, as in Kafka).
pub async fn first_newer_than(
    storage: &Shard,
    queue: QueueId,
    from: u64,
    until: u64,
    cutoff_ms: i64,
) -> Result<u64, StorageError> {
    let (mut lo, mut hi) = (from, until);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if newest_timestamp(storage, queue, mid).await? < cutoff_ms {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    Ok(lo)
}
