//! Delay levels of one shard (RocketMQ's 18: 1s 5s 10s 30s 1m 2m ... 2h by
//! default). A record to deliver later is appended, durably, to its level's
//! internal storage queue with its due time and destination in headers;
//! within a level every record waits the same delay, so append order is due
//! order and each level needs one cursor, not a timer per message. One task
//! per level delivers what fell due (at once after a restart for whatever
//! fell due while the broker was down) and commits its cursor; a crash
//! between delivery and commit delivers that record again (at least once).

use crate::server::core::config::ServerConfig;
use crate::server::core::offsets::Committed;
use crate::server::core::tasks::Death;
use crate::server::core::{Core, Failure};
use crate::server::internal::queues::{self, delay_level, DELAY_LEVELS};
use crate::server::internal::stamp::{destination, Handover};
use ringmq_shards::batch::{self, BatchHeader};
use ringmq_shards::record::Record;
use ringmq_shards::{FlushPolicy, QueueId, ReadWait, StorageError};
use std::rc::Rc;
use std::time::Duration;

/// Where the cursors are committed (as a consumer group of its own).
const CURSOR_GROUP: &str = "%schedule";
/// How long a level's read parks at its end before it looks again.
const POLL: Duration = Duration::from_secs(1);

/// The delay of `level` (1..=DELAY_LEVELS) as the broker is configured.
pub fn level_delay(config: &ServerConfig, level: u32) -> Result<Duration, Failure> {
    let known = (1..=DELAY_LEVELS).contains(&level).then(|| config.delay_levels.get(level as usize - 1)).flatten();
    known.copied().ok_or_else(|| Failure::invalid(format!("delay level {level} is outside 1..={DELAY_LEVELS}")))
}

/// Every level's storage queue and cursor (every record below it was
/// delivered): what the levels need kept from retention.
pub fn cursors(core: &Core) -> Vec<(QueueId, u64)> {
    (1..=DELAY_LEVELS).map(|l| (delay_level(l), core.committed_offset(CURSOR_GROUP, "", l).unwrap_or(0))).collect()
}

/// Messages waiting in each level (1..=DELAY_LEVELS): stored past its cursor.
pub fn pending(core: &Core) -> Vec<(u32, u64)> {
    let cursors = cursors(core);
    let ends =
        cursors.iter().map(|(q, cursor)| core.storage().offsets(*q).map_or(0, |(_, end)| end.saturating_sub(*cursor)));
    (1..=DELAY_LEVELS).zip(ends).collect()
}

/// Creates the level queues the shard lacks.
pub async fn open(core: &Core) -> Result<(), StorageError> {
    let levels: Vec<_> = (1..=DELAY_LEVELS).map(|l| (delay_level(l), FlushPolicy::Sync)).collect();
    queues::ensure(core.storage(), &levels).await
}

/// Starts one delivery task per level (once the shard serves).
pub fn start(core: &Rc<Core>) {
    for level in 1..=DELAY_LEVELS {
        core.tasks().spawn("delay level", Death::Fatal, deliver_loop(core.clone(), level));
    }
}

async fn deliver_loop(core: Rc<Core>, level: u32) {
    let q = delay_level(level);
    let start = core.storage().offsets(q).map_or(0, |(s, _)| s);
    let mut next = core.committed_offset(CURSOR_GROUP, "", level).unwrap_or(start).max(start);
    loop {
        let read = core.storage().read(q, next, 64 << 10, ReadWait::Upto(POLL));
        let read = match core.tasks().unless_stopping(read).await {
            None => return,
            Some(Ok(read)) => read,
            Some(Err(error)) => {
                tracing::error!(shard = core.id(), level, %error, "reading a delay level failed");
                if !core.tasks().sleep(POLL).await {
                    return;
                }
                continue;
            }
        };
        for b in batch::split(&read.bytes) {
            let Some(h) = BatchHeader::decode(b).filter(|h| !h.is_padding()) else { continue };
            let mut inflated = Vec::new();
            let Ok(records) = batch::records(b, &mut inflated) else { continue };
            for (k, record) in records.enumerate() {
                let offset = h.base_offset + k as u64;
                let Ok(record) = record else { break };
                if offset < next {
                    continue;
                }
                if !deliver(&core, &record).await {
                    return;
                }
                next = offset + 1;
                if let Err(error) = core.commit_offset(CURSOR_GROUP, "", level, Committed::at(next)).await {
                    tracing::error!(level, %error, "committing a delay level's cursor failed");
                }
            }
        }
    }
}

/// Waits until the record is due, then hands it over; false if the shard
/// stopped first.
async fn deliver(core: &Core, record: &Record<'_>) -> bool {
    let due = destination(record).due_ms;
    loop {
        let now = core.clock().now_ms();
        if now >= due {
            break;
        }
        // Short naps: a manual clock may jump forward at any moment.
        if !core.tasks().sleep(Duration::from_millis((due - now).min(10))).await {
            return false;
        }
    }
    let h = Handover::of(record, core.clock().now_ms());
    core.append_until_stored(&h.to, &h.batch).await;
    true
}
