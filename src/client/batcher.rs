//! The async send accumulator: messages join their queue's open batch on the
//! sender's own thread; a batch goes out when it reaches `batch_bytes` (sent
//! by the thread that filled it) or when its `linger` ends (sent by the linger
//! thread, woken once per batch, not per message). Replies resolve each
//! message's future or callback on the ack thread. No per-message thread
//! hand-off: at 150k msgs/s hand-offs saturated a client core.

use super::client::Client;
use super::connection::Tagged;
use super::error::ClientError;
use super::fault_avoidance::FaultTable;
use super::message_id::MessageId;
use super::producer::{build_batch, produce_body, Message, ProducerConfig, SendResult};
use super::promise::Resolver;
use crate::protocol::messages as msg;
use crate::protocol::{ApiKey, ErrorCode, Reader};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// Called once with a message's outcome, on the producer's ack thread.
pub type SendCallback = Box<dyn FnOnce(Result<SendResult, ClientError>) + Send>;

/// Who hears about a message's outcome.
pub enum Done {
    Future(Resolver<Result<SendResult, ClientError>>),
    Callback(SendCallback),
}

impl Done {
    /// Delivers the outcome.
    pub fn finish(self, result: Result<SendResult, ClientError>) {
        match self {
            Done::Future(r) => r.resolve(result),
            Done::Callback(f) => f(result),
        }
    }
}

/// A message waiting in a batch.
pub struct Pending {
    pub id: MessageId,
    pub message: Message,
    pub done: Done,
}

struct Open {
    since: Instant,
    bytes: usize,
    messages: Vec<Pending>,
}

struct InFlight {
    topic: String,
    queue: u32,
    shard: Option<u32>,
    sent: Instant,
    messages: Vec<Pending>,
}

#[derive(Default)]
struct Batches {
    open: HashMap<(String, u32), Open>,
    /// Batches sent and not yet answered, per queue.
    in_flight: HashMap<(String, u32), usize>,
    /// The linger thread sleeps with no deadline (no batch was open). A batch
    /// opened while it sleeps with one needs no wake-up: that deadline is
    /// earlier than the new batch's.
    linger_idle: bool,
    closed: bool,
}

/// Shared by the producer, its linger thread and its ack thread.
pub struct Batcher {
    client: Arc<Client>,
    batch_bytes: usize,
    linger: Duration,
    max_in_flight: usize,
    faults: Option<Arc<FaultTable>>,
    batches: Mutex<Batches>,
    wake: Condvar,
    inflight: Mutex<HashMap<u64, InFlight>>,
    next_seq: AtomicU64,
    replies: Mutex<Option<mpsc::Sender<Tagged>>>,
}

impl Batcher {
    /// Starts the linger and ack threads.
    pub fn start(client: Arc<Client>, config: &ProducerConfig, faults: Option<Arc<FaultTable>>) -> Arc<Batcher> {
        let (tx, rx) = mpsc::channel();
        let b = Arc::new(Batcher {
            client,
            batch_bytes: config.batch_bytes,
            linger: config.linger,
            max_in_flight: config.max_in_flight_per_queue.max(1),
            faults,
            batches: Mutex::default(),
            wake: Condvar::new(),
            inflight: Mutex::default(),
            next_seq: AtomicU64::new(1),
            replies: Mutex::new(Some(tx)),
        });
        let linger_side = b.clone();
        std::thread::Builder::new()
            .name("ringmq-linger".into())
            .spawn(move || linger_side.linger_loop())
            .expect("spawn linger thread");
        let ack_side = b.clone();
        std::thread::Builder::new()
            .name("ringmq-acks".into())
            .spawn(move || ack_side.ack_loop(rx))
            .expect("spawn ack thread");
        b
    }

    /// Adds a message to its queue's batch. The batch is sent at once when
    /// fewer than `max_in_flight` batches of that queue are in flight (an
    /// idle queue gets no linger delay), when it is full, or when its linger
    /// ends; at the limit the next one fills, and goes out as soon as an
    /// answer frees a slot.
    pub fn add(&self, topic: &str, queue: u32, pending: Pending) {
        let size = pending.message.value.len() + pending.message.key.as_ref().map_or(0, Vec::len) + 64;
        let mut b = self.batches.lock().expect("batches lock");
        let key = (topic.to_string(), queue);
        let idle = b.in_flight.get(&key).copied().unwrap_or(0) < self.max_in_flight;
        let open =
            b.open.entry(key.clone()).or_insert_with(|| Open { since: Instant::now(), bytes: 0, messages: Vec::new() });
        let first = open.messages.is_empty();
        open.bytes += size;
        open.messages.push(pending);
        if idle || open.bytes >= self.batch_bytes {
            let open = b.open.remove(&key).expect("inserted above");
            let failed = self.dispatch(&mut b, key, open.messages);
            drop(b);
            fail(failed);
        } else if first && b.linger_idle {
            b.linger_idle = false;
            self.wake.notify_one();
        }
    }

