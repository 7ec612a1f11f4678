//! A queue moving into this broker group, on the target leader's shard
//! that stores it: copied from the source group's leader (QueueCopy, from
//! the batch holding the source's start, every batch at its own offsets),
//! then, once caught up, frozen at the source; copied to the frozen end,
//! committed in this group, and switched (both steps compare-and-swaps in
//! etcd, asked of the control plane). A new leader of either group resumes
//! where the copy stands: the copy is in this group's log, the move in etcd.

use super::link::{Answer, Link};
use super::ReplicaError;
use crate::protocol::messages::{QueueCopied, QueueCopy, QueueRef};
use crate::protocol::{ApiKey, ErrorCode, Reader, Writer};
use crate::server::core::metadata::{Home, Metadata, QueueSlot};
use crate::server::core::metrics::{Probe, Samples};
use crate::server::core::pace::Pace;
use crate::server::core::part_imports::{self, PartImportLog};
use crate::server::core::placement::{copy_step, CopyStep, MoveStep, Place};
use crate::server::core::tasks::Death;
use crate::server::core::{Core, Failure};
use ringmq_shards::batch::{self, BatchHeader};
use ringmq_shards::QueueId;
use std::cell::{Cell, RefCell};
use std::collections::HashSet;
use std::rc::Rc;
use std::time::Duration;

/// How often the shard looks for queues arriving on it.
const LOOK_EVERY: Duration = Duration::from_millis(200);
/// How long the source parks a copy at the queue's end.
const COPY_WAIT: Duration = Duration::from_millis(500);
/// How long once the freeze is asked: the source applies it within milliseconds.
const FROZEN_WAIT: Duration = Duration::from_millis(20);
/// Bytes asked for per copy.
const COPY_BYTES: u32 = 1 << 20;
/// A connect or a copy that takes longer than this (past the park) fails.
const IO_TIMEOUT: Duration = Duration::from_secs(5);
/// Pause before trying again after a failure, doubled after each failure in a row up to `RETRY_PAUSE_MAX`.
const RETRY_PAUSE: Duration = Duration::from_millis(200);
const RETRY_PAUSE_MAX: Duration = Duration::from_secs(10);

/// One queue arriving on this shard.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Arrival {
    topic: String,
    queue: u32,
    /// The topic's creation (its etcd revision): a topic made again is another.
    created: i64,
    slot: QueueSlot,
    from: Place,
    to: Place,
}

impl Arrival {
    /// Still arriving as it was when it started (not switched, cancelled or deleted).
    fn stands(&self, metadata: &Metadata) -> bool {
        arrivals(metadata, &self.to).contains(self)
    }
}

/// The queues arriving at `here` (this group's shard) in `metadata`.
fn arrivals(metadata: &Metadata, here: &Place) -> Vec<Arrival> {
    let mut found = Vec::new();
    for (name, topic) in &metadata.topics {
        for (queue, home) in topic.queues.iter().enumerate() {
            let Home::Arriving { slot, from } = home else { continue };
            if slot.shard == here.shard {
                let (topic_name, created, queue, from) = (name.clone(), topic.created, queue as u32, from.clone());
                found.push(Arrival { topic: topic_name, queue, created, slot: *slot, from, to: here.clone() });
            }
        }
    }
    found
}

/// What the moves into this shard did, for the metrics.
#[derive(Default)]
struct MoveStats {
    copying: Cell<u64>,
    copied_bytes: Cell<u64>,
    switched: Cell<u64>,
    /// From the last switched move's freeze to its switch.
    last_frozen: Cell<Duration>,
}

impl Probe for MoveStats {
    fn collect(&self, out: &mut Samples) {
        let help = "Queues moving into this shard from another broker group, being copied now.";
        out.gauge("ringmq_queue_moves_copying", help, &[], self.copying.get() as f64);
        let help = "Bytes of stored batches copied into this shard by queue moves.";
        out.counter("ringmq_queue_move_copied_bytes", help, &[], self.copied_bytes.get());
        let help = "Queues moved into this shard (switched to this broker group).";
        out.counter("ringmq_queue_moves_switched", help, &[], self.switched.get());
        let help =
            "From the freeze to the switch of the last queue moved in: at most how long its appends were refused.";
        out.gauge("ringmq_queue_move_last_frozen_seconds", help, &[], self.last_frozen.get().as_secs_f64());
    }
}

