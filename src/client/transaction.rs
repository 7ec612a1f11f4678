//! The transactional producer (RocketMQ's TransactionMQProducer): a half
//! message is stored but invisible, the local transaction runs, and its
//! answer commits or rolls the message back. When the answer is unknown (or
//! never came: the producer died), the broker checks with any live producer
//! of the group: a poller thread asks every shard for checks and answers
//! them with the check-back callback.

use super::client::Client;
use super::consumer::{decode_messages, ConsumedMessage};
use super::error::ClientError;
use super::message_id::MessageId;
use super::producer::{build_batch, Message, Producer, ProducerConfig};
use ringmq_protocol::messages::{QueueRef, Transactional};
use ringmq_protocol::{ApiKey, Reader, Writer};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// A local transaction's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxState {
    Commit,
    Rollback,
    /// Not known yet: the broker will check later.
    Unknown,
}

/// Answers the broker's check of a half message.
pub type CheckFn = Arc<dyn Fn(&ConsumedMessage) -> TxState + Send + Sync>;

/// A transactional send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxResult {
    pub message_id: MessageId,
    pub queue: u32,
    /// What the local transaction said (Unknown: left to the broker's check).
    pub state: TxState,
}

/// Sends transactional messages for one producer group.
pub struct TransactionProducer {
    client: Arc<Client>,
    group: String,
    producer: Producer,
    stop: Arc<AtomicBool>,
    poller: Option<JoinHandle<()>>,
}

impl TransactionProducer {
    /// Starts answering checks for `group` with `check`.
    pub fn start(client: Arc<Client>, group: &str, config: ProducerConfig, check: CheckFn) -> TransactionProducer {
        let stop = Arc::new(AtomicBool::new(false));
        let (c, g, s) = (client.clone(), group.to_string(), stop.clone());
        let poller = std::thread::Builder::new()
            .name("ringmq-tx-checks".into())
            .spawn(move || answer_checks(&c, &g, &check, &s))
            .expect("spawn check poller");
        let producer = Producer::new(client.clone(), config);
        TransactionProducer { client, group: group.to_string(), producer, stop, poller: Some(poller) }
    }

    /// Stores `message` as a half message, runs `local` (a panic counts as
    /// Unknown) and ends the transaction with its answer.
    pub fn send_in_transaction(
        &self,
        topic: &str,
        message: &Message,
        local: impl FnOnce(MessageId) -> TxState,
    ) -> Result<TxResult, ClientError> {
        let queue = self.producer.select(topic, message)?;
        let id = message.id.unwrap_or_else(|| self.producer.next_id());
        let batch = build_batch(&[(id, message)]);
        let half = self.call(ApiKey::ProduceHalf, topic, queue, &batch, 0, false)?;
        let half = Reader::new(&half).u64()?;
        let state = catch_unwind(AssertUnwindSafe(|| local(id))).unwrap_or(TxState::Unknown);
        if state != TxState::Unknown {
            end(&self.client, &self.group, (topic, queue, half), state == TxState::Commit)?;
        }
        Ok(TxResult { message_id: id, queue, state })
    }

    /// Only the half message, no end (a producer that dies mid-transaction; for failure drills).
    pub fn send_half_only(&self, topic: &str, message: &Message) -> Result<MessageId, ClientError> {
        self.send_in_transaction(topic, message, |_| TxState::Unknown).map(|r| r.message_id)
    }

    fn call(
        &self,
        api: ApiKey,
        topic: &str,
        queue: u32,
        batch: &[u8],
        half: u64,
        commit: bool,
    ) -> Result<Vec<u8>, ClientError> {
        let mut w = Writer::default();
        let queue_ref = QueueRef { topic: topic.to_string(), queue };
        Transactional { queue: queue_ref, group: self.group.clone(), batch, half, commit }.encode(&mut w);
        Ok(self.client.call_queue(topic, queue, api, &w.buf)?.body)
    }
}

impl Drop for TransactionProducer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(p) = self.poller.take() {
            let _ = p.join();
        }
    }
}

/// Commits or rolls back the half message at `half` of the queue's shard.
fn end(client: &Client, group: &str, (topic, queue, half): (&str, u32, u64), commit: bool) -> Result<(), ClientError> {
    let mut w = Writer::default();
    let queue_ref = QueueRef { topic: topic.to_string(), queue };
    Transactional { queue: queue_ref, group: group.to_string(), batch: &[], half, commit }.encode(&mut w);
    client.call_queue(topic, queue, ApiKey::EndTransaction, &w.buf).map(|_| ())
}

/// Asks every shard for checks of `group` (each parks up to 200 ms) and answers them.
fn answer_checks(client: &Client, group: &str, check: &CheckFn, stop: &AtomicBool) {
    while !stop.load(Ordering::Relaxed) {
        let shards = client.metadata().shards.clone();
        if shards.is_empty() {
            let _ = client.refresh_metadata();
            std::thread::sleep(Duration::from_millis(200));
        }
        for shard in &shards {
            let mut w = Writer::default();
            w.string(group).u32(200);
            match client.call_addr(&shard.addr, ApiKey::PollChecks, &w.buf) {
                Ok(reply) => answer(client, group, check, &reply.body),
                Err(error) => {
                    tracing::debug!(%error, "polling transaction checks");
                    std::thread::sleep(Duration::from_millis(200));
                }
            }
        }
    }
}

fn answer(client: &Client, group: &str, check: &CheckFn, body: &[u8]) {
    let mut r = Reader::new(body);
    let Ok(n) = r.count(18) else { return };
    for _ in 0..n {
        let (Ok(half), Ok(topic), Ok(queue), Ok(batch)) = (r.u64(), r.string(), r.u32(), r.bytes()) else { return };
        let Ok(messages) = decode_messages(&topic, queue, batch, 0) else { continue };
        let Some(m) = messages.first() else { continue };
        let state = catch_unwind(AssertUnwindSafe(|| check(m))).unwrap_or(TxState::Unknown);
        if state != TxState::Unknown {
            if let Err(error) = end(client, group, (&topic, queue, half), state == TxState::Commit) {
                tracing::warn!(%error, "answering a transaction check failed");
            }
        }
    }
}
