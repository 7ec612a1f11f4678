//! Message trace (RocketMQ's): for the messages of the topics tracing is on
//! for (`--trace-topics`), or a sample of every topic's by message id
//! (`--trace-sample-rate`, the same messages on every shard and node), the
//! broker writes what happened to each to the internal topic `%TRACE`,
//! keyed by the message id in hex, so a lookup by key finds its timeline:
//! send (client, the producer's time), store (shard, queue, offset, durable
//! time), deliver (group, consumer, time), commit (the group committed past
//! it), retry (when due again) and dead-letter. Retry and dead-letter topics
//! are traced whenever any topic is (their messages come from one).
//!
//! Off, it costs one branch per produce, fetch and commit. On, events go to
//! a bounded buffer (`TRACE_BUFFER_MAX`; past it they are dropped and
//! counted), written by a task of the shard every `FLUSH_EVERY`, so a
//! traced request waits for no trace write.

use super::config::ConfigError;
use super::context::Core;
use super::failure::Reason;
use super::mesh::{Answer, Call};
use super::metrics::Samples;
use super::topics::NewTopic;
use crate::protocol::messages::{QueueRef, TRACE_TOPIC};
use ringmq_shards::batch::{self, BatchBuilder, BatchHeader};
use ringmq_shards::record::Record;
use ringmq_shards::FlushPolicy;
use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::rc::Rc;
use std::time::Duration;

/// Queues of the trace topic (events of one message all go to one).
const TRACE_QUEUES: u32 = 4;
/// Events held for writing at most; more are dropped (and counted).
const TRACE_BUFFER_MAX: usize = 65_536;
/// How often a shard writes its buffered events.
const FLUSH_EVERY: Duration = Duration::from_millis(100);
/// Traced deliveries a shard remembers per group and queue, until a commit passes them.
const UNCOMMITTED_MAX: usize = 1024;
/// Sampling resolution: a rate is kept in parts per million.
const PER_MILLION: u64 = 1_000_000;

/// What is traced.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TraceConfig {
    /// Topics whose every message is traced; `*` for all.
    pub topics: Vec<String>,
    /// Of every topic, the messages whose id hashes below this many per million.
    pub sample_per_million: u64,
}

impl TraceConfig {
    /// From `--trace-topics a,b` and `--trace-sample-rate 0.01`.
    pub fn new(topics: &str, sample_rate: f64) -> Result<TraceConfig, ConfigError> {
        if !(0.0..=1.0).contains(&sample_rate) {
            return Err(ConfigError::SampleRate(sample_rate));
        }
        let topics = topics.split(',').map(str::trim).filter(|t| !t.is_empty()).map(str::to_string).collect();
        Ok(TraceConfig { topics, sample_per_million: (sample_rate * PER_MILLION as f64).round() as u64 })
    }

    pub fn is_on(&self) -> bool {
        !self.topics.is_empty() || self.sample_per_million > 0
    }

    /// Whether every message of `topic` is traced.
    fn traces_topic(&self, topic: &str) -> bool {
        if topic == TRACE_TOPIC {
            return false;
        }
        let retry_or_dead = topic.starts_with("%RETRY%") || topic.starts_with("%DLQ%");
        (retry_or_dead && !self.topics.is_empty()) || self.topics.iter().any(|t| t == "*" || t == topic)
    }

    /// Whether the message `id` of `topic` is traced.
    fn traces(&self, topic: &str, id: &[u8; 16]) -> bool {
        if topic == TRACE_TOPIC {
            return false;
        }
        self.traces_topic(topic)
            || (self.sample_per_million > 0 && u64::from(crc32fast::hash(id)) % PER_MILLION < self.sample_per_million)
    }
}

/// Traced messages delivered from one queue to one group: (offset, message id), oldest first.
type Delivered = VecDeque<(u64, [u8; 16])>;

/// One shard's trace: buffered events, and traced deliveries awaiting a commit.
#[derive(Default)]
pub struct Trace {
    config: TraceConfig,
    buffer: RefCell<VecDeque<([u8; 16], serde_json::Value)>>,
    written: Cell<u64>,
    dropped: Cell<u64>,
    /// By (group, topic, queue): traced messages delivered, oldest first.
    uncommitted: RefCell<HashMap<(String, String, u32), Delivered>>,
}

/// Unix milliseconds now (the system's: trace times are wall times, even under a manual due-time clock).
fn now_ms() -> i64 {
    crate::duration::unix_ms() as i64
}

impl Trace {
    pub fn new(config: TraceConfig) -> Trace {
        Trace { config, ..Trace::default() }
    }

    pub fn is_on(&self) -> bool {
        self.config.is_on()
    }

