//! Fetch of the partitions this shard owns: every partition is read at
//! once and, when none has news, all are long-polled until the first does
//! or `max_wait_ms` (at most the broker's `fetch_wait_max`) passes, as
//! native FetchMany does. A Kafka producer's stored batches are served as
//! it sent them, ringmq's own encoded as record batches v2 (`records.rs`).
//! A read_committed fetch stops at each partition's last stable offset and
//! carries the aborted transactions among what it returns, whose records
//! the client drops; read_uncommitted reads everything stored.

use super::{Api, At};
use crate::protocol::messages::{Fetch as Read, QueueRef};
use crate::security::acl::Operation;
use crate::server::auth::authorizer;
use crate::server::auth::quotas;
use crate::server::core::traffic::{Direction, Tally};
use crate::server::core::{Core, Failure};
use crate::server::data::fetch::{fetch_many, FetchFailed, Isolation, QueueRead};
use crate::server::kafka::records::to_kafka;
use crate::server::kafka::{codes, owned, permitted, Services};
use kafka_protocol::messages::fetch_response::{AbortedTransaction, FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::{ApiKey, FetchRequest, FetchResponse, ProducerId};
use kafka_protocol::ResponseError;
use ringmq_shards::QueueId;
use std::time::Duration;

pub struct Fetch;

/// Fetch's isolation level that stops at the last stable offset.
const READ_COMMITTED: i8 = 1;

impl Api for Fetch {
    const KEY: ApiKey = ApiKey::Fetch;
    const VERSIONS: (i16, i16) = (4, 11);
    const NAME: &'static str = "kafka_Fetch";
    const NOTE: &'static str = "one long poll over the request's partitions; a Kafka producer's batches \
                                served as sent, ringmq's own as uncompressed record batches v2; read_committed \
                                stops at the last stable offset, with the aborted transactions";
    type Request = FetchRequest;
    type Response = FetchResponse;

    async fn serve(s: &Services, request: FetchRequest, at: &At) -> Option<FetchResponse> {
        let core = &s.core;
        let asked = asked(core, at, &request);
        let entries: Vec<Read> = asked.iter().filter_map(|a| a.read.as_ref().ok().cloned()).collect();
        let wait = Duration::from_millis(request.max_wait_ms.max(0) as u64).min(core.config().fetch_wait_max);
        let isolation =
            if request.isolation_level == READ_COMMITTED { Isolation::Committed } else { Isolation::Uncommitted };
        let mut reads = fetch_many(core, &entries, wait, isolation).await.into_iter();
        let consumer = if core.trace().is_on() { format!("kafka:{}", at.principal.client()) } else { String::new() };
        let mut topics: Vec<FetchableTopicResponse> = request
            .topics
            .iter()
            .map(|t| FetchableTopicResponse::default().with_topic(t.topic.clone()).with_topic_id(t.topic_id))
            .collect();
        for a in asked {
            let name = &request.topics[a.topic].topic;
            let data = PartitionData::default().with_partition_index(a.partition);
            let data = match a.read {
                Err(code) => {
                    count(core, name, Tally { failed: true, ..Tally::default() });
                    data.with_error_code(code)
                }
                Ok(f) => partition(core, name, &f, reads.next(), &consumer, data, isolation),
            };
            topics[a.topic].partitions.push(data);
        }
        let response = FetchResponse::default().with_responses(topics);
        let more = quotas::after_fetch(core, at.principal.user(), &at.client_id, record_bytes(&response)).await;
        Some(response.with_throttle_time_ms(at.throttle_ms_with(more)))
    }
}

/// A partition of the request: where its answer goes, and what to read.
struct Asked {
    topic: usize,
    partition: i32,
    read: Result<Read, i16>,
}

/// Every partition asked for, readable here or refused with Kafka's code.
fn asked(core: &Core, at: &At, request: &FetchRequest) -> Vec<Asked> {
    let refused = ResponseError::TopicAuthorizationFailed.code();
    let mut asked = Vec::new();
    for (topic, t) in request.topics.iter().enumerate() {
        let allowed = permitted(core, &at.principal, Operation::Read, authorizer::topic(&t.topic), refused);
        for p in &t.partitions {
            let queue = QueueRef { topic: t.topic.to_string(), queue: p.partition.max(0) as u32 };
            let read = allowed.and_then(|()| owned(core, &queue)).map(|_| Read {
                queue,
                offset: p.fetch_offset.max(0) as u64,
                max_bytes: p.partition_max_bytes.max(1) as u32,
                max_wait_ms: 0,
                tags: String::new(),
            });
            asked.push(Asked { topic, partition: p.partition, read });
        }
    }
    asked
}

/// A partition's answer from its read (None: lost, a server error), counted
/// and traced.
fn partition(
    core: &Core,
    topic: &str,
    f: &Read,
    read: Option<Result<QueueRead, FetchFailed>>,
    consumer: &str,
    data: PartitionData,
    isolation: Isolation,
) -> PartitionData {
    match read {
        Some(Ok(read)) => {
            let messages = read.next_offset().saturating_sub(f.offset);
            let last_stable = read.last_stable();
            let (start, end, batches) = read.into_parts();
            core.trace_delivered(&f.queue, &batches, f.offset, "", consumer);
            count(core, topic, Tally { messages, bytes: batches.len() as u64, failed: false });
            let data = data
                .with_high_watermark(end as i64)
                .with_last_stable_offset(last_stable as i64)
                .with_log_start_offset(start as i64);
            let data = match isolation {
                Isolation::Committed => data.with_aborted_transactions(Some(aborted(core, f, last_stable))),
                _ => data,
            };
            data.with_records(Some(to_kafka(batches)))
        }
        Some(Err(failed)) => {
            count(core, topic, Tally { failed: true, ..Tally::default() });
            let Failure(reason, message) = failed.failure;
            tracing::debug!(?reason, %message, "kafka fetch refused");
            data.with_error_code(codes::of(reason))
        }
        None => data.with_error_code(ResponseError::UnknownServerError.code()),
    }
}

/// The aborted transactions whose records a read_committed fetch from
/// `f.offset` up to the last stable offset may return.
fn aborted(core: &Core, f: &Read, last_stable: u64) -> Vec<AbortedTransaction> {
    let Ok(slot) = core.locate(&f.queue) else { return Vec::new() };
    let aborted = core.txn_marks().aborted_between(QueueId(slot.storage_id), f.offset, last_stable);
    aborted
        .into_iter()
        .map(|a| {
            AbortedTransaction::default().with_producer_id(ProducerId(a.producer_id)).with_first_offset(a.first as i64)
        })
        .collect()
}

fn count(core: &Core, topic: &str, tally: Tally) {
    core.count_traffic(Direction::Fetch, Fetch::NAME, topic, tally);
}

/// The record bytes a fetch response carries (what a fetch quota meters).
fn record_bytes(response: &FetchResponse) -> u64 {
    let partitions = response.responses.iter().flat_map(|t| &t.partitions);
    partitions.map(|p| p.records.as_ref().map_or(0, |r| r.len() as u64)).sum()
}
