//! The async send accumulator: a message joins its queue's open batch on the
//! sender's own thread, encoded there as a record (the message is dropped by
//! the thread that made it, and nothing on the reply path builds a batch); a
//! batch goes out when it reaches `batch_bytes` (sent by the thread that
//! filled it) or when its `linger` ends (sent by the linger thread, woken once
//! per batch, not per message). Whatever goes out to a shard takes along every
//! other batch waiting for that shard whose queue has a free in-flight slot,
//! in one ProduceMany request: when an answer frees the slots of eight queues,
//! their eight waiting batches leave as one request, not eight. Replies
//! resolve each message's future or callback on the ack thread, so user code
//! never runs on a connection's reader. No per-message thread hand-off: at
//! 150k msgs/s hand-offs saturated a client core.

use super::client::Client;
use super::connection::{Reply, Tagged};
use super::error::ClientError;
use super::fault_avoidance::FaultTable;
use super::message_id::MessageId;
use super::producer::{push_record, Message, ProducerConfig, SendResult};
use super::send_future::SendOutcome;
use ringmq_format::batch::BatchBuilder;
use ringmq_protocol::messages::{self as msg, QueueRef};
use ringmq_protocol::{ApiKey, ErrorCode, Reader, Writer};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// Called once with a message's outcome, on the producer's ack thread.
pub type SendCallback = Box<dyn FnOnce(Result<SendResult, ClientError>) + Send>;

/// Who hears about a message's outcome.
pub enum Done {
    /// An async send's future (dropped already if its sender lost interest).
    Future(futures_channel::oneshot::Sender<SendOutcome>),
    Callback(SendCallback),
}

impl Done {
    /// Delivers the outcome.
    pub fn finish(self, result: Result<SendResult, ClientError>) {
        match self {
            Done::Future(sender) => {
                let _ = sender.send(result);
            }
            Done::Callback(f) => f(result),
        }
    }
}

/// A message in a batch, waiting for its outcome.
struct Waiter {
    id: MessageId,
    done: Done,
}

/// A topic's queue. Topic names are interned (`Batches::key`), so finding
/// a queue's batch allocates nothing.
type Key = (Arc<str>, u32);

/// Batch bytes per ProduceMany request: a shard's waiting batches beyond
/// this go in further requests (a request must stay under the frame limit).
const REQUEST_BYTES_MAX: usize = 1 << 20;

struct Open {
    since: Instant,
    /// The shard that owns the queue (None: the topic is not known yet).
    shard: Option<u32>,
    /// The records so far, encoded on the senders' threads as they were added.
    batch: BatchBuilder,
    waiters: Vec<Waiter>,
}

/// One queue's batch in a request.
struct Entry {
    key: Key,
    waiters: Vec<Waiter>,
}

struct InFlight {
    shard: Option<u32>,
    sent: Instant,
    entries: Vec<Entry>,
}

/// Buffers of sent batches kept for the next ones (at most this many).
const SPARE_BUFFERS_MAX: usize = 16;

#[derive(Default)]
struct Batches {
    topics: Vec<Arc<str>>,
    /// Buffers of batches already copied into their requests.
    spare: Vec<Vec<u8>>,
    open: HashMap<Key, Open>,
    /// Batches sent and not yet answered, per queue.
    in_flight: HashMap<Key, usize>,
    /// The linger thread sleeps with no deadline (no batch was open). A batch
    /// opened while it sleeps with one needs no wake-up: that deadline is
    /// earlier than the new batch's.
    linger_idle: bool,
    closed: bool,
}

impl Batches {
    /// The key of `queue` of `topic`, the topic's name interned.
    fn key(&mut self, topic: &str, queue: u32) -> Key {
        let name = match self.topics.iter().find(|t| ***t == *topic) {
            Some(name) => name.clone(),
            None => {
                self.topics.push(Arc::from(topic));
                self.topics[self.topics.len() - 1].clone()
            }
        };
        (name, queue)
    }
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
    pub fn add(&self, topic: &str, queue: u32, id: MessageId, message: &Message, done: Done) {
        let now_ms = ringmq_protocol::time::unix_ms() as i64;
        let mut b = self.batches.lock().expect("batches lock");
        let key = b.key(topic, queue);
        let idle = self.has_slot(&b, &key);
        let Batches { open, spare, .. } = &mut *b;
        let open = open.entry(key.clone()).or_insert_with(|| Open {
            since: Instant::now(),
            shard: self.client.queue_shard(topic, queue).ok(),
            batch: BatchBuilder::reusing(spare.pop().unwrap_or_default(), now_ms),
            waiters: Vec::new(),
        });
        let first = open.waiters.is_empty();
        let delta_ms = now_ms - open.batch.first_timestamp_ms();
        push_record(&mut open.batch, id, message, delta_ms);
        open.waiters.push(Waiter { id, done });
        if idle || open.batch.size_bytes() >= self.batch_bytes {
            let failed = self.send(&mut b, &[key]);
            drop(b);
            self.fail(failed);
        } else if first && b.linger_idle {
            b.linger_idle = false;
            self.wake.notify_one();
        }
    }