    /// A batch of `key` was answered: send the queue's waiting batch if a slot is free.
    fn answered(&self, key: (String, u32)) {
        let mut b = self.batches.lock().expect("batches lock");
        let n = b.in_flight.entry(key.clone()).or_default();
        *n = n.saturating_sub(1);
        if *n < self.max_in_flight {
            if let Some(open) = b.open.remove(&key) {
                let failed = self.dispatch(&mut b, key, open.messages);
                drop(b);
                fail(failed);
            }
        }
    }

    /// Sends every open batch now and stops the linger thread.
    pub fn close(&self) {
        let mut b = self.batches.lock().expect("batches lock");
        b.closed = true;
        let all: Vec<_> = b.open.drain().collect();
        let failed: Vec<_> =
            all.into_iter().filter_map(|(key, open)| self.dispatch(&mut b, key, open.messages)).collect();
        drop(b);
        self.wake.notify_one();
        failed.into_iter().for_each(|f| fail(Some(f)));
        self.replies.lock().expect("replies lock").take();
    }

    fn linger_loop(&self) {
        let mut b = self.batches.lock().expect("batches lock");
        while !b.closed {
            let now = Instant::now();
            let due: Vec<(String, u32)> = b
                .open
                .iter()
                .filter(|(_, o)| now.duration_since(o.since) >= self.linger)
                .map(|(k, _)| k.clone())
                .collect();
            let mut failed = Vec::new();
            for key in due {
                let open = b.open.remove(&key).expect("listed above");
                failed.extend(self.dispatch(&mut b, key, open.messages));
            }
            if !failed.is_empty() {
                drop(b);
                failed.into_iter().for_each(|f| fail(Some(f)));
                b = self.batches.lock().expect("batches lock");
                continue;
            }
            let next = b.open.values().map(|o| self.linger.saturating_sub(now.duration_since(o.since))).min();
            b.linger_idle = next.is_none();
            b = match next {
                Some(wait) => self.wake.wait_timeout(b, wait).expect("batches lock").0,
                None => self.wake.wait(b).expect("batches lock"),
            };
            b.linger_idle = false;
        }
    }

    /// Sends one batch. Called with the batches lock held, so that a queue's
    /// batches reach the connection in the order they were taken (they are
    /// stored in that order). A failure comes back to be resolved after the
    /// lock is released (callbacks may send again).
    fn dispatch(&self, b: &mut Batches, key: (String, u32), messages: Vec<Pending>) -> Option<Failed> {
        let (topic, queue) = (&key.0, key.1);
        let batch = build_batch(&messages.iter().map(|p| (p.id, &p.message)).collect::<Vec<_>>());
        let body = produce_body(topic, queue, msg::ACKS_DURABLE, &batch);
        let Some(reply_to) = self.replies.lock().expect("replies lock").clone() else {
            return Some((queue, messages, ClientError::Invalid("the producer is closed".into())));
        };
        let seq = self.next_seq.fetch_add(1, Ordering::Relaxed);
        let shard = self.client.topic(topic).ok().and_then(|t| t.queue_shards.get(queue as usize).copied());
        let f = InFlight { topic: topic.clone(), queue, shard, sent: Instant::now(), messages };
        self.inflight.lock().expect("inflight lock").insert(seq, f);
        *b.in_flight.entry(key.clone()).or_default() += 1;
        let e = self.client.send_queue(topic, queue, ApiKey::Produce, &body, Some((reply_to, seq))).err()?;
        let f = self.inflight.lock().expect("inflight lock").remove(&seq)?;
        if let Some(n) = b.in_flight.get_mut(&key) {
            *n = n.saturating_sub(1);
        }
        Some((queue, f.messages, e))
    }

    fn ack_loop(&self, replies: mpsc::Receiver<Tagged>) {
        for (seq, reply) in replies {
            let Some(f) = self.inflight.lock().expect("inflight lock").remove(&seq) else { continue };
            if let (Some(faults), Some(shard)) = (&self.faults, f.shard) {
                faults.record(shard, f.sent.elapsed(), reply.as_ref().map_or(true, |r| r.error != ErrorCode::None));
            }
            let outcome = reply.and_then(|r| match r.error {
                ErrorCode::None => Ok(msg::decode_produced(&mut Reader::new(&r.body))?),
                code => Err(ClientError::Broker { code, message: r.message }),
            });
            resolve(f.queue, f.messages, outcome);
            self.answered((f.topic, f.queue));
        }
    }
}

/// A batch that could not be sent: queue, messages, why.
type Failed = (u32, Vec<Pending>, ClientError);

fn fail(failed: Option<Failed>) {
    if let Some((queue, messages, e)) = failed {
        resolve(queue, messages, Err(e));
    }
}

fn resolve(queue: u32, messages: Vec<Pending>, outcome: Result<Vec<(u64, u32)>, ClientError>) {
    for (i, p) in messages.into_iter().enumerate() {
        let result = match &outcome {
            Ok(offsets) => match offsets.first() {
                Some((base, _)) => Ok(SendResult { message_id: p.id, queue, offset: base + i as u64 }),
                None => Err(ClientError::Protocol("produce response without results".into())),
            },
            Err(e) => Err(e.clone()),
        };
        p.done.finish(result);
    }
}
