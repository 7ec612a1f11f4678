//! Send-back of a message a group failed to consume (RocketMQ's retry): the
//! shard that owns the message schedules a copy, with its message id and a
//! reconsume count, on a delay level that grows with the count; when due it
//! lands in the group's retry topic, which the group consumes with its
//! subscriptions. Past the group's limit it goes to the group's dead-letter
//! topic, which nobody consumes automatically.

use super::handler::{self, Failure};
use super::schedule;
use super::shard_server::ShardCtx;
use crate::protocol::messages::{SendBack, SentBack};
use crate::protocol::ErrorCode;
use ringmq_shards::batch::{self, BatchHeader};
use ringmq_shards::record::RecordIter;
use ringmq_shards::{QueueId, ReadWait};
use std::rc::Rc;

/// Header: how many times the message was sent back (u32 LE).
pub const RECONSUME: &[u8] = b"ringmq.reconsume";
/// Headers: where the message was first produced (topic; u32 queue; u64 offset, LE).
pub const ORIGIN_TOPIC: &[u8] = b"ringmq.origin.topic";
pub const ORIGIN_QUEUE: &[u8] = b"ringmq.origin.queue";
pub const ORIGIN_OFFSET: &[u8] = b"ringmq.origin.offset";

/// Tries before a message goes to the dead-letter topic, unless the group says otherwise.
pub const DEFAULT_MAX_RETRIES: u32 = 16;

/// The group's retry topic.
pub fn retry_topic(group: &str) -> String {
    format!("%RETRY%{group}")
}

/// The group's dead-letter topic.
pub fn dlq_topic(group: &str) -> String {
    format!("%DLQ%{group}")
}

/// Sends back the record at `offset` of the queue (owned by this shard as `storage_id`).
pub async fn send_back(ctx: &Rc<ShardCtx>, req: &SendBack, storage_id: u32) -> Result<SentBack, Failure> {
    if !super::metadata::valid_topic_name(&req.group) {
        return Err(Failure(ErrorCode::InvalidRequest, format!("group name {:?} is not a valid name", req.group)));
    }
    let read = ctx.storage.read(QueueId(storage_id), req.offset, 1, ReadWait::No).await?;
    let found = batch::split(&read.bytes).find_map(|b| {
        let h = BatchHeader::decode(b)?;
        let k = req.offset.checked_sub(h.base_offset)?;
        RecordIter::new(&b[batch::HEADER_BYTES..]).nth(k as usize)?.ok()
    });
    let Some(record) = found else {
        return Err(Failure(ErrorCode::OffsetOutOfRange, format!("no message at offset {}", req.offset)));
    };
    let header = |name: &[u8]| record.headers.iter().find(|(n, _)| *n == name).map(|(_, v)| v);
    let times = header(RECONSUME).and_then(|v| v.try_into().ok()).map_or(0, u32::from_le_bytes) + 1;
    let (origin_queue, origin_offset) = (req.queue.queue.to_le_bytes(), req.offset.to_le_bytes());
    let origin_topic = header(ORIGIN_TOPIC).unwrap_or(req.queue.topic.as_bytes());
    let origin_queue = header(ORIGIN_QUEUE).unwrap_or(&origin_queue);
    let origin_offset = header(ORIGIN_OFFSET).unwrap_or(&origin_offset);
    let times_bytes = times.to_le_bytes();
    let set: [(&[u8], &[u8]); 4] = [
        (RECONSUME, &times_bytes),
        (ORIGIN_TOPIC, origin_topic),
        (ORIGIN_QUEUE, origin_queue),
        (ORIGIN_OFFSET, origin_offset),
    ];
    let max = if req.max_retries == 0 { DEFAULT_MAX_RETRIES } else { req.max_retries };
    if times > max || req.dead_letter {
        let dlq = dlq_topic(&req.group);
        handler::ensure_topic(ctx, &dlq).await?;
        let keep = |name: &[u8]| set.iter().all(|(n, _)| *n != name);
        let batch = schedule::rebuilt(&record, ctx.clock.now_ms() as i64, &set, keep);
        handler::produce_internal(ctx, &dlq, 0, &batch).await?;
        tracing::info!(group = %req.group, times, "message moved to the dead-letter topic");
        return Ok(SentBack { dead_lettered: true, reconsume_times: times, due_ms: 0 });
    }
    let level = match req.delay_level {
        0 => (times + 2).min(schedule::LEVELS),
        l if l <= schedule::LEVELS => l,
        l => return Err(Failure(ErrorCode::InvalidRequest, format!("delay level {l} is outside 1..=18"))),
    };
    let retry = retry_topic(&req.group);
    handler::ensure_topic(ctx, &retry).await?;
    let due_ms = schedule::put(ctx, level, &retry, 0, &record, &set).await?;
    Ok(SentBack { dead_lettered: false, reconsume_times: times, due_ms })
}
