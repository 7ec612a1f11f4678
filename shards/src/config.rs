//! Shard configuration: every bound has a name and a default.

use crate::batch;
use crate::error::{Result, StorageError};
use crate::position::PAGE_BYTES;
use std::path::PathBuf;
use std::time::Duration;

/// When an append is acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FlushPolicy {
    /// Acknowledge after the batch's bytes are fdatasync'd (default).
    #[default]
    Sync,
    /// Acknowledge once queued; bytes are flushed by interval and by size.
    Async,
}

/// Configuration of one shard's storage.
#[derive(Debug, Clone)]
pub struct ShardConfig {
    /// Directory owned by this shard.
    pub dir: PathBuf,
    /// Size of every commit log segment.
    pub segment_bytes: u64,
    /// Largest group-commit round (one write, one fdatasync).
    pub round_bytes_max: usize,
    /// Largest batch accepted by append.
    pub batch_bytes_max: usize,
    /// The most a compressed Kafka batch's records may inflate to (append
    /// inflates them to check and index them).
    pub inflated_bytes_max: usize,
    /// Bytes appended but not yet written and synced before appends wait (back-pressure).
    pub pending_bytes_max: usize,
    /// How long the flusher waits for more appends before closing a small round (0 = never waits).
    pub flush_delay: Duration,
    /// Durable writes the flusher keeps in flight at once: with 2 or more, the
    /// appends that arrive during a write go out in the next one at once
    /// instead of waiting for it (1 = one write at a time).
    pub flush_depth: usize,
    /// While durable writes are in flight, the shard gives its core to the
    /// kernel (sched_yield) this often, so that the completion work the
    /// kernel queues on this core runs without waiting for the shard to
    /// sleep (0: never).
    pub completion_yield: Duration,
    /// Async policy: flush at least this often.
    pub async_flush_interval: Duration,
    /// Async policy: flush once this many bytes are unsynced.
    pub async_flush_bytes: usize,
    /// Policy of queues created without one.
    pub default_flush_policy: FlushPolicy,
    /// Memory of the user-space log cache.
    pub cache_bytes: usize,
    /// Unit of the log cache and of log reads from disk.
    pub cache_chunk_bytes: usize,
    /// Chunks read ahead after a sequential miss.
    pub readahead_chunks: usize,
    /// Entries per queue index file (16 bytes each).
    pub index_file_entries: u64,
    /// Index pages (4 KiB) cached for reads of old offsets.
    pub index_cache_pages: usize,
    /// Index entries kept in memory before a checkpoint writes them out.
    pub index_mem_entries_max: usize,
    /// Interval between checkpoints (index written and synced; recovery scans from there).
    pub checkpoint_interval: Duration,
    /// Delete segments whose newest data is older than this.
    pub retention_age: Option<Duration>,
    /// Delete the oldest segments while the log is larger than this.
    pub retention_bytes: Option<u64>,
    /// How often retention runs.
    pub retention_interval: Duration,
    /// Retired segment files kept for recycling (each `segment_bytes` of
    /// disk): retention hands this many back as spares for new segments
    /// instead of deleting them, so the log never zero-fills a new segment
    /// while retention keeps up. Files past the bound are deleted (0: none kept).
    pub segment_pool_max: usize,
    /// Space held back in a ballast file, released when the disk fills so
    /// checkpoints and retention can still write (0: none).
    pub ballast_bytes: u64,
    /// Batches remembered so that the same batch appended again (a retry)
    /// is answered with where it was stored, not stored twice (0: none).
    pub recent_batches: usize,
    /// Data keys: with them every batch appended is sealed (encrypted at
    /// rest) and sealed batches are opened when read (None: in clear).
    pub keyring: Option<std::sync::Arc<crate::crypt::keyring::Keyring>>,
    /// Keys a compaction pass maps at most (about 40 bytes of memory each):
    /// a dirty range with more distinct keys is compacted over several passes.
    pub compaction_keys_max: usize,
    /// Share of the shard's core a compaction pass takes at most, in percent.
    pub compaction_cpu_percent: u32,
    /// Bytes a compaction pass writes per second at most (0: no bound).
    pub compaction_bytes_per_sec: u64,
}

/// Default of `segment_pool_max`: what size retention retires between two
/// rollovers (it runs at each), and some room for age retention's bursts.
pub const SEGMENT_POOL_MAX: usize = 4;

/// Default of `recent_batches`: about 1.5 MiB of memory per shard.
pub const RECENT_BATCHES: usize = 16 * 1024;
/// Default `round_bytes_max`: 1 MiB and 16 KiB, so that the default batch
/// limit (two pages less, what a round holds whatever its first page) takes
/// Kafka's default `message.max.bytes` (1 MiB + 12 bytes) in its wrapper.
pub const ROUND_BYTES_MAX: usize = (1 << 20) + (16 << 10);
/// Default `inflated_bytes_max`: 32 times a default batch, past what text
/// compresses to with any of Kafka's codecs.
pub const INFLATED_BYTES_MAX: usize = 32 << 20;

