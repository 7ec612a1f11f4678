//! ringmq-client: the Rust client SDK, a metadata-following client with one
//! pipelined connection per shard, producers (sync, async, one-way, delayed,
//! transactional) and consumers (pull, push, groups, broadcast), plus the
//! management calls. Blocking std threads and sockets: it builds neither the
//! broker nor an async runtime. TLS is the `tls` feature.
//!
//! ```no_run
//! use ringmq_client::{Client, ClientConfig, Consumer, Message, Producer, ProducerConfig, StartFrom};
//! use std::time::Duration;
//!
//! # fn main() -> Result<(), ringmq_client::ClientError> {
//! let client = Client::connect(ClientConfig::new("127.0.0.1:9292"))?;
//! client.create_topic("orders", 8, 0)?; // 8 queues, acknowledged once durable
//! let producer = Producer::new(client.clone(), ProducerConfig::default());
//! let sent = producer.send("orders", &Message::new("hello"))?;
//! println!("stored in queue {} at offset {}", sent.queue, sent.offset);
//!
//! let mut consumer = Consumer::new(client, Some("billing".into()));
//! consumer.assign_all("orders", StartFrom::Committed)?;
//! for message in consumer.poll(Duration::from_secs(1))? {
//!     println!("{}/{}: {:?}", message.queue, message.offset, message.value);
//! }
//! consumer.commit()?;
//! # Ok(())
//! # }
//! ```

mod acls;
mod admin;
mod assignment;
mod batcher;
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
mod push_consumer;
mod quotas;
mod sasl;
mod send_future;
pub mod tls;
mod topic_admin;
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
pub use message_id::{BadMessageId, MessageId, MessageIdGenerator};
pub use producer::{Delay, DelayedResult, Message, Producer, ProducerConfig, QueueSelector, SelectorFn, SendResult};
pub use push_consumer::{ConsumeStatus, Listener, PushConfig, PushConsumer};
pub use sasl::SaslLogin;
pub use send_future::{SendFuture, SendOutcome};
pub use transaction::{CheckFn, TransactionProducer, TxResult, TxState};
