//! Send-back of a message a group failed to consume (RocketMQ's retry): the
//! shard that owns the message schedules a copy, with its message id and a
//! reconsume count, on a delay level that grows with the count; when due it
//! lands in the group's retry topic, which the group consumes with its
//! subscriptions. Past the group's limit it goes to the group's dead-letter
//! topic, which nobody consumes automatically.

use super::levels::level_delay;
use super::probe::SendBacks;
use crate::protocol::messages::{QueueRef, SendBack, SentBack};
use crate::server::core::metadata::{self, QueueSlot};
use crate::server::core::Reason;
use crate::server::core::{Core, Failure};
use crate::server::internal::queues::{self, delay_level, DELAY_LEVELS};
use crate::server::internal::stamp::{self, Destination};
use ringmq_shards::{QueueId, Record};
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

/// Sends back the record at `offset` of the queue (owned by this shard at
/// `slot`), counted in `counts` once it was scheduled or dead-lettered.
pub async fn send_back(
    core: &Rc<Core>,
    req: &SendBack,
    slot: QueueSlot,
    counts: &SendBacks,
) -> Result<SentBack, Failure> {
    assert!(core.owns(slot), "a send-back is served by the queue's owner");
    if !metadata::valid_topic_name(&req.group) {
        return Err(Failure::invalid(format!("group name {:?} is not a valid name", req.group)));
    }
    let level = req.delay_level;
    if level != 0 {
        level_delay(core.config(), level)?;
    }
    let (retry, dlq) = (retry_topic(&req.group), dlq_topic(&req.group));
    // The retry copy names its queue: this broker group's of the retry topic.
    core.ensure_topic(&retry).await?;
    let queue = core.home_queue(&retry)?;
    let retry_queue = QueueRef { topic: retry, queue };
    let copy = queues::with_record(core.storage(), QueueId(slot.storage_id), req.offset, |r| {
        copy_back(core, req, level, &retry_queue, r)
    })
    .await?
    .ok_or_else(|| Failure(Reason::OffsetOutOfRange, format!("no message at offset {}", req.offset)))??;
    let max = if req.max_retries == 0 { DEFAULT_MAX_RETRIES } else { req.max_retries };
    if copy.times > max || req.dead_letter {
        core.ensure_topic(&dlq).await?;
        let queue = core.home_queue(&dlq)?;
        core.append(&QueueRef { topic: dlq, queue }, &copy.dead_letter).await?;
        tracing::info!(group = %req.group, times = copy.times, "message moved to the dead-letter topic");
        counts.count(&req.group, true);
        core.trace_sent_back(&req.queue.topic, copy.id, &req.group, copy.times, 0, true);
        return Ok(SentBack { dead_lettered: true, reconsume_times: copy.times, due_ms: 0 });
    }
    core.storage().append(delay_level(copy.level), &copy.retry).await?;
    counts.count(&req.group, false);
    core.trace_sent_back(&req.queue.topic, copy.id, &req.group, copy.times, copy.due_ms, false);
    Ok(SentBack { dead_lettered: false, reconsume_times: copy.times, due_ms: copy.due_ms })
}

/// A failed message's copies: for the retry schedule and for the dead-letter topic.
struct Copy {
    /// The message's id (its copies keep it).
    id: [u8; 16],
    times: u32,
    level: u32,
    due_ms: u64,
    retry: Vec<u8>,
    dead_letter: Vec<u8>,
}

/// Counts the send-back, keeps the origin, and stamps the retry copy with
/// its level's due time (level `count + 2` unless the request names one).
fn copy_back(core: &Core, req: &SendBack, level: u32, retry: &QueueRef, record: &Record<'_>) -> Result<Copy, Failure> {
    let header = |name| record.headers.get(name);
    let times = header(RECONSUME).and_then(|v| v.try_into().ok()).map_or(0, u32::from_le_bytes) + 1;
    let (origin_queue, origin_offset) = (req.queue.queue.to_le_bytes(), req.offset.to_le_bytes());
    let times_bytes = times.to_le_bytes();
    let set: [(&[u8], &[u8]); 4] = [
        (RECONSUME, &times_bytes),
        (ORIGIN_TOPIC, header(ORIGIN_TOPIC).unwrap_or(req.queue.topic.as_bytes())),
        (ORIGIN_QUEUE, header(ORIGIN_QUEUE).unwrap_or(&origin_queue)),
        (ORIGIN_OFFSET, header(ORIGIN_OFFSET).unwrap_or(&origin_offset)),
    ];
    let level = if level == 0 { (times + 2).min(DELAY_LEVELS) } else { level };
    let now = core.clock().now_ms();
    let due_ms = now + level_delay(core.config(), level)?.as_millis() as u64;
    let keep = |name: &[u8]| set.iter().all(|(n, _)| *n != name);
    let dead_letter = stamp::rebuilt(record, now as i64, &set, keep);
    let retry = stamp::stamped(record, now, Destination { due_ms, topic: &retry.topic, queue: retry.queue }, &set);
    Ok(Copy { id: record.message_id, times, level, due_ms, retry, dead_letter })
}
