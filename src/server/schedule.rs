//! Delay levels of one shard (RocketMQ's 18: 1s 5s 10s 30s 1m 2m ... 2h by
//! default). A record to deliver later is appended, durably, to its level's
//! internal storage queue with its due time and destination in headers;
//! within a level every record waits the same delay, so append order is due
//! order and each level needs one cursor, not a timer per message. One task
//! per level delivers what fell due (at once after a restart for whatever
//! fell due while the broker was down) and commits its cursor; a crash
//! between delivery and commit delivers that record again (at least once).

use super::config::ServerConfig;
use super::handler::{self, Failure};
use super::offsets::Offsets;
use super::shard_server::ShardCtx;
use crate::protocol::ErrorCode;
use ringmq_shards::batch::{self, BatchBuilder, BatchHeader};
use ringmq_shards::record::{Headers, Record, RecordIter};
use ringmq_shards::{QueueId, ReadWait, Shard, StorageError};
use std::rc::Rc;
use std::time::Duration;

/// Number of delay levels.
pub const LEVELS: u32 = 18;

/// RocketMQ's default delays of levels 1..=18.
pub fn default_delays() -> Vec<Duration> {
    [1, 5, 10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800, 3600, 7200]
        .into_iter()
        .map(Duration::from_secs)
        .collect()
}

/// The delay of `level` (1..=18) as the broker is configured.
pub fn level_delay(config: &ServerConfig, level: u32) -> Result<Duration, Failure> {
    let known = (1..=LEVELS).contains(&level).then(|| config.delay_levels.get(level as usize - 1)).flatten();
    known.copied().ok_or_else(|| Failure(ErrorCode::InvalidRequest, format!("delay level {level} is outside 1..=18")))
}

/// Header names the schedule adds (stripped at delivery).
const DUE: &[u8] = b"%due";
const TOPIC: &[u8] = b"%topic";
const QUEUE: &[u8] = b"%queue";

/// Where the cursors are committed (as a consumer group of its own).
const CURSOR_GROUP: &str = "%schedule";

/// The storage queue of a level (1..=LEVELS), below the offsets queue.
pub fn level_queue(level: u32) -> QueueId {
    QueueId(u32::MAX - 2 - level)
}

/// A level's cursor: every record below it was delivered.
pub fn cursor(offsets: &Offsets, level: u32) -> u64 {
    offsets.get(CURSOR_GROUP, "", level).unwrap_or(0)
}

/// Creates the level queues a shard lacks.
pub async fn open(storage: &Shard) -> Result<(), StorageError> {
    let levels: Vec<_> = (1..=LEVELS).map(|l| (level_queue(l), ringmq_shards::FlushPolicy::Sync)).collect();
    super::internal_queue::ensure(storage, &levels).await
}

/// Where and when a stored record is to be delivered.
pub struct Destination<'a> {
    pub due_ms: u64,
    pub topic: &'a str,
    pub queue: u32,
}

/// One batch holding `record` stamped with its destination, and with the
/// headers named in `set` replaced by those values.
pub fn stamped(record: &Record<'_>, now_ms: u64, to: Destination<'_>, set: &[(&[u8], &[u8])]) -> Vec<u8> {
    stamped_all(std::slice::from_ref(record), now_ms, to, set)
}

/// One batch holding every record, each stamped as [`stamped`] does.
pub fn stamped_all(records: &[Record<'_>], now_ms: u64, to: Destination<'_>, set: &[(&[u8], &[u8])]) -> Vec<u8> {
    let (due_bytes, queue_bytes) = (to.due_ms.to_le_bytes(), to.queue.to_le_bytes());
    let mut extra: Vec<(&[u8], &[u8])> = vec![(DUE, &due_bytes), (TOPIC, to.topic.as_bytes()), (QUEUE, &queue_bytes)];
    extra.extend_from_slice(set);
    rebuilt_all(records, now_ms as i64, &extra, |name| set.iter().all(|(n, _)| *n != name))
}

/// The destination a stored record was stamped with.
pub fn destination<'a>(record: &Record<'a>) -> Destination<'a> {
    let header = |name| record.headers.get(name);
    Destination {
        due_ms: header(DUE).and_then(|v| v.try_into().ok()).map_or(0, u64::from_le_bytes),
        topic: header(TOPIC).and_then(|t| std::str::from_utf8(t).ok()).unwrap_or_default(),
        queue: header(QUEUE).and_then(|v| v.try_into().ok()).map_or(0, u32::from_le_bytes),
    }
}

