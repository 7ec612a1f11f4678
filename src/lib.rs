//! ringmq: a durable thread-per-core message broker.
//!
//! The per-core storage engine is re-exported as [`shards`]; [`protocol`] is
//! the native wire protocol shared by the broker and the client SDK.

pub mod client;
pub mod cluster;
pub mod dlq;
pub mod doctor;
pub mod duration;
pub mod protocol;
pub mod security;
pub mod server;

pub use ringmq_shards as shards;
