//! ringmq-shards: the per-core storage engine of ringmq. One shard is owned by
//! one pinned core; all of its queues append into one commit log of
//! preallocated Direct I/O segments, made durable by group commit, indexed per
//! queue, read through a user-space cache, and recovered after a crash by
//! truncating at the first damaged batch. No networking here.

mod compact;
pub mod config;
pub mod crypt;
pub mod error;
mod fs;
mod index;
mod lifecycle;
mod log;
pub mod lookup;
pub mod position;
mod probe;
mod read;
mod replica;
mod shard;
mod signal;
pub mod tiered;

pub use compact::{Compacted, Compaction, CompactionReport, PartImport};
pub use config::{FlushPolicy, ShardConfig};
pub use error::{Result, StorageError};
pub use fs::{free_space, is_no_space, replace_durably};
pub use index::IndexEntry;
pub use log::segment::{parse_segment_name, segment_name};
pub use log::Appended;
pub use position::{LogPos, QueueId};
pub use probe::fault::FailureProbes;
pub use probe::histogram::{Histogram, HistogramSnapshot, LATENCY_SECONDS, SIZES};
pub use probe::stats::{SegmentBytes, ShardHistograms, ShardStats};
pub use read::reader::{ReadBatches, ReadWait};
pub use record::Record;
pub use replica::{shipped_batches, LogRange};
pub use ringmq_format::{batch, kafka, record, FormatError};
pub use shard::{RecordTimes, Shard};
pub use signal::Signal;
