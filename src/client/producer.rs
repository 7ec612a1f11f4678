//! The producer: sync sends (durable, retried), async sends batched per queue
//! by size and linger and pipelined, one-way sends (no ack); queues chosen
//! round-robin, by key hash (same key, same queue, so per-key order) or by a
//! user-supplied selector.

use super::batcher::{Batcher, Done};
use super::client::Client;
use super::error::ClientError;
use super::fault_avoidance::FaultTable;
use super::message_id::{MessageId, MessageIdGenerator};
use super::send_future::{send_future, SendFuture};
use ringmq_format::batch::BatchBuilder;
use ringmq_format::record::{Header, Headers, Record, HEADERS_MAX, KEY_BYTES_MAX, NAME_BYTES_MAX};
use ringmq_protocol::messages::{self as msg, Produce, QueueRef};
use ringmq_protocol::{ApiKey, Reader, Writer};
use std::borrow::Borrow;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A message to send.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Message {
    /// The message ID to keep (a redriven message keeps its own); None: a new one.
    pub id: Option<MessageId>,
    /// None: no key (Kafka's null key), distinct from an empty one.
    pub key: Option<Vec<u8>>,
    pub tag: Option<String>,
    /// In order; a name may repeat; None: a null value.
    pub headers: Vec<(String, Option<Vec<u8>>)>,
    /// None: no value, a tombstone (Kafka's null value), distinct from an empty one.
    pub value: Option<Vec<u8>>,
}

impl Message {
    /// A message with only a value.
    pub fn new(value: impl Into<Vec<u8>>) -> Self {
        Message { value: Some(value.into()), ..Message::default() }
    }

    /// A message without a value (a tombstone: on a compacted topic, it
    /// deletes its key).
    pub fn tombstone(key: impl Into<Vec<u8>>) -> Self {
        Message { key: Some(key.into()), ..Message::default() }
    }

    /// Refuses a message a record cannot hold: a key, tag or header name
    /// past its length limit, or too many headers.
    pub fn check(&self) -> Result<(), ClientError> {
        let too_long = |what: &str, len: usize, max: usize| {
            Err(ClientError::Invalid(format!("the message's {what} has {len} bytes; a record holds at most {max}")))
        };
        if let Some(key) = self.key.as_ref().filter(|k| k.len() > KEY_BYTES_MAX) {
            return too_long("key", key.len(), KEY_BYTES_MAX);
        }
        if let Some(tag) = self.tag.as_ref().filter(|t| t.len() > NAME_BYTES_MAX) {
            return too_long("tag", tag.len(), NAME_BYTES_MAX);
        }
        if let Some((name, _)) = self.headers.iter().find(|(n, _)| n.len() > NAME_BYTES_MAX) {
            return too_long("header name", name.len(), NAME_BYTES_MAX);
        }
        if self.headers.len() > HEADERS_MAX {
            let m = format!("the message has {} headers; a record holds at most {HEADERS_MAX}", self.headers.len());
            return Err(ClientError::Invalid(m));
        }
        Ok(())
    }

    /// Sets the key (used by the key-hash selector).
    pub fn with_key(mut self, key: impl Into<Vec<u8>>) -> Self {
        self.key = Some(key.into());
        self
    }

    /// Sets the tag (indexed for filtering).
    pub fn with_tag(mut self, tag: impl Into<String>) -> Self {
        self.tag = Some(tag.into());
        self
    }

    /// Adds a header (after any of the same name).
    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<Vec<u8>>) -> Self {
        self.headers.push((name.into(), Some(value.into())));
        self
    }

    /// Adds a header whose value is null.
    pub fn with_null_header(mut self, name: impl Into<String>) -> Self {
        self.headers.push((name.into(), None));
        self
    }
}

/// Where a sent message landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SendResult {
    pub message_id: MessageId,
    pub queue: u32,
    pub offset: u64,
}

/// When a delayed message becomes visible.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delay {
    /// One of the broker's 18 delay levels (RocketMQ's 1s 5s 10s 30s 1m ... 2h).
    Level(u32),
    /// At this Unix time in milliseconds (at once if it has passed).
    At(u64),
    /// This long from now, by this host's clock.
    After(Duration),
}

/// A delayed message stored by the broker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DelayedResult {
    pub message_id: MessageId,
    pub queue: u32,
    /// When it becomes visible (Unix ms, by the broker's clock).
    pub due_ms: u64,
}

/// User-supplied queue choice: (message, queue count) -> queue.
pub type SelectorFn = Arc<dyn Fn(&Message, u32) -> u32 + Send + Sync>;

/// How a producer picks a queue.
#[derive(Clone, Default)]
pub enum QueueSelector {
    /// Each send takes the next queue (default).
    #[default]
    RoundRobin,
    /// Hash of the key: the same key always goes to the same queue.
    KeyHash,
    /// A user-supplied function.
    Custom(SelectorFn),
}

