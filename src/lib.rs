//! ringmq: a durable thread-per-core message broker, and its CLI.
//!
//! The per-core storage engine is re-exported as [`shards`], the native wire
//! protocol (crate `ringmq-protocol`) as [`protocol`] and the client SDK
//! (crate `ringmq-client`, which a program that only produces and consumes
//! depends on alone) as [`client`].

pub mod cluster;
pub mod dlq;
#[cfg(test)]
mod doc_tables;
pub mod doctor;
pub mod duration;
pub mod objects;
pub mod security;
pub mod server;

pub use ringmq_client as client;
pub use ringmq_protocol as protocol;
pub use ringmq_shards as shards;
