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
        // A record appended and trimmed to before it is committed leaves
        // its queue empty past the cursor ([1, 1) until the commit): nothing to keep.
        let (start, end) = (storage.log_start(queue)?, storage.offsets(queue)?.1);
        let from = cursor.max(start);
        if from < end {
            floor = floor.min(storage.entry(queue, from).await?.position);
        }
    }
    Ok(floor)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringmq_shards::batch::BatchBuilder;
    use ringmq_shards::{Record, ShardConfig};

    /// A broker group's leader appends a record and trims its queue to it
    /// (queue starts do) before the commit gate passes it: the queue shows
    /// [1, 1) for a while, and its cursor at 0 needs nothing.
    #[test]
    fn a_queue_trimmed_past_its_visible_end_needs_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().to_path_buf();
        glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
            .spawn(move || async move {
                let storage = Shard::open(ShardConfig::small(&p)).await.unwrap();
                let (q, other) = (QueueId(4), QueueId(5));
                storage.create_queues(&[(q, None), (other, None)]).await.unwrap();
                let mut one = BatchBuilder::new(0);
                one.push(&Record { value: Some(b"v"), ..Record::default() });
                let one = one.finish();
                storage.append(q, &one).await.unwrap();
                storage.append(other, &one).await.unwrap();
                storage.commit_to(Some(storage.log_positions().1));
                storage.append(q, &one).await.unwrap();
                storage.trim(q, 1).unwrap();
                assert_eq!(storage.offsets(q).unwrap(), (1, 1), "the second record is not committed yet");
                let others = storage.entry(other, 0).await.unwrap().position;
                assert_eq!(floor(&storage, &[(q, 0), (other, 0)]).await.unwrap(), others);
                assert_eq!(floor(&storage, &[(q, 0)]).await.unwrap(), LogPos(u64::MAX));
                storage.close().await.unwrap();
            })
            .unwrap()
            .join()
            .unwrap();
    }
}
