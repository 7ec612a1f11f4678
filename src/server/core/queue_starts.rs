//! The starts of a shard's topic queues, in its log: a queue's start lives
//! in the engine's checkpoint, which a broker group's followers do not get,
//! so each time retention or DeleteRecords moves starts the shard appends
//! one record of every moved start (internal queue `QUEUE_STARTS`), and a
//! shard that opens as leader or single node applies the newest record. A
//! follower promoted at fail-over thus serves the starts its old leader
//! had recorded: records deleted before it do not come back.
//!
//! Only the newest record counts, so the queue is trimmed to it and keeps
//! one segment's worth of nothing else alive.

use super::Core;
use crate::server::internal::queues::{self, QUEUE_STARTS};
use glommio::sync::Semaphore;
use ringmq_shards::{FlushPolicy, QueueId, Shard, StorageError};

/// Most queue starts one record holds (12 bytes each, well within a batch).
/// A shard with more moved starts records the first ones and says so; the
/// rest are not carried over a fail-over.
const MOST_RECORDED: usize = 65_536;

/// Creates the shard's queue-starts log if it lacks one.
pub async fn open(storage: &Shard) -> Result<(), StorageError> {
    queues::ensure(storage, &[(QUEUE_STARTS, FlushPolicy::Sync)]).await
}

/// Serializes the shard's records: each holds the starts it read, so one
/// written after a newer one would put starts back.
pub struct QueueStarts {
    recording: Semaphore,
}

impl Default for QueueStarts {
    fn default() -> QueueStarts {
        QueueStarts { recording: Semaphore::new(1) }
    }
}

impl Core {
    /// Durably records the starts of this shard's topic queues, if they
    /// differ from the newest record.
    pub async fn record_queue_starts(&self) -> Result<(), StorageError> {
        let _one_at_a_time = self.queue_starts.recording.acquire_permit(1).await;
        record(self).await
    }

    /// Moves this shard's queue starts to where the newest record puts
    /// them (never back; a queue the record names and the shard lacks is
    /// skipped, a start past a queue's end stops at its end; a queue that
    /// never held an offset begins there: one copied empty, `Shard::begin_at`).
    pub async fn restore_queue_starts(&self) -> Result<(), StorageError> {
        let storage = self.storage();
        for (queue, start) in newest(storage).await? {
            let Ok((_, end)) = storage.offsets(queue) else { continue };
            if storage.next_offset(queue)? == 0 {
                storage.begin_at(queue, start)?;
            } else {
                storage.trim(queue, start.min(end))?;
            }
        }
        Ok(())
    }
}

async fn record(core: &Core) -> Result<(), StorageError> {
    let storage = core.storage();
    let starts = moved_starts(core)?;
    if starts == newest(storage).await? {
        return Ok(());
    }
    if starts.len() > MOST_RECORDED {
        tracing::warn!(
            shard = core.id(),
            queues = starts.len(),
            most = MOST_RECORDED,
            "more moved queue starts than one record holds; the rest are not carried over a fail-over"
        );
    }
    let value: Vec<u8> = starts
        .iter()
        .take(MOST_RECORDED)
        .flat_map(|(queue, start)| queue.0.to_le_bytes().into_iter().chain(start.to_le_bytes()))
        .collect();
    let at = storage.offsets(QUEUE_STARTS)?.1;
    queues::append_one(storage, QUEUE_STARTS, b"", &value, core.clock().now_ms() as i64).await?;
    storage.trim(QUEUE_STARTS, at)?;
    Ok(())
}

/// The queue-starts record's offset retention must keep (its newest).
pub fn needed(storage: &Shard) -> Result<(QueueId, u64), StorageError> {
    let end = storage.offsets(QUEUE_STARTS)?.1;
    Ok((QUEUE_STARTS, end.saturating_sub(1)))
}

/// Every topic queue of this shard whose start is past 0, by storage id.
fn moved_starts(core: &Core) -> Result<Vec<(QueueId, u64)>, StorageError> {
    let mut starts = Vec::new();
    for (_, _, slot) in core.metadata().slots_on(core.id()) {
        let queue = QueueId(slot.storage_id);
        let start = core.storage().offsets(queue)?.0;
        if start > 0 {
            starts.push((queue, start));
        }
    }
    starts.sort_unstable();
    Ok(starts)
}

/// The starts the newest record holds (none when there is no record).
async fn newest(storage: &Shard) -> Result<Vec<(QueueId, u64)>, StorageError> {
    let (start, end) = storage.offsets(QUEUE_STARTS)?;
    if start == end {
        return Ok(Vec::new());
    }
    let decoded = queues::with_record(storage, QUEUE_STARTS, end - 1, |r| decode(r.value.unwrap_or_default())).await?;
    Ok(decoded.unwrap_or_default())
}

fn decode(value: &[u8]) -> Vec<(QueueId, u64)> {
    value
        .chunks_exact(12)
        .map(|entry| {
            let queue = u32::from_le_bytes(entry[..4].try_into().expect("4 bytes"));
            (QueueId(queue), u64::from_le_bytes(entry[4..].try_into().expect("8 bytes")))
        })
        .collect()
}