impl ShardConfig {
    /// Defaults for a production shard in `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        ShardConfig {
            dir: dir.into(),
            segment_bytes: 1 << 30,
            round_bytes_max: ROUND_BYTES_MAX,
            batch_bytes_max: ROUND_BYTES_MAX - 2 * PAGE_BYTES as usize,
            inflated_bytes_max: INFLATED_BYTES_MAX,
            pending_bytes_max: 16 << 20,
            flush_delay: Duration::ZERO,
            flush_depth: 2,
            completion_yield: Duration::from_micros(20),
            async_flush_interval: Duration::from_millis(500),
            async_flush_bytes: 4 * PAGE_BYTES as usize,
            default_flush_policy: FlushPolicy::Sync,
            cache_bytes: 256 << 20,
            cache_chunk_bytes: 64 << 10,
            readahead_chunks: 4,
            index_file_entries: 1 << 16,
            index_cache_pages: 1024,
            index_mem_entries_max: 1 << 20,
            checkpoint_interval: Duration::from_secs(10),
            retention_age: None,
            retention_bytes: None,
            retention_interval: Duration::from_secs(60),
            segment_pool_max: SEGMENT_POOL_MAX,
            ballast_bytes: 64 << 20,
            recent_batches: RECENT_BATCHES,
            keyring: None,
            compaction_keys_max: 1 << 20,
            compaction_cpu_percent: 10,
            compaction_bytes_per_sec: 64 << 20,
        }
    }

    /// Small sizes for tests: 1 MiB segments, 4 MiB cache, 1024-entry index files.
    pub fn small(dir: impl Into<PathBuf>) -> Self {
        ShardConfig {
            segment_bytes: 1 << 20,
            round_bytes_max: 256 << 10,
            batch_bytes_max: (256 << 10) - 2 * PAGE_BYTES as usize,
            pending_bytes_max: 1 << 20,
            cache_bytes: 4 << 20,
            index_file_entries: 1024,
            index_cache_pages: 16,
            index_mem_entries_max: 4096,
            ballast_bytes: 0,
            ..ShardConfig::new(dir)
        }
    }

    /// What append checks a producer's batch against.
    pub fn limits(&self) -> batch::Limits {
        batch::Limits { batch_bytes: self.batch_bytes_max, inflated_bytes: self.inflated_bytes_max }
    }

    /// Checks the relations between the sizes.
    pub fn validate(&self) -> Result<()> {
        let page = PAGE_BYTES as usize;
        let chunk = self.cache_chunk_bytes;
        let fail = |m: String| Err(StorageError::Config(m));
        if chunk < page || !chunk.is_power_of_two() {
            return fail(format!("cache_chunk_bytes {chunk} must be a power of two of at least {page}"));
        }
        if self.segment_bytes < 1 << 20 || !self.segment_bytes.is_multiple_of(chunk as u64) {
            return fail(format!(
                "segment_bytes {} must be at least 1 MiB and a multiple of cache_chunk_bytes",
                self.segment_bytes
            ));
        }
        if self.round_bytes_max < 4 * page || !self.round_bytes_max.is_multiple_of(page) {
            return fail(format!(
                "round_bytes_max {} must be a multiple of {page} and at least 4 pages",
                self.round_bytes_max
            ));
        }
        if self.batch_bytes_max > self.round_bytes_max || self.batch_bytes_max as u64 > self.segment_bytes / 2 {
            return fail(format!("batch_bytes_max {} must fit in a round and in half a segment", self.batch_bytes_max));
        }
        if self.inflated_bytes_max > batch::INFLATED_BYTES_CEILING {
            return fail(format!(
                "inflated_bytes_max {} must be at most {} (what readers inflate a stored batch to)",
                self.inflated_bytes_max,
                batch::INFLATED_BYTES_CEILING
            ));
        }
        if !(1..=100).contains(&self.compaction_cpu_percent) {
            return fail(format!("compaction_cpu_percent {} must be from 1 to 100", self.compaction_cpu_percent));
        }
        if self.compaction_keys_max < 1024 {
            return fail(format!("compaction_keys_max {} must be at least 1024", self.compaction_keys_max));
        }
        if self.flush_depth == 0 {
            return Err(StorageError::Config("flush_depth must be at least 1".into()));
        }
        if self.pending_bytes_max < self.round_bytes_max {
            return fail("pending_bytes_max must be at least round_bytes_max".into());
        }
        if self.cache_bytes < 2 * chunk {
            return fail("cache_bytes must hold at least two chunks".into());
        }
        if self.index_file_entries == 0
            || !self.index_file_entries.is_multiple_of(crate::index::queue_index::ENTRIES_PER_PAGE)
        {
            return fail(format!(
                "index_file_entries must be a positive multiple of {}",
                crate::index::queue_index::ENTRIES_PER_PAGE
            ));
        }
        if self.index_cache_pages == 0 {
            return fail("index_cache_pages must be at least 1".into());
        }
        Ok(())
    }
}