    fn note(&self, id: [u8; 16], event: serde_json::Value) {
        let mut buffer = self.buffer.borrow_mut();
        if buffer.len() >= TRACE_BUFFER_MAX {
            self.dropped.set(self.dropped.get() + 1);
            return;
        }
        buffer.push_back((id, event));
    }

    pub fn collect(&self, out: &mut Samples) {
        if !self.is_on() {
            return;
        }
        out.counter("ringmq_trace_events", "Trace events written to the trace topic.", &[], self.written.get());
        let help = "Trace events dropped because the shard's trace buffer was full.";
        out.counter("ringmq_trace_dropped", help, &[], self.dropped.get());
    }
}

/// The offsets and message ids of the traced records of whole stored
/// `batches` at or past offset `from`.
fn traced_records(config: &TraceConfig, topic: &str, batches: &[u8], from: u64) -> Vec<(u64, [u8; 16])> {
    let mut found = Vec::new();
    for b in batch::split(batches) {
        let Some(h) = BatchHeader::decode(b) else { continue };
        let mut inflated = Vec::new();
        let Ok(records) = batch::records(b, &mut inflated) else { continue };
        for (k, r) in records.enumerate() {
            let offset = h.base_offset + k as u64;
            match r {
                Ok(r) if offset >= from && config.traces(topic, &r.message_id) => found.push((offset, r.message_id)),
                _ => {}
            }
        }
    }
    found
}

impl Core {
    /// A producer's batch was stored at `base_offset` of queue `q`: its
    /// traced records were sent by `client` and stored.
    pub fn trace_stored(&self, q: &QueueRef, base_offset: u64, batch: &[u8], client: &str) {
        let (topic, queue, trace) = (q.topic.as_str(), q.queue, self.trace());
        if !trace.is_on() || (!trace.config.traces_topic(topic) && trace.config.sample_per_million == 0) {
            return;
        }
        let Some(h) = BatchHeader::decode(batch) else { return };
        let (stored_ms, shard) = (now_ms(), self.locate(q).map_or(self.id(), |slot| slot.shard as usize));
        let mut inflated = Vec::new();
        let Ok(records) = batch::records(batch, &mut inflated) else { return };
        for (k, r) in records.enumerate() {
            let Ok(r) = r else { return };
            if !trace.config.traces(topic, &r.message_id) {
                continue;
            }
            let sent_ms = h.first_timestamp_ms.saturating_add(r.timestamp_delta_ms);
            trace.note(
                r.message_id,
                serde_json::json!({"event": "send", "time_ms": sent_ms, "client": client, "topic": topic}),
            );
            let offset = base_offset + k as u64;
            let stored = serde_json::json!({"event": "store", "time_ms": stored_ms, "shard": shard, "topic": topic,
                "queue": queue, "offset": offset});
            trace.note(r.message_id, stored);
        }
    }

    /// A fetch returned `batches` of queue `q` from offset `from` to
    /// `consumer` of `group` ("" for none): its traced records were delivered.
    pub fn trace_delivered(&self, q: &QueueRef, batches: &[u8], from: u64, group: &str, consumer: &str) {
        let (topic, queue, trace) = (q.topic.as_str(), q.queue, self.trace());
        if !trace.is_on() || batches.is_empty() {
            return;
        }
        let delivered = traced_records(&trace.config, topic, batches, from);
        if delivered.is_empty() {
            return;
        }
        let time_ms = now_ms();
        let mut uncommitted = trace.uncommitted.borrow_mut();
        let mut pending =
            (!group.is_empty()).then(|| uncommitted.entry((group.to_string(), topic.to_string(), queue)).or_default());
        for (offset, message_id) in delivered {
            let event = serde_json::json!({"event": "deliver", "time_ms": time_ms, "group": group, "consumer": consumer,
                "topic": topic, "queue": queue, "offset": offset});
            trace.note(message_id, event);
            if let Some(pending) = pending.as_mut() {
                if pending.back().is_none_or(|(last, _)| *last < offset) {
                    if pending.len() == UNCOMMITTED_MAX {
                        pending.pop_front();
                    }
                    pending.push_back((offset, message_id));
                }
            }
        }
    }

    /// `group` committed `offset` of `topic`'s `queue` (on its coordinator):
    /// the queue's owner notes the traced deliveries it passed as committed.
    pub async fn trace_committed(&self, group: &str, member: &str, q: &QueueRef, offset: u64) {
        if !self.trace().is_on() {
            return;
        }
        let Some(slot) = self.home(q).ok().and_then(|h| h.served()) else { return };
        let commit = Call::TraceCommit { group: group.into(), member: member.into(), queue: q.clone(), offset };
        if self.owns(slot) {
            self.serve_trace_commit(commit);
        } else if let Err(failure) = self.mesh().call_applied(slot.shard as usize, commit).await {
            tracing::debug!(shard = self.id(), %failure, "a traced commit did not reach the queue's owner");
        }
    }

