//! The Rust client SDK: a metadata-following client with one pipelined
//! connection per shard, a producer and a consumer.

#[allow(clippy::module_inception)] // the Client lives in client.rs, as the style asks
mod acls;
mod admin;
mod assignment;
mod batcher;
#[allow(clippy::module_inception)] // the Client lives in client.rs, as the style asks
mod client;
mod connection;
mod consumer;
mod error;
mod fault_avoidance;
mod group;
mod group_admin;
mod lookup;
mod message_id;
mod producer;
mod promise;
mod push_consumer;
mod quotas;
mod sasl;
mod tls;
mod trace;
mod transaction;
mod users;

pub use admin::admin_get;
pub use assignment::{AssignFn, Strategy};
pub use batcher::SendCallback;
pub use client::{Client, ClientConfig};
pub use consumer::{ConsumedMessage, Consumer, StartFrom};
pub use error::ClientError;
pub use group::{ConsumeMode, GroupConfig, StartNew};
pub use group_admin::QueueLag;
pub use lookup::Found;
pub use message_id::{MessageId, MessageIdGenerator};
pub use producer::{
    Delay, DelayedResult, Message, Producer, ProducerConfig, QueueSelector, SelectorFn, SendFuture, SendResult,
};
pub use promise::Promise;
pub use push_consumer::{ConsumeStatus, Listener, PushConfig, PushConsumer};
pub use sasl::SaslLogin;
pub use transaction::{CheckFn, TransactionProducer, TxResult, TxState};
