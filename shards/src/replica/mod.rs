//! Replication's two ends in the engine: a leader reads ranges of its log
//! (`range.rs`) and a follower applies them byte for byte at the same
//! positions (`mirror.rs`), so that follower shard k's log is leader shard
//! k's. What ships is whole stored batches; a padding batch ships as its
//! header alone (what follows it on disk is zero).

pub(crate) mod mirror;
pub(crate) mod range;

pub use range::{shipped_batches, LogRange};
