//! Consumer groups on their coordinator shard: membership and rebalances
//! (`coordinator.rs`, pure state), the group calls the wire serves
//! (`api.rs`), and ordered consumers' queue locks.

pub mod api;
pub mod coordinator;
pub mod queue_locks;

pub use api::{Deletion, Groups, JoinAnswer};
