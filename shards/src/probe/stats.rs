//! Counters and histograms of one shard, owned by the shard and read as snapshots.

use super::histogram::{Histogram, HistogramSnapshot, LATENCY_SECONDS, SIZES};
use std::cell::Cell;

/// A snapshot of a shard's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ShardStats {
    /// Batches appended.
    pub appends: u64,
    /// Records appended.
    pub records: u64,
    /// Bytes of batches appended.
    pub append_bytes: u64,
    /// Group-commit rounds written.
    pub rounds: u64,
    /// Bytes written to the log, tail-page rewrites included.
    pub write_bytes: u64,
    /// Durability barriers on log segments: fdatasync calls and O_DSYNC writes.
    pub fsyncs: u64,
    /// Durable writes started while an earlier one was still in flight.
    pub overlapped_writes: u64,
    /// Microseconds during which at least one durable write was in flight
    /// (submitted and not completed): against the elapsed time, how much of
    /// it the log kept the disk busy.
    pub write_busy_us: u64,
    /// Records made durable by those fdatasyncs.
    pub synced_records: u64,
    /// Batch bytes made durable by those fdatasyncs.
    pub synced_bytes: u64,
    /// Appends that waited for pending bytes to drain (back-pressure).
    pub backpressure_waits: u64,
    /// Appends that waited for the next segment to be preallocated.
    pub segment_waits: u64,
    /// Segments created (preallocated and zero-filled).
    pub segments_created: u64,
    /// Bytes of zeros written into new segments.
    pub zero_fill_bytes: u64,
    /// Segments deleted by retention.
    pub segments_deleted: u64,
    /// Segments retention retired into the pool of spares instead of deleting them.
    pub segments_pooled: u64,
    /// Segments made from a pooled file (renamed, nothing written).
    pub segments_recycled: u64,
    /// Queue index files created (preallocated and zero-filled).
    pub index_files_created: u64,
    /// Log cache hits, misses, evictions and chunks read ahead.
    pub cache_hits: u64,
    pub cache_misses: u64,
    pub cache_evictions: u64,
    pub cache_readahead: u64,
    /// Index pages read from disk.
    pub index_page_reads: u64,
    /// Checkpoints written.
    pub checkpoints: u64,
    /// Times the shard gave its core to the kernel while durable writes were
    /// in flight (`ShardConfig::completion_yield`).
    pub kernel_yields: u64,
    /// Times it stopped yielding because no durable write started or
    /// finished for a while (`completion_yield::YIELD_LIMIT`).
    pub kernel_yields_stopped: u64,
    /// Reads refused because a stored batch failed its check.
    pub corrupt_reads: u64,
    /// Appends of a batch stored before (a retry), answered with where it was.
    pub duplicates: u64,
    /// Compaction passes finished, records they read and removed, and
    /// bytes they wrote into compacted parts.
    pub compaction_passes: u64,
    pub compaction_records_read: u64,
    pub compaction_records_removed: u64,
    pub compaction_bytes_written: u64,
}

/// Live counters, one Cell each (the shard is single-threaded).
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub appends: Cell<u64>,
    pub records: Cell<u64>,
    pub append_bytes: Cell<u64>,
    pub rounds: Cell<u64>,
    pub write_bytes: Cell<u64>,
    pub fsyncs: Cell<u64>,
    pub overlapped_writes: Cell<u64>,
    pub write_busy_us: Cell<u64>,
    pub synced_records: Cell<u64>,
    pub synced_bytes: Cell<u64>,
    pub backpressure_waits: Cell<u64>,
    pub segment_waits: Cell<u64>,
    pub segments_created: Cell<u64>,
    pub zero_fill_bytes: Cell<u64>,
    pub segments_deleted: Cell<u64>,
    pub segments_pooled: Cell<u64>,
    pub segments_recycled: Cell<u64>,
    pub index_files_created: Cell<u64>,
    pub cache_hits: Cell<u64>,
    pub cache_misses: Cell<u64>,
    pub cache_readahead: Cell<u64>,
    pub index_page_reads: Cell<u64>,
    pub checkpoints: Cell<u64>,
    pub kernel_yields: Cell<u64>,
    pub kernel_yields_stopped: Cell<u64>,
    pub corrupt_reads: Cell<u64>,
    pub duplicates: Cell<u64>,
    pub compaction_passes: Cell<u64>,
    pub compaction_records_read: Cell<u64>,
    pub compaction_records_removed: Cell<u64>,
    pub compaction_bytes_written: Cell<u64>,
}

/// Adds `n` to a counter.
pub(crate) fn add(counter: &Cell<u64>, n: u64) {
    counter.set(counter.get() + n);
}

