//! Counters of one shard, owned by the shard and read as a snapshot.

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
    /// Segments deleted by retention.
    pub segments_deleted: u64,
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
    /// Reads refused because a stored batch failed its check.
    pub corrupt_reads: u64,
    /// Appends of a batch stored before (a retry), answered with where it was.
    pub duplicates: u64,
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
    pub synced_records: Cell<u64>,
    pub synced_bytes: Cell<u64>,
    pub backpressure_waits: Cell<u64>,
    pub segment_waits: Cell<u64>,
    pub segments_created: Cell<u64>,
    pub segments_deleted: Cell<u64>,
    pub index_files_created: Cell<u64>,
    pub cache_hits: Cell<u64>,
    pub cache_misses: Cell<u64>,
    pub cache_readahead: Cell<u64>,
    pub index_page_reads: Cell<u64>,
    pub checkpoints: Cell<u64>,
    pub kernel_yields: Cell<u64>,
    pub corrupt_reads: Cell<u64>,
    pub duplicates: Cell<u64>,
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
            synced_records: self.synced_records.get(),
            synced_bytes: self.synced_bytes.get(),
            backpressure_waits: self.backpressure_waits.get(),
            segment_waits: self.segment_waits.get(),
            segments_created: self.segments_created.get(),
            segments_deleted: self.segments_deleted.get(),
            index_files_created: self.index_files_created.get(),
            cache_hits: self.cache_hits.get(),
            cache_misses: self.cache_misses.get(),
            cache_evictions,
            cache_readahead: self.cache_readahead.get(),
            index_page_reads: self.index_page_reads.get(),
            checkpoints: self.checkpoints.get(),
            kernel_yields: self.kernel_yields.get(),
            corrupt_reads: self.corrupt_reads.get(),
            duplicates: self.duplicates.get(),
        }
    }
}
