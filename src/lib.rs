//! ringmq: a durable thread-per-core message broker.
//!
//! The broker, protocol and client SDK are built on the per-core storage engine,
//! re-exported here as [`shards`].

pub use ringmq_shards as shards;
