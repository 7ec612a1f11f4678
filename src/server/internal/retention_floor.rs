//! The retention floor: the oldest log position an internal queue still
//! needs (the first undelivered timer, the first unfinished transaction,
//! each delay level's first undelivered retry). Retention never deletes a
//! segment at or above it.

use ringmq_shards::{LogPos, QueueId, Shard, StorageError};

/// The log position of the oldest record any `(queue, cursor)` still
/// needs: the record at its cursor, when the cursor is below the queue's end.
/// `LogPos(u64::MAX)` when none needs anything.
pub async fn floor(storage: &Shard, needed: &[(QueueId, u64)]) -> Result<LogPos, StorageError> {
    let mut floor = LogPos(u64::MAX);
    for &(queue, cursor) in needed {
        // A compacted queue's part below its log start is outside the log.
        let (start, end) = (storage.log_start(queue)?, storage.offsets(queue)?.1);
        if cursor < end {
            floor = floor.min(storage.entry(queue, cursor.max(start)).await?.position);
        }
    }
    Ok(floor)
}
