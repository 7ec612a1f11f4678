//! ringmq-shards: the per-core storage engine of ringmq. One shard is owned by
//! one pinned core; all of its queues append into one commit log of
//! preallocated Direct I/O segments, made durable by group commit, indexed per
//! queue, read through a user-space cache, and recovered after a crash by
//! truncating at the first damaged batch. No networking here.

mod ballast;
pub mod batch;
mod cache;
mod checkpoint;
mod completion_yield;
pub mod config;
pub mod error;
mod fault;
mod flusher;
mod fs;
pub mod index;
mod index_preallocator;
mod join;
mod log;
pub mod lookup;
pub mod position;
mod preallocator;
mod reader;
pub mod record;
mod recovery;
mod retention;
mod round;
mod segment;
mod shard;
mod signal;
mod stats;

pub use config::{FlushPolicy, ShardConfig};
pub use error::{Result, StorageError};
pub use fault::FailureProbes;
pub use fs::{free_space, is_no_space};
pub use index::IndexEntry;
pub use join::{first_of, join_all};
pub use log::Appended;
pub use position::{LogPos, QueueId};
pub use reader::{ReadBatches, ReadWait};
pub use record::Record;
pub use segment::{parse_segment_name, segment_name};
pub use shard::Shard;
pub use signal::Signal;
pub use stats::ShardStats;