/// A leader's shard: starts a copy for each queue arriving on it, until the node stops.
pub async fn run(core: Rc<Core>) {
    let stats = Rc::new(MoveStats::default());
    core.probes().register(&(stats.clone() as Rc<dyn Probe>));
    let group = core.config().cluster.as_ref().expect("a leader").broker_group.clone();
    let here = Place { broker_group: group, shard: core.id() as u32 };
    let running: Rc<RefCell<HashSet<u32>>> = Rc::default();
    let mut seen: Option<Rc<Metadata>> = None;
    loop {
        let metadata = core.metadata();
        if !seen.as_ref().is_some_and(|s| Rc::ptr_eq(s, &metadata)) {
            for arrival in arrivals(&metadata, &here) {
                if !running.borrow_mut().insert(arrival.slot.storage_id) {
                    continue;
                }
                let (copier, running, stats) = (core.clone(), running.clone(), stats.clone());
                core.tasks().spawn("queue move", Death::Done, async move {
                    let id = arrival.slot.storage_id;
                    stats.copying.set(stats.copying.get() + 1);
                    copy(&copier, arrival, &stats).await;
                    stats.copying.set(stats.copying.get() - 1);
                    running.borrow_mut().remove(&id);
                });
            }
            seen = Some(metadata);
        }
        if !core.tasks().sleep(LOOK_EVERY).await {
            return;
        }
    }
}

/// Copies one arriving queue until it switched (or stopped arriving, or the node stops).
async fn copy(core: &Core, arrival: Arrival, stats: &MoveStats) {
    tracing::info!(topic = arrival.topic, queue = arrival.queue, from = ?arrival.from, "copying a queue moving here");
    let mut failures = 0u32;
    loop {
        if !arrival.stands(&core.metadata()) {
            return;
        }
        match copy_until_failure(core, &arrival, stats).await {
            Ok(()) => return trim_imports(core).await,
            Err(error) => {
                // The first failure, then one in ten (a source away for long, a copy it refuses).
                if failures.is_multiple_of(10) {
                    let (topic, queue) = (&arrival.topic, arrival.queue);
                    tracing::warn!(topic, queue, failures, %error, "copying a moving queue failed; retrying");
                }
                failures += 1;
            }
        }
        let pause = RETRY_PAUSE.saturating_mul(1 << failures.min(6)).min(RETRY_PAUSE_MAX);
        if !core.tasks().sleep(pause).await {
            return;
        }
    }
}

/// Gives back what copied compacted parts hold in the log once the group
/// built them (see core/part_imports.rs).
async fn trim_imports(core: &Core) {
    if let Err(failure) = part_imports::trim_done(core).await {
        tracing::warn!(shard = core.id(), %failure, "copied compacted parts were not trimmed from the log; the next move trims them");
    }
}

