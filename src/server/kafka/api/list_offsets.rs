//! ListOffsets of the partitions this shard owns: earliest, latest (for
//! read_committed, the last stable offset), the last record (max
//! timestamp), or the first record stamped at or after a time (a binary
//! search over offsets).

use super::{Api, At};
use crate::protocol::messages::QueueRef;
use crate::security::acl::Operation;
use crate::server::auth::authorizer;
use crate::server::core::metadata::QueueSlot;
use crate::server::core::Reason;
use crate::server::core::{Core, Failure};
use crate::server::kafka::records::timestamp_at;
use crate::server::kafka::{codes, owned, permitted, Services};
use kafka_protocol::messages::list_offsets_response::{ListOffsetsPartitionResponse, ListOffsetsTopicResponse};
use kafka_protocol::messages::{ApiKey, ListOffsetsRequest, ListOffsetsResponse};
use kafka_protocol::ResponseError;
use ringmq_shards::QueueId;
use std::time::Duration;

pub struct ListOffsets;

/// ListOffsets' special timestamps.
const LATEST: i64 = -1;
const EARLIEST: i64 = -2;
const MAX_TIMESTAMP: i64 = -3;

/// The isolation level whose latest offset is the last stable one.
const READ_COMMITTED: i8 = 1;

impl Api for ListOffsets {
    const KEY: ApiKey = ApiKey::ListOffsets;
    const VERSIONS: (i16, i16) = (1, 7);
    const NAME: &'static str = "kafka_ListOffsets";
    const NOTE: &'static str = "earliest, latest (read_committed: the last stable offset), max timestamp and by \
                                timestamp (a binary search over offsets)";
    type Request = ListOffsetsRequest;
    type Response = ListOffsetsResponse;

    async fn serve(s: &Services, request: ListOffsetsRequest, at: &At) -> Option<ListOffsetsResponse> {
        let core = &s.core;
        let refused = ResponseError::TopicAuthorizationFailed.code();
        let mut topics = Vec::new();
        for t in &request.topics {
            let allowed = permitted(core, &at.principal, Operation::Describe, authorizer::topic(&t.name), refused);
            let mut partitions = Vec::new();
            for p in &t.partitions {
                let queue = QueueRef { topic: t.name.to_string(), queue: p.partition_index.max(0) as u32 };
                let response = ListOffsetsPartitionResponse::default().with_partition_index(p.partition_index);
                partitions.push(match allowed.and_then(|()| owned(core, &queue)) {
                    Ok(slot) => match offset_for(core, slot, p.timestamp, request.isolation_level).await {
                        Ok((offset, timestamp)) => response.with_offset(offset).with_timestamp(timestamp),
                        Err(f) => response.with_error_code(codes::of(f.0)),
                    },
                    Err(code) => response.with_error_code(code),
                });
            }
            topics.push(ListOffsetsTopicResponse::default().with_name(t.name.clone()).with_partitions(partitions));
        }
        Some(ListOffsetsResponse::default().with_topics(topics).with_throttle_time_ms(at.throttle_ms()))
    }
}

/// The offset (and its record's timestamp, -1 if not looked up) for a
/// ListOffsets timestamp: the start, the end, the last record, or the first
/// record stamped at or after it (-1 if none is).
async fn offset_for(core: &Core, slot: QueueSlot, timestamp: i64, isolation: i8) -> Result<(i64, i64), Failure> {
    let queue = QueueId(slot.storage_id);
    let (start, end) = core.queue_offsets(queue)?;
    match timestamp {
        EARLIEST => Ok((start as i64, -1)),
        LATEST if isolation == READ_COMMITTED => Ok((core.txn_marks().last_stable(queue, end) as i64, -1)),
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
        .ok_or_else(|| Failure(Reason::CorruptData, format!("no record at offset {offset}")))
}
