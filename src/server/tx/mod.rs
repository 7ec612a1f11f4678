//! Transactional (half) messages: RocketMQ's two-phase protocol with check-backs.

pub mod transactions;

pub use transactions::Transactions;
