//! Fetch on the queue's owner: one queue through its tag filter, or many of
//! this shard's queues with one long poll (consumers group their fetches by
//! shard). Kafka transactions in a queue are read as the reader's isolation
//! says: native readers and Kafka's read_committed ones stop at the queue's
//! last stable offset, and native readers never get a marker or a batch of
//! an aborted transaction (a Kafka reader drops those itself, from the
//! aborted list its edge adds).

use super::tag_filter::{self, TagFilter};
use crate::protocol::messages::{Fetch, Fetched};
use crate::server::core::metadata::QueueSlot;
use crate::server::core::txn_marks::Aborted;
use crate::server::core::{Core, Failure};
use ringmq_shards::batch::{self, BatchHeader};
use ringmq_shards::kafka::KafkaBatch;
use ringmq_shards::{QueueId, StorageError};
use std::time::Duration;

/// What a reader sees of Kafka transactions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isolation {
    /// Everything stored (Kafka's read_uncommitted).
    Uncommitted,
    /// Up to the last stable offset (Kafka's read_committed).
    Committed,
    /// Up to the last stable offset, without markers or aborted
    /// transactions' batches (native readers).
    CommittedOnly,
}

/// What a fetch of one queue read.
pub struct QueueRead {
    start: u64,
    end: u64,
    last_stable: u64,
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