/// Why a move's copy stopped (logged; it starts again after a pause).
#[derive(Debug, thiserror::Error)]
enum CopyError {
    #[error("broker group {0:?} has no leader now")]
    NoSource(String),
    #[error(transparent)]
    Link(#[from] ReplicaError),
    #[error("the source refused: {0:?}: {1}")]
    Refused(ErrorCode, String),
    #[error("{}", .0.1)]
    Here(Failure),
}

impl From<Failure> for CopyError {
    fn from(f: Failure) -> Self {
        CopyError::Here(f)
    }
}

/// The client address of the source's shard, as the cluster view has it now.
fn source_addr(core: &Core, from: &Place) -> Result<std::net::SocketAddr, CopyError> {
    let link = core.placement().expect("cluster mode");
    let view = link.view.borrow();
    let addr = view.global(from).and_then(|i| view.shard_addrs().get(i as usize).cloned()).unwrap_or_default();
    addr.parse().map_err(|_| CopyError::NoSource(from.broker_group.clone()))
}

/// Copies, freezes and switches; Ok once switched or no longer arriving.
async fn copy_until_failure(core: &Core, arrival: &Arrival, stats: &MoveStats) -> Result<(), CopyError> {
    let addr = source_addr(core, &arrival.from)?;
    tracing::debug!(topic = arrival.topic, queue = arrival.queue, %addr, "copying from the source's shard");
    let config = core.config();
    let mut link = Link::connect(addr, config.tls.as_ref(), IO_TIMEOUT, config.frame_bytes_max).await?;
    let queue = QueueId(arrival.slot.storage_id);
    let mut progress = Progress { froze: false, thawing: false, frozen_since: std::time::Instant::now() };
    let mut pace = Pace::new(config.move_bytes_per_sec);
    if core.storage().next_offset(queue).map_err(Failure::from)? == 0 {
        import_part(core, &mut link, arrival, &mut pace, stats).await?;
    }
    loop {
        if core.tasks().unless_stopping(pace.wait()).await.is_none() || !arrival.stands(&core.metadata()) {
            return Ok(());
        }
        let next = core.storage().next_offset(queue).map_err(Failure::from)?;
        let wait = if progress.froze { FROZEN_WAIT } else { COPY_WAIT };
        let Some(answer) = core.tasks().unless_stopping(ask(&mut link, arrival, next, wait)).await else {
            return Ok(());
        };
        let answer = answer?;
        let copied = copied(&answer, &mut pace, stats)?;
        let next = append(core, queue, next, &copied).await?;
        if progress.step(core, arrival, next, &copied, stats).await? {
            return Ok(());
        }
    }
}

/// The answer to a QueueCopy, counted against the pace and in the stats.
fn copied<'a>(answer: &'a Answer, pace: &mut Pace, stats: &MoveStats) -> Result<QueueCopied<'a>, CopyError> {
    let response = answer.response()?;
    if response.error != ErrorCode::None {
        return Err(CopyError::Refused(response.error, response.message.to_string()));
    }
    let copied = QueueCopied::decode(&mut Reader::new(response.body)).map_err(ReplicaError::Answer)?;
    pace.took(copied.fetched.batches.len());
    stats.copied_bytes.set(stats.copied_bytes.get() + copied.fetched.batches.len() as u64);
    Ok(copied)
}

/// Copies the source's compacted part, if it holds any offset, as this
/// shard's part of the queue (core/part_imports.rs): the log's copy goes
/// on from its end. The source compacts the queue no more while it is
/// copied, so the part's end is final once the copy reached it.
async fn import_part(
    core: &Core,
    link: &mut Link,
    arrival: &Arrival,
    pace: &mut Pace,
    stats: &MoveStats,
) -> Result<(), CopyError> {
    let queue = QueueId(arrival.slot.storage_id);
    let mut import: Option<PartImportLog<'_>> = None;
    let (mut next, mut start) = (0, 0);
    loop {
        if core.tasks().unless_stopping(pace.wait()).await.is_none() || !arrival.stands(&core.metadata()) {
            return Ok(());
        }
        let Some(answer) = core.tasks().unless_stopping(ask(link, arrival, next, COPY_WAIT)).await else {
            return Ok(());
        };
        let answer = answer?;
        let copied = copied(&answer, pace, stats)?;
        let end = copied.compacted_end;
        start = start.max(copied.fetched.start);
        let log = match &import {
            Some(log) => log,
            // Nothing readable below the part's end: the log's copy does it all.
            None if end <= start => return Ok(()),
            None => import.insert(PartImportLog::begin(core, queue).await.map_err(Failure::from)?),
        };
        let (part, read_to) = part_batches(copied.fetched.batches, next, end);
        log.chunk(part).await.map_err(Failure::from)?;
        next = read_to.max(copied.fetched.next_offset.min(end));
        if next >= end {
            let log = import.take().expect("begun above");
            log.end(start.min(end), end).await?;
            core.record_queue_starts().await.map_err(Failure::from)?;
            tracing::info!(
                topic = arrival.topic,
                queue = arrival.queue,
                start,
                end,
                "copied a moving queue's compacted part"
            );
            return Ok(());
        }
    }
}

/// The stored batches of `bytes` past `next` and below `end` (contiguous:
/// a read returns whole batches in order), and the offset past the last.
fn part_batches(bytes: &[u8], next: u64, end: u64) -> (&[u8], u64) {
    let (mut from, mut to, mut read_to) = (None, 0, next);
    let mut at = 0;
    for b in batch::split(bytes) {
        let Some(header) = BatchHeader::decode(b) else { break };
        if header.next_offset() > next && header.base_offset < end && !header.is_padding() {
            from.get_or_insert(at);
            to = at + b.len();
            read_to = header.next_offset();
        }
        at += b.len();
    }
    (from.map_or(&[][..], |from| &bytes[from..to]), read_to)
}