impl Counters {
    pub fn snapshot(&self, cache_evictions: u64) -> ShardStats {
        ShardStats {
            appends: self.appends.get(),
            records: self.records.get(),
            append_bytes: self.append_bytes.get(),
            rounds: self.rounds.get(),
            write_bytes: self.write_bytes.get(),
            fsyncs: self.fsyncs.get(),
            overlapped_writes: self.overlapped_writes.get(),
            write_busy_us: self.write_busy_us.get(),
            synced_records: self.synced_records.get(),
            synced_bytes: self.synced_bytes.get(),
            backpressure_waits: self.backpressure_waits.get(),
            segment_waits: self.segment_waits.get(),
            segments_created: self.segments_created.get(),
            zero_fill_bytes: self.zero_fill_bytes.get(),
            segments_deleted: self.segments_deleted.get(),
            segments_pooled: self.segments_pooled.get(),
            segments_recycled: self.segments_recycled.get(),
            index_files_created: self.index_files_created.get(),
            cache_hits: self.cache_hits.get(),
            cache_misses: self.cache_misses.get(),
            cache_evictions,
            cache_readahead: self.cache_readahead.get(),
            index_page_reads: self.index_page_reads.get(),
            checkpoints: self.checkpoints.get(),
            kernel_yields: self.kernel_yields.get(),
            kernel_yields_stopped: self.kernel_yields_stopped.get(),
            corrupt_reads: self.corrupt_reads.get(),
            duplicates: self.duplicates.get(),
            compaction_passes: self.compaction_passes.get(),
            compaction_records_read: self.compaction_records_read.get(),
            compaction_records_removed: self.compaction_records_removed.get(),
            compaction_bytes_written: self.compaction_bytes_written.get(),
        }
    }
}

/// The shard's histograms at one moment.
#[derive(Debug, Clone, PartialEq)]
pub struct ShardHistograms {
    /// Seconds from an append's call to its answer (durable for a sync queue).
    pub append_seconds: HistogramSnapshot,
    /// Seconds of one durability barrier: an O_DSYNC write of group-commit
    /// rounds, or an fdatasync of async-policy segments.
    pub sync_seconds: HistogramSnapshot,
    /// Records one durability barrier made durable: the group-commit batch.
    pub sync_records: HistogramSnapshot,
}

/// Live histograms (the shard is single-threaded).
#[derive(Debug)]
pub(crate) struct Histograms {
    pub append_seconds: Histogram,
    pub sync_seconds: Histogram,
    pub sync_records: Histogram,
}

impl Default for Histograms {
    fn default() -> Histograms {
        Histograms {
            append_seconds: Histogram::new(LATENCY_SECONDS),
            sync_seconds: Histogram::new(LATENCY_SECONDS),
            sync_records: Histogram::new(SIZES),
        }
    }
}

impl Histograms {
    pub fn snapshot(&self) -> ShardHistograms {
        ShardHistograms {
            append_seconds: self.append_seconds.snapshot(),
            sync_seconds: self.sync_seconds.snapshot(),
            sync_records: self.sync_records.snapshot(),
        }
    }
}

/// Bytes of the log's segment files by state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SegmentBytes {
    /// The segment appends go to.
    pub active: u64,
    /// The next segment, preallocated and zero-filled (0 while it is made).
    pub spare: u64,
    /// Full segments that retention has not deleted yet.
    pub sealed: u64,
    /// Retired segment files kept for recycling.
    pub pooled: u64,
}

/// Reads parked at a queue's end right now, waiting for data, per queue.
#[derive(Debug, Default)]
pub(crate) struct ParkedReads {
    by_queue: std::cell::RefCell<std::collections::HashMap<crate::position::QueueId, u64>>,
}

/// One parked read, counted until dropped (however its wait ends, a dropped fetch included).
pub(crate) struct Parked<'a> {
    reads: &'a ParkedReads,
    queue: crate::position::QueueId,
}

impl ParkedReads {
    pub fn park(&self, queue: crate::position::QueueId) -> Parked<'_> {
        *self.by_queue.borrow_mut().entry(queue).or_default() += 1;
        Parked { reads: self, queue }
    }

    pub fn of(&self, queue: crate::position::QueueId) -> u64 {
        self.by_queue.borrow().get(&queue).copied().unwrap_or(0)
    }
}

impl Drop for Parked<'_> {
    fn drop(&mut self) {
        let mut by_queue = self.reads.by_queue.borrow_mut();
        let count = by_queue.get_mut(&self.queue).expect("counted when parked");
        *count -= 1;
        if *count == 0 {
            by_queue.remove(&self.queue);
        }
    }
}
