//! Client traffic of one shard: every request by API, its errors by code
//! and how long the broker took to serve it, as the edge that received it
//! (native or Kafka) answered them; and
//! by API and topic, requests, messages, bytes and errors of produces and
//! fetches, counted on the shard that owns the queue. A topic that is not
//! known is counted under `UNKNOWN_TOPIC`, so a client naming random topics
//! cannot grow the label set; deleted topics are dropped at the next scrape.

use super::context::Core;
use super::metadata::Metadata;
use super::metrics::Samples;
use ringmq_shards::{Histogram, LATENCY_SECONDS};
use std::cell::RefCell;
use std::collections::HashMap;
use std::time::Duration;

/// The topic label of requests for a topic the broker does not have.
pub const UNKNOWN_TOPIC: &str = "(unknown)";

/// Produce or fetch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    Produce,
    Fetch,
}

/// What one request did to one topic.
#[derive(Debug, Clone, Copy, Default)]
pub struct Tally {
    pub messages: u64,
    pub bytes: u64,
    pub failed: bool,
}

/// One API's counts per topic.
type ByTopic = HashMap<String, Counts>;

#[derive(Debug, Default, Clone, Copy)]
struct Counts {
    requests: u64,
    messages: u64,
    bytes: u64,
    errors: u64,
}

/// The counts: requests by API, errors by API and code, then produces and
/// fetches by direction and API, then by topic.
#[derive(Default)]
pub struct Traffic {
    requests: RefCell<HashMap<&'static str, u64>>,
    errors: RefCell<HashMap<(&'static str, &'static str), u64>>,
    seconds: RefCell<HashMap<&'static str, Histogram>>,
    by_api: RefCell<HashMap<(Direction, &'static str), ByTopic>>,
}

impl Traffic {
    /// Counts one request an edge answered (`api`: its name, e.g.
    /// `Produce`, `kafka_Fetch`), with the code of its error if it failed,
    /// and how long it took to serve: from its decoded frame to its
    /// response made (a long poll's wait included, as Kafka's request
    /// metrics count it; the socket's reads and writes not).
    pub fn answered(&self, api: &'static str, error: Option<&'static str>, took: Duration) {
        *self.requests.borrow_mut().entry(api).or_default() += 1;
        if let Some(code) = error {
            *self.errors.borrow_mut().entry((api, code)).or_default() += 1;
        }
        let mut seconds = self.seconds.borrow_mut();
        seconds.entry(api).or_insert_with(|| Histogram::new(LATENCY_SECONDS)).observe_duration(took);
    }

    /// Counts one request's work on `topic` (`api`: the request's name, e.g.
    /// `ProduceMany`, `kafka_Fetch`); `known`: the broker has the topic.
    pub fn count(&self, direction: Direction, api: &'static str, topic: &str, known: bool, served: Tally) {
        let topic = if known { topic } else { UNKNOWN_TOPIC };
        let mut by_api = self.by_api.borrow_mut();
        let topics = by_api.entry((direction, api)).or_default();
        let counts = match topics.get_mut(topic) {
            Some(counts) => counts,
            None => topics.entry(topic.to_string()).or_default(),
        };
        counts.requests += 1;
        counts.messages += served.messages;
        counts.bytes += served.bytes;
        counts.errors += u64::from(served.failed);
    }

    /// The samples of every topic `metadata` still has (the others are forgotten).
    pub fn collect(&self, metadata: &Metadata, out: &mut Samples) {
        let help = "Requests answered, by API (native names; the Kafka listener's prefixed kafka_).";
        for (api, count) in self.requests.borrow().iter() {
            out.counter("ringmq_requests", help, &[("api", api)], *count);
        }
        let help = "Requests answered with an error, by API and error code.";
        for ((api, code), count) in self.errors.borrow().iter() {
            out.counter("ringmq_request_errors", help, &[("api", api), ("code", code)], *count);
        }
        let help = "Time the broker took to serve a request, by API: from its decoded frame to its response (a fetch's long poll included).";
        for (api, histogram) in self.seconds.borrow().iter() {
            out.histogram("ringmq_request_seconds", help, &[("api", api)], histogram.snapshot());
        }
        let mut by_api = self.by_api.borrow_mut();
        for topics in by_api.values_mut() {
            topics.retain(|topic, _| topic == UNKNOWN_TOPIC || metadata.topics.contains_key(topic));
        }
        for direction in [Direction::Produce, Direction::Fetch] {
            let names = names(direction);
            for (field, name, help) in names {
                for ((_, api), topics) in by_api.iter().filter(|((d, _), _)| *d == direction) {
                    for (topic, counts) in topics {
                        let value = match field {
                            Field::Requests => counts.requests,
                            Field::Messages => counts.messages,
                            Field::Bytes => counts.bytes,
                            Field::Errors => counts.errors,
                        };
                        out.counter(name, help, &[("api", api), ("topic", topic)], value);
                    }
                }
            }
        }
    }
}

impl Core {
    /// Counts one request's work on `topic` in this shard's traffic.
    pub fn count_traffic(&self, direction: Direction, api: &'static str, topic: &str, served: Tally) {
        let known = self.metadata().topics.contains_key(topic);
        self.traffic().count(direction, api, topic, known, served);
    }
}

#[derive(Clone, Copy)]
enum Field {
    Requests,
    Messages,
    Bytes,
    Errors,
}

fn names(direction: Direction) -> [(Field, &'static str, &'static str); 4] {
    match direction {
        Direction::Produce => [
            (Field::Requests, "ringmq_produce_requests", "Produce requests served, per topic they wrote to."),
            (Field::Messages, "ringmq_produce_messages", "Messages stored by produce requests."),
            (Field::Bytes, "ringmq_produce_bytes", "Bytes of record batches stored by produce requests."),
            (Field::Errors, "ringmq_produce_errors", "Produce requests refused or failed, per topic."),
        ],
        Direction::Fetch => [
            (Field::Requests, "ringmq_fetch_requests", "Fetch requests served, per topic they read."),
            (
                Field::Messages,
                "ringmq_fetch_messages",
                "Offsets a fetch moved past (messages returned or filtered out).",
            ),
            (Field::Bytes, "ringmq_fetch_bytes", "Bytes of record batches returned by fetches."),
            (Field::Errors, "ringmq_fetch_errors", "Fetches refused or failed, per topic."),
        ],
    }
}
