//! Transactions: RocketMQ's half messages with check-backs (`transactions.rs`)
//! and Kafka's transaction coordinator (`coordinator.rs`).

pub mod coordinator;
pub mod transactions;

pub use transactions::Transactions;