/// One QueueCopy of the source from `next`, parked up to `wait` at its end.
async fn ask(link: &mut Link, arrival: &Arrival, next: u64, wait: Duration) -> Result<Answer, ReplicaError> {
    let ask = QueueCopy {
        queue: QueueRef { topic: arrival.topic.clone(), queue: arrival.queue },
        offset: next,
        max_bytes: COPY_BYTES,
        max_wait_ms: wait.as_millis() as u32,
    };
    let mut w = Writer::default();
    ask.encode(&mut w);
    link.call(ApiKey::QueueCopy, &w.buf, wait + IO_TIMEOUT).await
}

/// Where a copy stands between reads.
struct Progress {
    /// The freeze was asked (and not thawed since).
    froze: bool,
    /// A thaw was asked and the source is still frozen.
    thawing: bool,
    /// When the freeze was asked.
    frozen_since: std::time::Instant,
}

impl Progress {
    /// Takes the step `copy_step` says, the copy being at `next` after
    /// `copied`; true once switched.
    async fn step(
        &mut self,
        core: &Core,
        arrival: &Arrival,
        next: u64,
        copied: &QueueCopied<'_>,
        stats: &MoveStats,
    ) -> Result<bool, CopyError> {
        let placement = core.placement().expect("cluster mode");
        let (topic, created, to) = (&arrival.topic, arrival.created, arrival.to.clone());
        let open_txn = copied.last_stable < copied.fetched.end;
        if copied.frozen_end.is_none() {
            self.thawing = false;
        }
        match copy_step(next, copied.fetched.end, copied.frozen_end, open_txn, self.froze) {
            CopyStep::Read => Ok(false),
            CopyStep::Thaw if self.thawing => Ok(false),
            step @ (CopyStep::Freeze | CopyStep::Thaw) => {
                let (step, freeze) = match step {
                    CopyStep::Freeze => (MoveStep::Freeze, true),
                    _ => (MoveStep::Thaw, false),
                };
                placement.move_step(step, topic, created, arrival.queue, to).await?;
                tracing::info!(topic, queue = arrival.queue, step = step.name(), next, "a moving queue's step taken");
                (self.froze, self.thawing, self.frozen_since) = (freeze, !freeze, std::time::Instant::now());
                Ok(false)
            }
            CopyStep::Switch => {
                // Whole: committed in this group, then ours.
                core.replicated_all().await?;
                placement.move_step(MoveStep::Switch, topic, created, arrival.queue, to).await?;
                let frozen = self.frozen_since.elapsed();
                stats.switched.set(stats.switched.get() + 1);
                stats.last_frozen.set(frozen);
                let (queue, frozen_ms) = (arrival.queue, frozen.as_secs_f64() * 1e3);
                tracing::info!(topic, queue, end = next, frozen_ms, "a moved queue switched to this broker group");
                Ok(true)
            }
        }
    }
}

/// Appends the batches of `copied` past `next` at their own offsets (the
/// first of an empty queue sets its start); the queue's next offset after them.
async fn append(core: &Core, queue: QueueId, mut next: u64, copied: &QueueCopied<'_>) -> Result<u64, Failure> {
    let storage = core.storage();
    // A queue's next offset is 0 only until its first batch.
    let first = next == 0;
    let fetched = &copied.fetched;
    if first && fetched.batches.is_empty() && fetched.start == fetched.end && fetched.end > 0 {
        // The source holds no record, its offsets at `end`: so does the copy.
        storage.begin_at(queue, fetched.end)?;
        core.record_queue_starts().await?;
        return Ok(fetched.end);
    }
    for b in batch::split(copied.fetched.batches) {
        let Some(header) = BatchHeader::decode(b) else { break };
        if header.is_padding() || header.base_offset + u64::from(header.record_count) <= next {
            continue;
        }
        core.txn_marks().note_copied(storage, queue, b).await?;
        let appended = storage.append_copied(queue, b).await?;
        next = appended.base_offset + u64::from(appended.record_count);
    }
    if first && next > 0 && copied.fetched.start > storage.offsets(queue)?.0 {
        // The source's start lies inside its first batch: so does the copy's.
        storage.trim(queue, copied.fetched.start)?;
        core.record_queue_starts().await?;
    }
    Ok(next)
}