    /// The queue's last stable offset (its end when no transaction is open).
    pub fn last_stable(&self) -> u64 {
        self.last_stable
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
/// waiting up to `wait` at the end of the queue (or, for a reader that
/// stops at the last stable offset, until a transaction ends).
pub async fn read_queue(
    core: &Core,
    slot: QueueSlot,
    f: &Fetch,
    wait: Duration,
    isolation: Isolation,
) -> Result<QueueRead, FetchFailed> {
    let asked = std::time::Instant::now();
    let read = read_stored(core, slot, f, wait, isolation).await?;
    let wait = wait.saturating_sub(asked.elapsed());
    let held = read.bytes.is_empty() && read.next_offset == f.offset && read.last_stable < read.end;
    if isolation != Isolation::Uncommitted && held && !wait.is_zero() {
        // Held at an open transaction: read again once one ends.
        core.txn_marks().wait_ended(wait).await;
        return read_stored(core, slot, f, Duration::ZERO, isolation).await;
    }
    Ok(read)
}

/// Reads one queue of this shard from `f.offset` as `read_queue` does, once.
async fn read_stored(
    core: &Core,
    slot: QueueSlot,
    f: &Fetch,
    wait: Duration,
    isolation: Isolation,
) -> Result<QueueRead, FetchFailed> {
    let filter = TagFilter::parse(&f.tags)?;
    let asked = std::time::Instant::now();
    let queue = QueueId(slot.storage_id);
    if !core.readable(wait).await {
        // Nothing yet, as at the end of the queue: the reader asks again.
        let start = answered_start(core, queue).map_err(read_failed)?;
        return Ok(QueueRead { start, end: f.offset, last_stable: f.offset, next_offset: f.offset, bytes: Vec::new() });
    }
    let wait = wait.saturating_sub(asked.elapsed());
    let (bytes, next_offset, end) = if filter == TagFilter::All {
        let read = core.read_here(slot, f.offset, f.max_bytes as usize, wait).await.map_err(read_failed)?;
        (read.bytes, read.next_offset, read.end_offset)
    } else if f.offset < core.storage().offsets(queue).map_err(read_failed)?.0 {
        // Below the local start, in a tiered queue's bucket, no index has
        // the tags' hashes: what is read there is filtered whole.
        let read = core.read_here(slot, f.offset, f.max_bytes as usize, Duration::ZERO).await.map_err(read_failed)?;
        let mut bytes = Vec::new();
        tag_filter::repack(&read.bytes, f.offset, &filter, &mut bytes);
        (bytes, read.next_offset, read.end_offset)
    } else {
        let max = f.max_bytes as usize;
        let read = tag_filter::read_filtered(core.storage(), queue, f.offset, max, wait, &filter)
            .await
            .map_err(read_failed)?;
        (read.bytes, read.next_offset, read.end_offset)
    };
    let start = answered_start(core, queue).map_err(read_failed)?;
    let marks = core.txn_marks();
    let last_stable = marks.last_stable(queue, end);
    let read = QueueRead { start, end, last_stable, next_offset, bytes };
    Ok(match isolation {
        Isolation::Uncommitted => read,
        _ if !marks.touched(queue) => read,
        Isolation::Committed => stable_part(read, f.offset, |_| true),
        Isolation::CommittedOnly => {
            let aborted = marks.aborted_between(queue, f.offset, last_stable);
            stable_part(read, f.offset, |b| {
                let Some(kafka) = batch::kafka_bytes(b).and_then(|k| KafkaBatch::stored(k).ok()) else { return true };
                let base = BatchHeader::decode(b).map_or(0, |h| h.base_offset);
                let dropped = |a: &Aborted| a.producer_id == kafka.producer_id() && a.first <= base && base < a.last;
                let aborted = kafka.is_transactional() && aborted.iter().any(dropped);
                !(kafka.is_control() || aborted)
            })
        }
    })
}

/// The queue's first offset a fetch answers: the local start while a
/// tiered queue's in the bucket is not known yet, so that reads of the
/// local tail go on without the bucket.
fn answered_start(core: &Core, queue: QueueId) -> Result<u64, StorageError> {
    match core.queue_offsets(queue) {
        Err(StorageError::Remote(_)) => Ok(core.storage().offsets(queue)?.0),
        known => known.map(|(start, _)| start),
    }
}

/// The batches of a read below its last stable offset that `keep` keeps;
/// the next offset stops at the last stable one (never below `from`).
fn stable_part(read: QueueRead, from: u64, keep: impl Fn(&[u8]) -> bool) -> QueueRead {
    let mut bytes = Vec::with_capacity(read.bytes.len());
    for b in batch::split(&read.bytes) {
        let Some(header) = BatchHeader::decode(b) else { break };
        if header.base_offset >= read.last_stable {
            break;
        }
        if !header.is_padding() && keep(b) {
            bytes.extend_from_slice(b);
        }
    }
    let next_offset = read.next_offset.min(read.last_stable).max(from);
    QueueRead { bytes, next_offset, ..read }
}

/// Reads one FetchMany entry; its queue must live on this shard.
async fn fetch_entry(core: &Core, f: &Fetch, wait: Duration, isolation: Isolation) -> Result<QueueRead, FetchFailed> {
    let slot = core.locate(&f.queue)?;
    if !core.owns(slot) {
        let m = format!("queue {} of {:?} lives on shard {}; fetch it there", f.queue.queue, f.queue.topic, slot.shard);
        return Err(Failure::invalid(m).into());
    }
    read_queue(core, slot, f, wait, isolation).await
}

/// Reads every entry at once; if none has anything to report, waits until
/// the first does (or `wait` passes) and reads the others again then.
pub async fn fetch_many(
    core: &Core,
    entries: &[Fetch],
    wait: Duration,
    isolation: Isolation,
) -> Vec<Result<QueueRead, FetchFailed>> {
    let news = |f: &Fetch, r: &Result<QueueRead, FetchFailed>| {
        r.as_ref().map_or(true, |r| !r.bytes.is_empty() || r.next_offset != f.offset)
    };
    let mut reads =
        futures_util::future::join_all(entries.iter().map(|f| fetch_entry(core, f, Duration::ZERO, isolation))).await;
    if wait.is_zero() || entries.is_empty() || entries.iter().zip(&reads).any(|(f, r)| news(f, r)) {
        return reads;
    }
    let waits = entries.iter().map(|f| Box::pin(fetch_entry(core, f, wait, isolation)));
    let (read, first, _) = futures_util::future::select_all(waits).await;
    reads[first] = read;
    let others: Vec<usize> = (0..entries.len()).filter(|&i| i != first).collect();
    let again = futures_util::future::join_all(
        others.iter().map(|&i| fetch_entry(core, &entries[i], Duration::ZERO, isolation)),
    );
    for (i, read) in others.into_iter().zip(again.await) {
        reads[i] = read;
    }
    reads
}
