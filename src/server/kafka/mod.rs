//! The Kafka protocol edge: one listener per shard (shard k on the
//! `--kafka-listen` port plus k), speaking Kafka's wire protocol through the `kafka-protocol` codec.
//! A Kafka topic is a ringmq topic, a partition a queue, an offset a queue
//! offset, a consumer group a ringmq group, and each shard a Kafka broker.
//! Like `wire/`, it sits above the core and the features and calls them; it
//! never calls the native dispatcher.

mod acls;
pub mod api;
mod brokers;
mod client_quotas;
mod codes;
mod configs;
pub mod connection;
mod error;
mod groups;
mod producers;
mod records;
mod sasl;
mod txns;

pub use error::KafkaError;
pub use records::to_ringmq;

use crate::protocol::messages::QueueRef;
use crate::security::acl::Operation;
use crate::server::auth::authorizer::{Principal, Resource};
use crate::server::core::metadata::QueueSlot;
use crate::server::core::{Core, Failure};
use crate::server::groups::Groups;
use crate::server::tx::coordinator::Coordinator;
use kafka_protocol::ResponseError;
use producers::Producers;
use std::rc::Rc;

/// What one shard's Kafka listener serves from.
pub struct Services {
    core: Rc<Core>,
    groups: Rc<Groups>,
    producers: Producers,
    /// The transaction coordinator of the transactional ids this shard coordinates.
    coordinator: Rc<Coordinator>,
}

impl Services {
    pub fn new(core: Rc<Core>, groups: Rc<Groups>, coordinator: Rc<Coordinator>) -> Rc<Services> {
        // As many producer-partition pairs as the shard remembers batches for retries.
        let producers = Producers::new(core.id(), core.config().idempotence_window);
        Rc::new(Services { core, groups, producers, coordinator })
    }
}

/// Whether the connection's principal may do `operation` to `resource`;
/// Kafka's `code` if not (the refusal is logged once per connection).
fn permitted(core: &Core, p: &Principal, operation: Operation, resource: Resource, code: i16) -> Result<(), i16> {
    p.check(core, operation, resource).map_err(|_| code)
}

/// A Kafka string of ours.
fn text(s: impl Into<String>) -> kafka_protocol::protocol::StrBytes {
    kafka_protocol::protocol::StrBytes::from_string(s.into())
}

/// The partition's slot, if this shard owns it; the Kafka code why not.
fn owned(core: &Core, queue: &QueueRef) -> Result<QueueSlot, i16> {
    match core.locate(queue) {
        Ok(slot) if core.owns(slot) => Ok(slot),
        Ok(_) => Err(ResponseError::NotLeaderOrFollower.code()),
        Err(Failure(code, _)) => Err(codes::of(code)),
    }
}