/// Producer settings.
#[derive(Clone)]
pub struct ProducerConfig {
    pub selector: QueueSelector,
    /// Async sends: a queue's batch is sent once it holds this many bytes...
    pub batch_bytes: usize,
    /// ...or once its first message waited this long.
    pub linger: Duration,
    /// Async sends: batches of one queue sent and not yet answered. While
    /// fewer are in flight a batch goes out at once; at the limit the next
    /// one fills (up to `batch_bytes` or `linger`). Order within a queue holds
    /// at any value: one connection per shard, appended in arrival order.
    pub max_in_flight_per_queue: usize,
    /// Avoid shards after failed or slow sends (round-robin selection only; off by default).
    pub fault_avoidance: bool,
}

impl Default for ProducerConfig {
    fn default() -> Self {
        ProducerConfig {
            selector: QueueSelector::RoundRobin,
            batch_bytes: 64 << 10,
            linger: Duration::from_millis(1),
            max_in_flight_per_queue: 1,
            fault_avoidance: false,
        }
    }
}

/// Sends messages to topics.
pub struct Producer {
    client: Arc<Client>,
    config: ProducerConfig,
    ids: MessageIdGenerator,
    round_robin: AtomicU32,
    faults: Arc<FaultTable>,
    batcher: Arc<Batcher>,
}

impl Producer {
    /// A producer on `client`.
    pub fn new(client: Arc<Client>, config: ProducerConfig) -> Producer {
        let faults = Arc::new(FaultTable::default());
        let avoid = config.fault_avoidance.then(|| faults.clone());
        let batcher = Batcher::start(client.clone(), &config, avoid);
        Producer { client, config, ids: MessageIdGenerator::new(), round_robin: AtomicU32::new(0), faults, batcher }
    }

    /// Sends and waits until the message is durable; retries retriable errors.
    pub fn send(&self, topic: &str, message: &Message) -> Result<SendResult, ClientError> {
        let queue = self.select(topic, message)?;
        let id = message.id.unwrap_or_else(|| self.ids.next_id());
        let batch = build_batch(&[(id, message)]);
        let started = Instant::now();
        let body = produce_body(topic, queue, msg::ACKS_DURABLE, &batch);
        let reply = self.client.call_queue(topic, queue, ApiKey::Produce, &body);
        self.note_latency(topic, queue, started, reply.is_err());
        let reply = reply?;
        let offsets = msg::decode_produced(&mut Reader::new(&reply.body))?;
        let (offset, _) =
            *offsets.first().ok_or_else(|| ClientError::Protocol("produce response without results".into()))?;
        Ok(SendResult { message_id: id, queue, offset })
    }

    /// Queues the message for a batched, pipelined send; the future resolves
    /// once it is durable. The message is encoded into its batch before this
    /// returns: a borrowed one can be changed and sent again at once.
    pub fn send_async(&self, topic: &str, message: impl Borrow<Message>) -> SendFuture {
        let (done, future) = send_future();
        self.enqueue(topic, message.borrow(), Done::Future(done));
        future
    }

    /// Like `send_async`, but `callback` gets the outcome (on the producer's
    /// ack thread): no future to keep, as RocketMQ's SendCallback.
    pub fn send_with_callback(
        &self,
        topic: &str,
        message: impl Borrow<Message>,
        callback: impl FnOnce(Result<SendResult, ClientError>) + Send + 'static,
    ) {
        self.enqueue(topic, message.borrow(), Done::Callback(Box::new(callback)));
    }

    fn enqueue(&self, topic: &str, message: &Message, done: Done) {
        match self.select(topic, message) {
            Ok(queue) => {
                self.batcher.add(topic, queue, message.id.unwrap_or_else(|| self.ids.next_id()), message, done)
            }
            Err(e) => done.finish(Err(e)),
        }
    }

    /// A new message id from this producer's generator.
    pub fn next_id(&self) -> MessageId {
        self.ids.next_id()
    }

    /// Stores a message durably to become visible later; retries retriable errors.
    pub fn send_delayed(&self, topic: &str, message: &Message, delay: Delay) -> Result<DelayedResult, ClientError> {
        let queue = self.select(topic, message)?;
        let id = message.id.unwrap_or_else(|| self.ids.next_id());
        let due_ms = self.store_delayed(topic, queue, &[(id, message)], delay)?;
        Ok(DelayedResult { message_id: id, queue, due_ms })
    }

