//! The producer: sync sends (durable, retried), async sends batched per queue
//! by size and linger and pipelined, one-way sends (no ack); queues chosen
//! round-robin, by key hash (same key, same queue, so per-key order) or by a
//! user-supplied selector.

use super::client::Client;
use super::connection::{Reply, Tagged};
use super::error::ClientError;
use super::fault_avoidance::FaultTable;
use super::message_id::{MessageId, MessageIdGenerator};
use super::promise::{promise, Promise, Resolver};
use crate::protocol::messages::{self as msg, Produce, QueueRef};
use crate::protocol::{ApiKey, ErrorCode, Reader, Writer};
use ringmq_shards::batch::BatchBuilder;
use ringmq_shards::record::{Headers, Record};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// A message to send.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Message {
    pub key: Option<Vec<u8>>,
    pub tag: Option<String>,
    pub headers: Vec<(String, Vec<u8>)>,
    pub value: Vec<u8>,
}

impl Message {
    /// A message with only a value.
    pub fn new(value: impl Into<Vec<u8>>) -> Self {
        Message { value: value.into(), ..Message::default() }
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

    /// Adds a header.
    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<Vec<u8>>) -> Self {
        self.headers.push((name.into(), value.into()));
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
    /// Avoid shards after failed or slow sends (round-robin selection only; off by default).
    pub fault_avoidance: bool,
}

impl Default for ProducerConfig {
    fn default() -> Self {
        ProducerConfig {
            selector: QueueSelector::RoundRobin,
            batch_bytes: 64 << 10,
            linger: Duration::from_millis(1),
            fault_avoidance: false,
        }
    }
}

/// The result of an async send: `wait()` blocks, `.await` suspends.
pub type SendFuture = Promise<Result<SendResult, ClientError>>;

/// Sends messages to topics.
pub struct Producer {
    client: Arc<Client>,
    config: ProducerConfig,
    ids: MessageIdGenerator,
    round_robin: AtomicU32,
    faults: Arc<FaultTable>,
    batcher: mpsc::Sender<Pending>,
}

/// A message waiting in the async batcher.
struct Pending {
    topic: String,
    queue: u32,
    id: MessageId,
    message: Message,
    done: Resolver<Result<SendResult, ClientError>>,
}

impl Producer {
    /// A producer on `client`.
    pub fn new(client: Arc<Client>, config: ProducerConfig) -> Producer {
        let (tx, rx) = mpsc::channel();
        let faults = Arc::new(FaultTable::default());
        let (c, cfg, f) = (client.clone(), config.clone(), faults.clone());
        std::thread::Builder::new()
            .name("ringmq-batcher".into())
            .spawn(move || batch_loop(c, cfg, f, rx))
            .expect("spawn batcher");
        Producer { client, config, ids: MessageIdGenerator::new(), round_robin: AtomicU32::new(0), faults, batcher: tx }
    }