/// A stored record ready to hand over: its destination and the batch
/// without the stamp.
pub struct Handover {
    pub topic: String,
    pub queue: u32,
    pub batch: Vec<u8>,
}

impl Handover {
    pub fn of(record: &Record<'_>, now_ms: u64) -> Handover {
        let to = destination(record);
        let batch = rebuilt(record, now_ms as i64, &[], |name| !name.starts_with(b"%"));
        Handover { topic: to.topic.to_string(), queue: to.queue, batch }
    }

    /// Appends the batch to its destination, retrying until that succeeds.
    pub async fn run(self, ctx: &Rc<ShardCtx>) {
        loop {
            match handler::produce_internal(ctx, &self.topic, self.queue, &self.batch).await {
                Ok(_) => return,
                Err(error) => {
                    let (topic, queue) = (&self.topic, self.queue);
                    tracing::warn!(shard = ctx.id, %topic, queue, %error, "delivering a delayed record failed; retrying");
                    glommio::timer::sleep(Duration::from_millis(200)).await;
                }
            }
        }
    }
}

/// One batch holding `record` with the headers `keep` accepts plus `extra`.
pub fn rebuilt(
    record: &Record<'_>,
    timestamp_ms: i64,
    extra: &[(&[u8], &[u8])],
    keep: impl Fn(&[u8]) -> bool,
) -> Vec<u8> {
    rebuilt_all(std::slice::from_ref(record), timestamp_ms, extra, keep)
}

/// One batch holding every record, each rebuilt as [`rebuilt`] does.
fn rebuilt_all(
    records: &[Record<'_>],
    timestamp_ms: i64,
    extra: &[(&[u8], &[u8])],
    keep: impl Fn(&[u8]) -> bool,
) -> Vec<u8> {
    let mut b = BatchBuilder::new(timestamp_ms);
    let mut header_bytes = Vec::new();
    for record in records {
        let mut pairs: Vec<(&[u8], &[u8])> = record.headers.iter().filter(|(name, _)| keep(name)).collect();
        pairs.extend_from_slice(extra);
        header_bytes.clear();
        Headers::encode(&pairs, &mut header_bytes);
        let headers = Headers::from_encoded(pairs.len() as u16, &header_bytes);
        b.push(&Record { timestamp_delta_ms: 0, headers, ..*record });
    }
    b.finish()
}

/// Starts one delivery task per level.
pub fn spawn(ctx: &Rc<ShardCtx>) -> Vec<glommio::task::JoinHandle<()>> {
    (1..=LEVELS).map(|level| glommio::spawn_local(deliver_loop(ctx.clone(), level)).detach()).collect()
}

async fn deliver_loop(ctx: Rc<ShardCtx>, level: u32) {
    let q = level_queue(level);
    let start = ctx.storage.offsets(q).map_or(0, |(s, _)| s);
    let mut next = ctx.offsets.get(CURSOR_GROUP, "", level).unwrap_or(start).max(start);
    loop {
        let read = match ctx.storage.read(q, next, 64 << 10, ReadWait::Upto(Duration::from_secs(1))).await {
            Ok(read) => read,
            Err(StorageError::Closed) => return,
            Err(error) => {
                tracing::error!(shard = ctx.id, level, %error, "reading a delay level failed");
                glommio::timer::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        for b in batch::split(&read.bytes) {
            let Some(h) = BatchHeader::decode(b).filter(|h| !h.is_padding()) else { continue };
            for (k, record) in RecordIter::new(&b[batch::HEADER_BYTES..]).enumerate() {
                let offset = h.base_offset + k as u64;
                let Ok(record) = record else { break };
                if offset < next {
                    continue;
                }
                deliver(&ctx, &record).await;
                next = offset + 1;
                commit_cursor(&ctx.offsets, &ctx.storage, level, next).await;
            }
        }
    }
}

/// Waits until the record is due, then hands it over.
async fn deliver(ctx: &Rc<ShardCtx>, record: &Record<'_>) {
    let due = destination(record).due_ms;
    loop {
        let now = ctx.clock.now_ms();
        if now >= due {
            break;
        }
        // Short naps: a manual clock may jump forward at any moment.
        glommio::timer::sleep(Duration::from_millis((due - now).min(10))).await;
    }
    Handover::of(record, ctx.clock.now_ms()).run(ctx).await;
}

async fn commit_cursor(offsets: &Offsets, storage: &Shard, level: u32, next: u64) {
    if let Err(error) = offsets.commit(storage, CURSOR_GROUP, "", level, next).await {
        tracing::error!(level, %error, "committing a delay level's cursor failed");
    }
}
