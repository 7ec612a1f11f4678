//! A broker process's own plumbing, set up once by its start-up
//! (`server/mod.rs`) around the shards: the data directory's lock, its
//! recorded layout, cluster id and data keys, the metadata a restore takes from the
//! bucket, and the watchdog thread that sees a
//! shard's thread held (with the stack a signal captures, named and logged
//! by a thread of the idle class). Nothing of a
//! shard imports it.

pub mod cluster_id;
pub mod data_keys;
pub mod dir_lock;
mod error;
pub mod layout;
pub mod object_thread;
pub mod restore;
mod stack_capture;
mod stack_names;
pub mod stack_symbols;
mod thread_sample;
pub mod watchdog;

pub use error::NodeError;
