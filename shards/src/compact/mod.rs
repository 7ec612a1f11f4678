//! Compaction: a queue of a compacted topic keeps at least the latest record
//! of every key. A pass (`pass.rs`) rewrites the queue's compacted part
//! (`clean.rs`, a file of its own beside the queue's index) from the old
//! part and the log's records since, keeping each key's latest; the log's
//! share of the queue then starts where the part ends, so retention gives
//! the log's segments back as for any other queue. Reads below the part's
//! end are served from the part, in offset order, with gaps where records
//! were removed. The owner (the broker) decides when a queue is compacted
//! and up to where. A queue moving here from another broker group brings
//! its part whole (`import.rs`).

pub(crate) mod clean;
mod import;
mod pass;

pub use clean::Compacted;
pub use import::PartImport;
pub use pass::{Compaction, CompactionReport};
