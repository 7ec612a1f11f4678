//! Fetch and ListOffsets of the partitions this shard owns. A fetch reads
//! every partition at once and, when none has news, long-polls them all
//! until the first does or `max_wait_ms` (at most the broker's
//! `max_fetch_wait`) passes, as native FetchMany does.

use super::records::{timestamp_at, to_kafka};
use super::{codes, owned, permitted};
use crate::protocol::messages::{Fetch, QueueRef};
use crate::security::acl::Operation;
use crate::server::auth::authorizer::{self, Principal};
use crate::server::core::metadata::QueueSlot;
use crate::server::core::traffic::{Direction, Tally};
use crate::server::core::{Core, Failure};
use crate::server::data::fetch::fetch_many;
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::list_offsets_response::{ListOffsetsPartitionResponse, ListOffsetsTopicResponse};
use kafka_protocol::messages::{FetchRequest, FetchResponse, ListOffsetsRequest, ListOffsetsResponse};
use kafka_protocol::ResponseError;
use ringmq_shards::QueueId;
use std::time::Duration;

const TOPIC_REFUSED: i16 = ResponseError::TopicAuthorizationFailed.code();

/// ListOffsets' special timestamps.
const LATEST: i64 = -1;
const EARLIEST: i64 = -2;
const MAX_TIMESTAMP: i64 = -3;

/// A partition of the request: where its answer goes, and what to read.
struct Asked {
    topic: usize,
    partition: i32,
    read: Result<Fetch, i16>,
}

pub async fn fetch(core: &Core, principal: &Principal, request: &FetchRequest) -> FetchResponse {
    let consumer = if core.trace().is_on() { format!("kafka:{}", principal.client()) } else { String::new() };
    let mut asked = Vec::new();
    for (topic, t) in request.topics.iter().enumerate() {
        let allowed = permitted(core, principal, Operation::Read, authorizer::topic(&t.topic), TOPIC_REFUSED);
        for p in &t.partitions {
            let queue = QueueRef { topic: t.topic.to_string(), queue: p.partition.max(0) as u32 };
            let read = allowed.and_then(|()| owned(core, &queue)).map(|_| Fetch {
                queue,
                offset: p.fetch_offset.max(0) as u64,
                max_bytes: p.partition_max_bytes.max(1) as u32,
                max_wait_ms: 0,
                tags: String::new(),
            });
            asked.push(Asked { topic, partition: p.partition, read });
        }
    }
    let entries: Vec<Fetch> = asked.iter().filter_map(|a| a.read.as_ref().ok().cloned()).collect();
    let wait = Duration::from_millis(request.max_wait_ms.max(0) as u64).min(core.config().max_fetch_wait);
    let mut reads = fetch_many(core, &entries, wait).await.into_iter();
    let mut topics: Vec<FetchableTopicResponse> = request
        .topics
        .iter()
        .map(|t| FetchableTopicResponse::default().with_topic(t.topic.clone()).with_topic_id(t.topic_id))
        .collect();
    for a in asked {
        let data = PartitionData::default().with_partition_index(a.partition);
        let name = &request.topics[a.topic].topic;
        let data = match &a.read {
            Err(code) => {
                core.count_traffic(Direction::Fetch, "kafka_Fetch", name, Tally { failed: true, ..Tally::default() });
                data.with_error_code(*code)
            }
            Ok(f) => match reads.next().expect("one read per partition read") {
                Ok(read) => {
                    let messages = read.next_offset().saturating_sub(f.offset);
                    let (start, end, batches) = read.into_parts();
                    core.trace_delivered(&f.queue, &batches, f.offset, "", &consumer);
                    let tally = Tally { messages, bytes: batches.len() as u64, failed: false };
                    core.count_traffic(Direction::Fetch, "kafka_Fetch", name, tally);
                    data.with_high_watermark(end as i64)
                        .with_last_stable_offset(end as i64)
                        .with_log_start_offset(start as i64)
                        .with_records(Some(to_kafka(batches.into(), f.offset)))
                }
                Err(failed) => {
                    core.count_traffic(
                        Direction::Fetch,
                        "kafka_Fetch",
                        name,
                        Tally { failed: true, ..Tally::default() },
                    );
                    tracing::debug!(code = ?failed.code, message = %failed.message, "kafka fetch refused");
                    data.with_error_code(codes::of(failed.code))
                }
            },
        };
        topics[a.topic].partitions.push(data);
    }
    FetchResponse::default().with_responses(topics)
}

/// The record bytes a fetch response carries (what a fetch quota meters).
pub fn record_bytes(response: &FetchResponse) -> u64 {
    let partitions = response.responses.iter().flat_map(|t| &t.partitions);
    partitions.map(|p| p.records.as_ref().map_or(0, |r| r.len() as u64)).sum()
}

pub async fn list_offsets(core: &Core, principal: &Principal, request: &ListOffsetsRequest) -> ListOffsetsResponse {
    let mut topics = Vec::new();
    for t in &request.topics {
        let allowed = permitted(core, principal, Operation::Describe, authorizer::topic(&t.name), TOPIC_REFUSED);
        let mut partitions = Vec::new();
        for p in &t.partitions {
            let queue = QueueRef { topic: t.name.to_string(), queue: p.partition_index.max(0) as u32 };
            let response = ListOffsetsPartitionResponse::default().with_partition_index(p.partition_index);
            partitions.push(match allowed.and_then(|()| owned(core, &queue)) {
                Ok(slot) => match offset_for(core, slot, p.timestamp).await {
                    Ok((offset, timestamp)) => response.with_offset(offset).with_timestamp(timestamp),
                    Err(f) => response.with_error_code(codes::of(f.0)),
                },
                Err(code) => response.with_error_code(code),
            });
        }
        topics.push(ListOffsetsTopicResponse::default().with_name(t.name.clone()).with_partitions(partitions));
    }
    ListOffsetsResponse::default().with_topics(topics)
}

/// The offset (and its record's timestamp, -1 if not looked up) for a
/// ListOffsets timestamp: the start, the end, the last record, or the first
/// record stamped at or after it (-1 if none is).
async fn offset_for(core: &Core, slot: QueueSlot, timestamp: i64) -> Result<(i64, i64), Failure> {
    let (start, end) = core.storage().offsets(QueueId(slot.storage_id))?;
    match timestamp {
        EARLIEST => Ok((start as i64, -1)),
        LATEST => Ok((end as i64, -1)),
        MAX_TIMESTAMP if end > start => Ok((end as i64 - 1, record_time(core, slot, end - 1).await?)),
        MAX_TIMESTAMP => Ok((-1, -1)),
        t => {
            // Timestamps grow with offsets (producers stamp on send): search them.
            let (mut lo, mut hi) = (start, end);
            while lo < hi {
                let mid = lo + (hi - lo) / 2;
                if record_time(core, slot, mid).await? >= t {
                    hi = mid;
                } else {
                    lo = mid + 1;
                }
            }
            if lo == end {
                return Ok((-1, -1));
            }
            Ok((lo as i64, record_time(core, slot, lo).await?))
        }
    }
}

async fn record_time(core: &Core, slot: QueueSlot, offset: u64) -> Result<i64, Failure> {
    let read = core.read_here(slot, offset, 1, Duration::ZERO).await?;
    timestamp_at(&read.bytes, offset)
        .ok_or_else(|| Failure(crate::protocol::ErrorCode::CorruptData, format!("no record at offset {offset}")))
}
