//! Fetch on the queue's owner: one queue through its tag filter, or many of
//! this shard's queues with one long poll (consumers group their fetches by
//! shard).

use super::tag_filter::{self, TagFilter};
use crate::protocol::messages::{Fetch, Fetched};
use crate::server::core::metadata::QueueSlot;
use crate::server::core::{Core, Failure};
use ringmq_shards::{QueueId, StorageError};
use std::time::Duration;

/// What a fetch of one queue read.
pub struct QueueRead {
    start: u64,
    end: u64,
    next_offset: u64,
    bytes: Vec<u8>,
}

impl QueueRead {
    pub fn fetched(&self) -> Fetched<'_> {
        Fetched { start: self.start, end: self.end, next_offset: self.next_offset, batches: &self.bytes }
    }

    /// The offset after the last one read (or skipped by a filter).
    pub fn next_offset(&self) -> u64 {
        self.next_offset
    }

    /// The queue's start and end, and the batches read, owned (for an edge
    /// that serves them in another format without copying them first).
    pub fn into_parts(self) -> (u64, u64, Vec<u8>) {
        (self.start, self.end, self.bytes)
    }
}

/// Why a fetch of one queue failed; a stored batch that fails its check
/// names the offsets it covers, so that a consumer may skip them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchFailed {
    pub failure: Failure,
    pub damaged: Option<(u64, u64)>,
}

impl From<Failure> for FetchFailed {
    fn from(failure: Failure) -> Self {
        FetchFailed { failure, damaged: None }
    }
}

/// A read's storage error as a fetch's failure: damaged offsets are named,
/// so that a consumer may skip them.
fn read_failed(e: StorageError) -> FetchFailed {
    let damaged = match e {
        StorageError::CorruptBatch { first_offset, next_offset, .. } => Some((first_offset, next_offset)),
        _ => None,
    };
    FetchFailed { failure: e.into(), damaged }
}

/// Reads one queue of this shard from `f.offset`, through its tag filter,
/// waiting up to `wait` at the end of the queue.
pub async fn read_queue(core: &Core, slot: QueueSlot, f: &Fetch, wait: Duration) -> Result<QueueRead, FetchFailed> {
    let filter = TagFilter::parse(&f.tags)?;
    let asked = std::time::Instant::now();
    if !core.readable(wait).await {
        // Nothing yet, as at the end of the queue: the reader asks again.
        let (start, _) = core.storage().offsets(QueueId(slot.storage_id)).map_err(read_failed)?;
        return Ok(QueueRead { start, end: f.offset, next_offset: f.offset, bytes: Vec::new() });
    }
    let wait = wait.saturating_sub(asked.elapsed());
    let (bytes, next_offset, end) = if filter == TagFilter::All {
        let read = core.read_here(slot, f.offset, f.max_bytes as usize, wait).await.map_err(read_failed)?;
        (read.bytes, read.next_offset, read.end_offset)
    } else {
        let q = QueueId(slot.storage_id);
        let max = f.max_bytes as usize;
        let read =
            tag_filter::read_filtered(core.storage(), q, f.offset, max, wait, &filter).await.map_err(read_failed)?;
        (read.bytes, read.next_offset, read.end_offset)
    };
    let (start, _) = core.storage().offsets(QueueId(slot.storage_id)).map_err(read_failed)?;
    Ok(QueueRead { start, end, next_offset, bytes })
}

/// Reads one FetchMany entry; its queue must live on this shard.
async fn fetch_entry(core: &Core, f: &Fetch, wait: Duration) -> Result<QueueRead, FetchFailed> {
    let slot = core.locate(&f.queue)?;
    if !core.owns(slot) {
        let m = format!("queue {} of {:?} lives on shard {}; fetch it there", f.queue.queue, f.queue.topic, slot.shard);
        return Err(Failure::invalid(m).into());
    }
    read_queue(core, slot, f, wait).await
}

/// Reads every entry at once; if none has anything to report, waits until
/// the first does (or `wait` passes) and reads the others again then.
pub async fn fetch_many(core: &Core, entries: &[Fetch], wait: Duration) -> Vec<Result<QueueRead, FetchFailed>> {
    let news = |f: &Fetch, r: &Result<QueueRead, FetchFailed>| {
        r.as_ref().map_or(true, |r| !r.bytes.is_empty() || r.next_offset != f.offset)
    };
    let mut reads = futures_util::future::join_all(entries.iter().map(|f| fetch_entry(core, f, Duration::ZERO))).await;
    if wait.is_zero() || entries.is_empty() || entries.iter().zip(&reads).any(|(f, r)| news(f, r)) {
        return reads;
    }
    let waits = entries.iter().map(|f| Box::pin(fetch_entry(core, f, wait)));
    let (read, first, _) = futures_util::future::select_all(waits).await;
    reads[first] = read;
    let others: Vec<usize> = (0..entries.len()).filter(|&i| i != first).collect();
    let again = futures_util::future::join_all(others.iter().map(|&i| fetch_entry(core, &entries[i], Duration::ZERO)));
    for (i, read) in others.into_iter().zip(again.await) {
        reads[i] = read;
    }
    reads
}