    fn has_slot(&self, b: &Batches, key: &Key) -> bool {
        b.in_flight.get(key).copied().unwrap_or(0) < self.max_in_flight
    }

    /// The batches of `keys` were answered: send the waiting batches of their
    /// shards whose queues have a free slot.
    fn answered(&self, keys: &[Key]) {
        let mut b = self.batches.lock().expect("batches lock");
        for key in keys {
            let n = b.in_flight.entry(key.clone()).or_default();
            *n = n.saturating_sub(1);
        }
        let ready: Vec<Key> =
            keys.iter().filter(|k| b.open.contains_key(*k) && self.has_slot(&b, k)).cloned().collect();
        let failed = self.send(&mut b, &ready);
        drop(b);
        self.fail(failed);
    }

    /// Sends every open batch now and stops the linger thread.
    pub fn close(&self) {
        let mut b = self.batches.lock().expect("batches lock");
        b.closed = true;
        let all: Vec<Key> = b.open.keys().cloned().collect();
        let failed = self.send_all(&mut b, &all);
        drop(b);
        self.wake.notify_one();
        self.fail(failed);
        self.replies.lock().expect("replies lock").take();
    }

    fn linger_loop(&self) {
        let mut b = self.batches.lock().expect("batches lock");
        while !b.closed {
            let now = Instant::now();
            let due: Vec<Key> = b
                .open
                .iter()
                .filter(|(_, o)| now.duration_since(o.since) >= self.linger)
                .map(|(k, _)| k.clone())
                .collect();
            let failed = self.send(&mut b, &due);
            if !failed.is_empty() {
                drop(b);
                self.fail(failed);
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

    /// Sends the open batches of `keys` (whatever their queues' in-flight
    /// counts), each with every other open batch of its shard whose queue has
    /// a free slot: one request per shard.
    fn send(&self, b: &mut Batches, keys: &[Key]) -> Vec<Failed> {
        let mut shards: Vec<Option<u32>> = keys.iter().filter_map(|k| b.open.get(k)).map(|o| o.shard).collect();
        shards.sort_unstable();
        shards.dedup();
        let mut failed = Vec::new();
        for shard in shards {
            let mut take: Vec<Key> =
                keys.iter().filter(|k| b.open.get(*k).is_some_and(|o| o.shard == shard)).cloned().collect();
            if shard.is_some() {
                let others =
                    b.open.iter().filter(|(k, o)| o.shard == shard && !take.contains(k) && self.has_slot(b, k));
                let others: Vec<Key> = others.map(|(k, _)| k.clone()).collect();
                take.extend(others);
            }
            failed.extend(self.send_all(b, &take));
        }
        failed
    }

    /// Sends the open batches of `keys`, one request per shard (more if they
    /// hold over `REQUEST_BYTES_MAX`), none added.
    fn send_all(&self, b: &mut Batches, keys: &[Key]) -> Vec<Failed> {
        let mut requests: Vec<Request> = Vec::new();
        for key in keys {
            let Some(open) = b.open.remove(key) else { continue };
            let bytes = open.batch.size_bytes();
            let (batch, entry) = (open.batch.finish(), Entry { key: key.clone(), waiters: open.waiters });
            match requests.iter_mut().find(|r| r.shard == open.shard && r.bytes + bytes <= REQUEST_BYTES_MAX) {
                Some(r) => {
                    r.bytes += bytes;
                    r.batches.push(batch);
                    r.entries.push(entry);
                }
                None => requests.push(Request { shard: open.shard, bytes, batches: vec![batch], entries: vec![entry] }),
            }
        }
        requests.into_iter().filter_map(|r| self.dispatch(b, r)).flatten().collect()
    }

    /// Sends one request. Called with the batches lock held, so that a
    /// queue's batches reach the connection in the order they were taken
    /// (they are stored in that order). A failure comes back to be resolved
    /// after the lock is released (callbacks may send again).
    fn dispatch(&self, b: &mut Batches, r: Request) -> Option<Vec<Failed>> {
        let Request { shard, bytes, batches, entries } = r;
        // The batches, and per entry its topic, queue and lengths.
        let framing: usize = entries.iter().map(|e| e.key.0.len() + 32).sum();
        let mut w = Writer::new(Vec::with_capacity(bytes + framing));
        let refs = entries
            .iter()
            .zip(&batches)
            .map(|(e, batch)| (QueueRef { topic: e.key.0.to_string(), queue: e.key.1 }, batch.as_slice()));
        msg::ProduceMany { acks: msg::ACKS_DURABLE, entries: refs.collect() }.encode(&mut w);
        let room = SPARE_BUFFERS_MAX.saturating_sub(b.spare.len());
        b.spare.extend(batches.into_iter().take(room));
        let Some(reply_to) = self.replies.lock().expect("replies lock").clone() else {
            let closed = ClientError::Invalid("the producer is closed".into());
            return Some(entries.into_iter().map(|e| (e.key.1, e.waiters, closed.clone())).collect());
        };
        let seq = self.next_seq.fetch_add(1, Ordering::Relaxed);
        let (topic, queue) = entries[0].key.clone();
        for e in &entries {
            *b.in_flight.entry(e.key.clone()).or_default() += 1;
        }
        let f = InFlight { shard, sent: Instant::now(), entries };
        self.inflight.lock().expect("inflight lock").insert(seq, f);
        let e =
            self.client.send_queue((&topic, queue), (ApiKey::ProduceMany, 0), &w.buf, Some((reply_to, seq))).err()?;
        let f = self.inflight.lock().expect("inflight lock").remove(&seq)?;
        for entry in &f.entries {
            if let Some(n) = b.in_flight.get_mut(&entry.key) {
                *n = n.saturating_sub(1);
            }
        }
        Some(f.entries.into_iter().map(|entry| (entry.key.1, entry.waiters, e.clone())).collect())
    }

    /// Resolves answered batches. Replies that arrived together are all
    /// resolved before their queues' waiting batches are sent, so those go
    /// out in one request per shard. (Sending them before the callbacks run
    /// measured worse: e2e p99 in 5 of 7 pairs, docs/perf-log.md.)
    fn ack_loop(&self, replies: mpsc::Receiver<Tagged>) {
        while let Ok(first) = replies.recv() {
            let mut answered = Vec::new();
            for (seq, reply) in std::iter::once(first).chain(replies.try_iter()) {
                let Some(f) = self.inflight.lock().expect("inflight lock").remove(&seq) else { continue };
                answered.extend(self.resolve_reply(f, reply));
            }
            self.answered(&answered);
        }
    }

    /// Fails the messages of batches that could not be sent.
    fn fail(&self, failed: Vec<Failed>) {
        if let Some((_, _, error)) = failed.first() {
            self.client.note_failure(error);
        }
        for (queue, waiters, e) in failed {
            resolve(queue, waiters, Err(e));
        }
    }

    /// Resolves the messages of one answered request; returns its queues.
    fn resolve_reply(&self, f: InFlight, reply: Result<Reply, ClientError>) -> Vec<Key> {
        let outcomes = reply.and_then(|r| match r.error {
            ErrorCode::None => Ok(msg::decode_produced_many(&mut Reader::new(&r.body))?),
            code => Err(ClientError::Broker { code, message: r.message }),
        });
        let outcomes = outcomes.and_then(|o| {
            if o.len() == f.entries.len() {
                Ok(o)
            } else {
                Err(ClientError::Protocol(format!("{} outcomes for {} batches", o.len(), f.entries.len())))
            }
        });
        if let (Some(faults), Some(shard)) = (&self.faults, f.shard) {
            let failed = outcomes.as_ref().map_or(true, |o| o.iter().any(|x| x.is_err()));
            faults.record(shard, f.sent.elapsed(), failed);
        }
        let keys = f.entries.iter().map(|e| e.key.clone()).collect();
        let mut noted = false;
        for (i, entry) in f.entries.into_iter().enumerate() {
            let outcome = match &outcomes {
                Ok(o) => o[i].clone().map_err(|(code, message)| ClientError::Broker { code, message }),
                Err(e) => Err(e.clone()),
            };
            if let (Err(error), false) = (&outcome, noted) {
                self.client.note_failure(error);
                noted = true;
            }
            resolve(entry.key.1, entry.waiters, outcome);
        }
        keys
    }
}

/// The batches of one ProduceMany request, for one shard.
struct Request {
    shard: Option<u32>,
    bytes: usize,
    batches: Vec<Vec<u8>>,
    entries: Vec<Entry>,
}

/// Batches that could not be sent: queue, waiters, why.
type Failed = (u32, Vec<Waiter>, ClientError);

fn resolve(queue: u32, waiters: Vec<Waiter>, outcome: Result<(u64, u32), ClientError>) {
    for (i, w) in waiters.into_iter().enumerate() {
        let result = match &outcome {
            Ok((base, _)) => Ok(SendResult { message_id: w.id, queue, offset: base + i as u64 }),
            Err(e) => Err(e.clone()),
        };
        w.done.finish(result);
    }
}
