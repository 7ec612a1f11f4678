//! Consumer groups on their coordinator shard: membership and rebalances
//! (`coordinator.rs`, pure state), Kafka's consumer protocol of
//! broker-side assignment (`member_epochs.rs`, pure state), the group calls
//! the edges serve (`api.rs`), and ordered consumers' queue locks.

pub mod api;
pub mod coordinator;
pub mod member_epochs;
pub mod queue_locks;

pub use api::{Deletion, Groups, JoinAnswer};