    /// Notes the traced deliveries a commit passed (on the queue's owner).
    pub fn serve_trace_commit(&self, commit: Call) -> Answer {
        let Call::TraceCommit { group, member, queue, offset } = commit else { unreachable!("a trace commit") };
        let trace = self.trace();
        let key = (group, queue.topic, queue.queue);
        let passed: Vec<(u64, [u8; 16])> = {
            let mut uncommitted = trace.uncommitted.borrow_mut();
            let Some(pending) = uncommitted.get_mut(&key) else { return Answer::Applied };
            let n = pending.iter().take_while(|(o, _)| *o < offset).count();
            pending.drain(..n).collect()
        };
        let time_ms = now_ms();
        for (at, id) in passed {
            let event = serde_json::json!({"event": "commit", "time_ms": time_ms, "group": key.0, "member": member,
                "topic": key.1, "queue": key.2, "offset": at, "committed": offset});
            trace.note(id, event);
        }
        Answer::Applied
    }

    /// A message of `topic` (id `id`) that `group` sent back: `dead` (to
    /// its dead-letter topic) or a retry due at `due_ms` (its `times`th).
    pub fn trace_sent_back(&self, topic: &str, id: [u8; 16], group: &str, times: u32, due_ms: u64, dead: bool) {
        let trace = self.trace();
        if !trace.is_on() || !trace.config.traces(topic, &id) {
            return;
        }
        let event = if dead {
            serde_json::json!({"event": "dead_letter", "time_ms": now_ms(), "group": group, "topic": topic,
                "reconsume_times": times})
        } else {
            serde_json::json!({"event": "retry", "time_ms": now_ms(), "group": group, "topic": topic,
                "reconsume_times": times, "due_ms": due_ms})
        };
        trace.note(id, event);
    }

    /// Writes the buffered events every `FLUSH_EVERY` until the shard stops
    /// (shard 0 creates the trace topic first).
    pub async fn write_traces(self: Rc<Self>) {
        if self.id() == 0 {
            let topic = NewTopic {
                name: TRACE_TOPIC.into(),
                queues: TRACE_QUEUES,
                flush: FlushPolicy::Sync,
                configs: Default::default(),
            };
            match self.create_topic(topic).await {
                Ok(()) | Err(super::Failure(Reason::TopicExists, _)) => {}
                Err(failure) => tracing::error!(%failure, "creating the trace topic failed; traces are dropped"),
            }
        }
        while self.tasks().sleep(FLUSH_EVERY).await {
            let events: Vec<_> = self.trace().buffer.borrow_mut().drain(..).collect();
            if !events.is_empty() {
                self.write_events(events).await;
            }
        }
    }

    /// One batch per trace queue, each record keyed by its message id in hex.
    async fn write_events(&self, events: Vec<([u8; 16], serde_json::Value)>) {
        let mut by_queue: HashMap<u32, Vec<(String, Vec<u8>)>> = HashMap::new();
        for (id, event) in events {
            let queue = crc32fast::hash(&id) % TRACE_QUEUES;
            let key = crate::client::MessageId(id).to_string();
            by_queue.entry(queue).or_default().push((key, event.to_string().into_bytes()));
        }
        for (queue, records) in by_queue {
            let mut b = BatchBuilder::new(now_ms());
            for (key, value) in &records {
                b.push(&Record { key: Some(key.as_bytes()), value: Some(value), ..Record::default() });
            }
            let q = QueueRef { topic: TRACE_TOPIC.into(), queue };
            match self.append(&q, &b.finish()).await {
                Ok(_) => self.trace().written.set(self.trace().written.get() + records.len() as u64),
                Err(failure) => {
                    self.trace().dropped.set(self.trace().dropped.get() + records.len() as u64);
                    tracing::warn!(shard = self.id(), %failure, "writing trace events failed");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topics_and_samples_pick_the_same_messages_everywhere() {
        let config = TraceConfig::new("orders, pay", 0.0).unwrap();
        assert!(config.traces("orders", &[1; 16]));
        assert!(config.traces("%RETRY%billing", &[1; 16]), "retries of traced topics are traced");
        assert!(!config.traces("other", &[1; 16]));
        assert!(!config.traces(TRACE_TOPIC, &[1; 16]), "the trace is never traced");
        let half = TraceConfig::new("", 0.5).unwrap();
        let traced = (0u32..10_000)
            .filter(|i| half.traces("any", &[*i as u8, (*i >> 8) as u8, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7]))
            .count();
        assert!((4_000..6_000).contains(&traced), "{traced} of 10000 sampled at 0.5");
        assert!(!TraceConfig::new("", 0.0).unwrap().is_on());
        assert!(TraceConfig::new("", 1.5).is_err());
    }
}