    /// Sends and waits until the message is durable; retries retriable errors.
    pub fn send(&self, topic: &str, message: &Message) -> Result<SendResult, ClientError> {
        let queue = self.select(topic, message)?;
        let id = self.ids.next_id();
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
    /// once it is durable.
    pub fn send_async(&self, topic: &str, message: Message) -> SendFuture {
        let (done, future) = promise();
        match self.select(topic, &message) {
            Ok(queue) => {
                let p = Pending { topic: topic.to_string(), queue, id: self.ids.next_id(), message, done };
                if let Err(mpsc::SendError(p)) = self.batcher.send(p) {
                    p.done.resolve(Err(ClientError::Invalid("the producer's batcher stopped".into())));
                }
            }
            Err(e) => done.resolve(Err(e)),
        }
        future
    }

    /// Sends without asking for an acknowledgement.
    pub fn send_oneway(&self, topic: &str, message: &Message) -> Result<MessageId, ClientError> {
        let queue = self.select(topic, message)?;
        let id = self.ids.next_id();
        let batch = build_batch(&[(id, message)]);
        self.client.send_queue(
            topic,
            queue,
            ApiKey::Produce,
            &produce_body(topic, queue, msg::ACKS_NONE, &batch),
            None,
        )?;
        Ok(id)
    }

    fn note_latency(&self, topic: &str, queue: u32, started: Instant, failed: bool) {
        if self.config.fault_avoidance {
            if let Some(shard) = self.client.topic(topic).ok().and_then(|t| t.queue_shards.get(queue as usize).copied())
            {
                self.faults.record(shard, started.elapsed(), failed);
            }
        }
    }

    fn select(&self, topic: &str, message: &Message) -> Result<u32, ClientError> {
        let shards = self.client.topic(topic)?.queue_shards;
        let queues = shards.len() as u32;
        let q = match &self.config.selector {
            QueueSelector::RoundRobin if self.config.fault_avoidance => {
                self.faults.pick(&shards, self.round_robin.fetch_add(1, Ordering::Relaxed) % queues)
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
fn build_batch(messages: &[(MessageId, &Message)]) -> Vec<u8> {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
    let mut b = BatchBuilder::new(now);
    let mut header_bytes = Vec::new();
    for (id, m) in messages {
        header_bytes.clear();
        let pairs: Vec<(&[u8], &[u8])> = m.headers.iter().map(|(k, v)| (k.as_bytes(), v.as_slice())).collect();
        Headers::encode(&pairs, &mut header_bytes);
        b.push(&Record {
            timestamp_delta_ms: 0,
            message_id: id.0,
            key: m.key.as_deref().unwrap_or(&[]),
            tag: m.tag.as_deref().map(str::as_bytes).unwrap_or(&[]),
            value: &m.value,
            headers: Headers::from_encoded(pairs.len() as u16, &header_bytes),
        });
    }
    b.finish()
}

fn produce_body(topic: &str, queue: u32, acks: u8, batch: &[u8]) -> Vec<u8> {
    let mut w = Writer::default();
    Produce { queue: QueueRef { topic: topic.to_string(), queue }, acks, batches: vec![batch] }.encode(&mut w);
    w.buf
}

/// A batch sent and not yet answered.
struct InFlight {
    messages: Vec<Pending>,
    shard: Option<u32>,
    sent: Instant,
}

/// A queue's batch being filled.
struct Open {
    since: Instant,
    bytes: usize,
    messages: Vec<Pending>,
}

/// Collects async sends per queue and sends each batch when it is full or
/// its linger passed; replies resolve every message's future.
fn batch_loop(client: Arc<Client>, config: ProducerConfig, faults: Arc<FaultTable>, rx: mpsc::Receiver<Pending>) {
    let mut open: HashMap<(String, u32), Open> = HashMap::new();
    let inflight: Arc<Mutex<HashMap<u64, InFlight>>> = Arc::default();
    let next_seq = AtomicU64::new(1);
    let (reply_tx, reply_rx) = mpsc::channel::<Tagged>();
    let resolver_inflight = inflight.clone();
    let avoid = config.fault_avoidance;
    std::thread::Builder::new()
        .name("ringmq-acks".into())
        .spawn(move || {
            for (seq, reply) in reply_rx {
                if let Some(f) = resolver_inflight.lock().expect("inflight lock").remove(&seq) {
                    if let Some(shard) = f.shard.filter(|_| avoid) {
                        let failed = reply.as_ref().map_or(true, |r| r.error != ErrorCode::None);
                        faults.record(shard, f.sent.elapsed(), failed);
                    }
                    resolve(f.messages, reply);
                }
            }
        })
        .expect("spawn ack thread");
    let mut disconnected = false;
    while !(disconnected && open.is_empty()) {
        let wait = open
            .values()
            .map(|o| config.linger.saturating_sub(o.since.elapsed()))
            .min()
            .unwrap_or(Duration::from_millis(100));
        match rx.recv_timeout(wait) {
            Ok(p) => {
                let key = (p.topic.clone(), p.queue);
                let o =
                    open.entry(key).or_insert_with(|| Open { since: Instant::now(), bytes: 0, messages: Vec::new() });
                o.bytes += p.message.value.len() + p.message.key.as_ref().map_or(0, Vec::len) + 64;
                o.messages.push(p);
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => disconnected = true,
        }
        let due: Vec<(String, u32)> = open
            .iter()
            .filter(|(_, o)| disconnected || o.bytes >= config.batch_bytes || o.since.elapsed() >= config.linger)
            .map(|(k, _)| k.clone())
            .collect();
        for key in due {
            let o = open.remove(&key).expect("listed above");
            let seq = next_seq.fetch_add(1, Ordering::Relaxed);
            let batch = build_batch(&o.messages.iter().map(|p| (p.id, &p.message)).collect::<Vec<_>>());
            let body = produce_body(&key.0, key.1, msg::ACKS_DURABLE, &batch);
            let shard = client.topic(&key.0).ok().and_then(|t| t.queue_shards.get(key.1 as usize).copied());
            inflight
                .lock()
                .expect("inflight lock")
                .insert(seq, InFlight { messages: o.messages, shard, sent: Instant::now() });
            if let Err(e) = client.send_queue(&key.0, key.1, ApiKey::Produce, &body, Some((reply_tx.clone(), seq))) {
                if let Some(f) = inflight.lock().expect("inflight lock").remove(&seq) {
                    resolve(f.messages, Err(e));
                }
            }
        }
    }
}

fn resolve(batch: Vec<Pending>, reply: Result<Reply, ClientError>) {
    let outcome = reply.and_then(|r| match r.error {
        ErrorCode::None => Ok(msg::decode_produced(&mut Reader::new(&r.body))?),
        code => Err(ClientError::Broker { code, message: r.message }),
    });
    for (i, p) in batch.into_iter().enumerate() {
        let result = match &outcome {
            Ok(offsets) => match offsets.first() {
                Some((base, _)) => Ok(SendResult { message_id: p.id, queue: p.queue, offset: base + i as u64 }),
                None => Err(ClientError::Protocol("produce response without results".into())),
            },
            Err(e) => Err(e.clone()),
        };
        p.done.resolve(result);
    }
}