    /// Stores messages for one queue, all due together, in one request (one
    /// durable append on the broker); returns when they are due (Unix ms).
    pub fn send_delayed_batch(
        &self,
        topic: &str,
        queue: u32,
        messages: &[Message],
        delay: Delay,
    ) -> Result<u64, ClientError> {
        for m in messages {
            m.check()?;
        }
        let with_ids: Vec<(MessageId, &Message)> =
            messages.iter().map(|m| (m.id.unwrap_or_else(|| self.ids.next_id()), m)).collect();
        self.store_delayed(topic, queue, &with_ids, delay)
    }

    fn store_delayed(
        &self,
        topic: &str,
        queue: u32,
        messages: &[(MessageId, &Message)],
        delay: Delay,
    ) -> Result<u64, ClientError> {
        let (delay_level, deliver_at_ms) = match delay {
            Delay::Level(l) => (l.max(1), 0),
            Delay::At(ms) => (0, ms),
            Delay::After(d) => {
                let now = ringmq_protocol::time::unix_ms();
                (0, now + d.as_millis() as u64)
            }
        };
        let batch = build_batch(messages);
        let mut w = Writer::default();
        let queue_ref = QueueRef { topic: topic.to_string(), queue };
        msg::ProduceDelayed { queue: queue_ref, delay_level, deliver_at_ms, batch: &batch }.encode(&mut w);
        let reply = self.client.call_queue(topic, queue, ApiKey::ProduceDelayed, &w.buf)?;
        Ok(Reader::new(&reply.body).u64()?)
    }

    /// Sends without asking for an acknowledgement.
    pub fn send_oneway(&self, topic: &str, message: &Message) -> Result<MessageId, ClientError> {
        let queue = self.select(topic, message)?;
        let id = message.id.unwrap_or_else(|| self.ids.next_id());
        let batch = build_batch(&[(id, message)]);
        self.client.send_queue(
            (topic, queue),
            (ApiKey::Produce, 0),
            &produce_body(topic, queue, msg::ACKS_NONE, &batch),
            None,
        )?;
        Ok(id)
    }

    fn note_latency(&self, topic: &str, queue: u32, started: Instant, failed: bool) {
        if self.config.fault_avoidance {
            if let Ok(shard) = self.client.queue_shard(topic, queue) {
                self.faults.record(shard, started.elapsed(), failed);
            }
        }
    }

    pub(super) fn select(&self, topic: &str, message: &Message) -> Result<u32, ClientError> {
        message.check()?;
        let queues = self.client.with_topic(topic, |t| t.queue_shards.len() as u32)?;
        let q = match &self.config.selector {
            QueueSelector::RoundRobin if self.config.fault_avoidance => {
                let start = self.round_robin.fetch_add(1, Ordering::Relaxed) % queues;
                self.client.with_topic(topic, |t| self.faults.pick(&t.queue_shards, start))?
            }
            QueueSelector::RoundRobin => self.round_robin.fetch_add(1, Ordering::Relaxed),
            QueueSelector::KeyHash => {
                let key = message
                    .key
                    .as_deref()
                    .ok_or_else(|| ClientError::Invalid("the key-hash selector needs a message key".into()))?;
                crc32fast::hash(key)
            }
            QueueSelector::Custom(f) => f(message, queues),
        };
        Ok(q % queues)
    }
}

/// Builds one record batch from messages.
pub(super) fn build_batch(messages: &[(MessageId, &Message)]) -> Vec<u8> {
    let mut b = BatchBuilder::new(ringmq_protocol::time::unix_ms() as i64);
    for (id, m) in messages {
        push_record(&mut b, *id, m, 0);
    }
    b.finish()
}

/// Appends `m` to `b` as a record `delta_ms` after the batch's first timestamp.
pub(super) fn push_record(b: &mut BatchBuilder, id: MessageId, m: &Message, delta_ms: i64) {
    let pairs: Vec<Header<'_>> = m.headers.iter().map(|(k, v)| (k.as_bytes(), v.as_deref())).collect();
    let mut header_bytes = Vec::new();
    Headers::encode(&pairs, &mut header_bytes);
    b.push(&Record {
        timestamp_delta_ms: delta_ms,
        message_id: id.0,
        key: m.key.as_deref(),
        tag: m.tag.as_deref().map(str::as_bytes).unwrap_or(&[]),
        value: m.value.as_deref(),
        headers: Headers::from_encoded(pairs.len() as u16, &header_bytes),
    });
}

pub(super) fn produce_body(topic: &str, queue: u32, acks: u8, batch: &[u8]) -> Vec<u8> {
    let mut w = Writer::default();
    Produce { queue: QueueRef { topic: topic.to_string(), queue }, acks, batches: vec![batch] }.encode(&mut w);
    w.buf
}

impl Drop for Producer {
    /// Sends what is still batched; the futures resolve when the replies come.
    fn drop(&mut self) {
        self.batcher.close();
    }
}
