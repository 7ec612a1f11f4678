//! The shard's flusher: takes every round appended since the last take and
//! writes it durably, then publishes the bytes to readers and acknowledges
//! every waiter.
//!
//! Rounds of sync-policy queues are written through the O_DSYNC descriptor,
//! durable when the write completes, and up to `flush_depth` such writes are
//! in flight at once: the appends that arrive during a write go out in the
//! next one at once instead of waiting for it. Writes may complete in any
//! order; they are published in log order, so readers and acks never see a
//! hole. Two writes in flight never share a page: a round that may be
//! followed by one written while it is in flight is padded to its page end
//! (Log::seal_open). Async-policy rounds are written one take at a time and
//! synced by interval or size.
//!
//! Back of the envelope: one durable write costs 0.1-5 ms, so a single writer
//! gets ~1,000-10,000 durable appends/s; with N concurrent writers each write
//! carries ~N batches, so throughput grows with N until the disk's
//! write+sync bandwidth is the limit (docs/perf-log.md has this VM's). CPU per round is
//! one memcpy of the batches (into the round) plus one into the cache.

use crate::error::StorageError;
use crate::log::completion_yield;
use crate::log::round::Round;
use crate::log::segment::Segment;
use crate::position::LogPos;
use crate::probe::stats::add;
use crate::read::cache::ChunkCache;
use crate::shard::Inner;
use crate::signal::{Completion, Signal};
use futures_util::future::join_all;
use std::cell::Cell;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// A round of at least this many batch bytes means appends are arriving
/// faster than one write at a time serves them: it is padded to its page end
/// so that the next round can be written while it is in flight. Smaller
/// rounds are not padded (padding would waste most of a page per round).
const PIPELINE_MIN_BYTES: usize = 16 << 10;

/// Flushes until the shard closes or fails.
pub(crate) async fn run(inner: Rc<Inner>) {
    let published = Rc::new(Completion::default());
    published.complete(Ok(()));
    let mut flusher = Flusher {
        inner,
        unsynced: Vec::new(),
        unsynced_bytes: 0,
        unsynced_records: 0,
        last_sync: Rc::new(Cell::new(Instant::now())),
        in_flight: Rc::new(Cell::new(0)),
        writing: Rc::new(Writing::default()),
        newest: published,
        tail_shared: false,
        started: Rc::new(Signal::default()),
        finished: Rc::new(Signal::default()),
    };
    let writes = completion_yield::Writes {
        in_flight: flusher.in_flight.clone(),
        started: flusher.started.clone(),
        finished: flusher.finished.clone(),
    };
    let _yielder = completion_yield::start(flusher.inner.clone(), writes);
    while flusher.step().await {}
    flusher.wait_idle().await;
}

struct Flusher {
    inner: Rc<Inner>,
    /// Segments written since the last fdatasync (async-policy rounds).
    unsynced: Vec<Rc<Segment>>,
    unsynced_bytes: usize,
    unsynced_records: u64,
    last_sync: Rc<Cell<Instant>>,
    /// Durable writes in flight (until published).
    in_flight: Rc<Cell<usize>>,
    /// Durable writes at the disk (until completed).
    writing: Rc<Writing>,
    /// Completes once the newest durable write is published (or failed).
    newest: Rc<Completion>,
    /// The newest write ends mid-page: the next round rewrites that page, so
    /// it waits until that write is done.
    tail_shared: bool,
    /// A durable write started.
    started: Rc<Signal>,
    /// A durable write finished (published or failed).
    finished: Rc<Signal>,
}

impl Flusher {
    /// One take of rounds, or one wait for work or for a free slot; false
    /// when the flusher should stop.
    async fn step(&mut self) -> bool {
        let inner = self.inner.clone();
        let has_work = {
            let st = inner.state.borrow();
            if st.failed().is_some() {
                return false;
            }
            st.log.has_rounds()
        };
        if !has_work {
            return self.idle().await;
        }
        let in_flight = self.in_flight.get();
        if in_flight > 0 && (self.tail_shared || in_flight >= inner.config.flush_depth) {
            // A finishing write notifies.
            inner.flush_needed.wait().await;
            return true;
        }
        if !inner.config.flush_delay.is_zero() && self.open_round_is_small() {
            glommio::timer::sleep(inner.config.flush_delay).await;
        }
        let rounds = {
            let mut st = inner.state.borrow_mut();
            let busy = in_flight > 0 || st.log.open_round_bytes().is_some_and(|b| b >= PIPELINE_MIN_BYTES);
            st.log.take_rounds(inner.config.flush_depth > 1 && busy)
        };
        inner.taken.notify();
        if rounds.iter().all(|r| r.needs_sync) && self.unsynced.is_empty() {
            self.tail_shared = rounds.last().is_some_and(|r| !r.end.on_page());
            self.spawn_durable_write(rounds);
            return true;
        }
        // Async-policy rounds, or unsynced bytes to sync: after every durable
        // write in flight, one take at a time.
        self.wait_idle().await;
        if inner.state.borrow().failed().is_some() {
            fail(&inner, rounds, StorageError::Failed("an earlier write failed".into()));
            return false;
        }
        if let Err(e) = write_rounds(&inner, &rounds, false).await {
            fail(&inner, rounds, e);
            return false;
        }
        self.note_unsynced(&rounds);
        let needs_sync = rounds.iter().any(|r| r.needs_sync)
            || self.unsynced_bytes >= inner.config.async_flush_bytes
            || self.last_sync.get().elapsed() >= inner.config.async_flush_interval;
        if needs_sync {
            return self.sync_and_publish(rounds).await;
        }
        publish(&inner, rounds, false);
        true
    }

    /// Nothing to take: syncs async-policy bytes when due, or waits for appends.
    async fn idle(&mut self) -> bool {
        let inner = self.inner.clone();
        if inner.is_closed() {
            self.wait_idle().await;
            return self.unsynced_bytes > 0 && self.sync_and_publish(Vec::new()).await;
        }
        if self.unsynced_bytes == 0 {
            inner.flush_needed.wait().await;
        } else {
            let due = inner.config.async_flush_interval.saturating_sub(self.last_sync.get().elapsed());
            if !inner.flush_needed.wait_for(due.max(Duration::from_micros(100))).await {
                return self.sync_and_publish(Vec::new()).await;
            }
        }
        true
    }

    fn open_round_is_small(&self) -> bool {
        let st = self.inner.state.borrow();
        st.log.only_open_round_bytes().is_some_and(|b| b < self.inner.config.round_bytes_max / 2)
    }

    /// Writes `rounds` through the O_DSYNC descriptor on a task of its own;
    /// it publishes them once every earlier write is published.
    fn spawn_durable_write(&mut self, rounds: Vec<Round>) {
        let previous = std::mem::replace(&mut self.newest, Rc::new(Completion::default()));
        let published = self.newest.clone();
        let (inner, in_flight, last_sync) = (self.inner.clone(), self.in_flight.clone(), self.last_sync.clone());
        let (writing, finished) = (self.writing.clone(), self.finished.clone());
        if in_flight.get() > 0 {
            add(&inner.counters.overlapped_writes, 1);
        }
        in_flight.set(in_flight.get() + 1);
        self.started.notify();
        glommio::spawn_local(async move {
            let mut rounds = rounds;
            let started = writing.start();
            let write = write_rounds(&inner, &rounds, true);
            let (written, cached) = futures_lite::future::zip(write, cache_while_written(&inner, &rounds)).await;
            let took = started.elapsed();
            writing.end(&inner);
            rounds.iter_mut().for_each(|r| r.cached = cached);
            let _ = previous.wait().await;
            let failed = inner.state.borrow().failed().map(str::to_string);
            let outcome = match (written, failed) {
                (Err(e), _) => Err(fail(&inner, rounds, e)),
                (Ok(()), Some(reason)) => Err(fail(&inner, rounds, StorageError::Failed(reason))),
                (Ok(()), None) => {
                    let bytes = rounds.iter().map(|r| r.batch_bytes).sum();
                    let records = rounds.iter().map(|r| r.records).sum();
                    synced(&inner, &last_sync, rounds.len() as u64, bytes, records, took);
                    publish(&inner, rounds, true);
                    Ok(())
                }
            };
            published.complete(outcome);
            in_flight.set(in_flight.get() - 1);
            finished.notify();
            inner.flush_needed.notify();
        })
        .detach();
    }

    /// Waits until every durable write in flight is published or failed.
    async fn wait_idle(&self) {
        let _ = self.newest.clone().wait().await;
    }

    fn note_unsynced(&mut self, rounds: &[Round]) {
        for r in rounds {
            if !self.unsynced.iter().any(|s| Rc::ptr_eq(s, &r.segment)) {
                self.unsynced.push(r.segment.clone());
            }
            self.unsynced_bytes += r.batch_bytes;
            self.unsynced_records += r.records;
        }
    }

    /// fdatasyncs every segment written since the last sync, then publishes.
    async fn sync_and_publish(&mut self, rounds: Vec<Round>) -> bool {
        let segments = std::mem::take(&mut self.unsynced);
        let inner = &*self.inner;
        let syncs = segments.iter().map(|s| async move {
            inner.probes.sync().map_err(|e| StorageError::io("syncing", &s.path, e))?;
            s.file.fdatasync().await.map_err(|e| StorageError::io("syncing", &s.path, e))
        });
        let started = Instant::now();
        let results = join_all(syncs).await;
        let took = started.elapsed();
        if let Some(Err(e)) = results.into_iter().find(|r| r.is_err()) {
            fail(inner, rounds, e);
            return false;
        }
        synced(inner, &self.last_sync, segments.len() as u64, self.unsynced_bytes, self.unsynced_records, took);
        self.unsynced_bytes = 0;
        self.unsynced_records = 0;
        publish(inner, rounds, true);
        true
    }
}

/// The durable writes at the disk, timed as one busy period while any is.
#[derive(Default)]
struct Writing {
    count: Cell<usize>,
    busy_since: Cell<Option<Instant>>,
}

impl Writing {
    /// A write starts; returns when.
    fn start(&self) -> Instant {
        let now = Instant::now();
        if self.count.get() == 0 {
            self.busy_since.set(Some(now));
        }
        self.count.set(self.count.get() + 1);
        now
    }

    /// A write completed: the last one ends the busy period.
    fn end(&self, inner: &Inner) {
        assert!(self.count.get() > 0, "a write ends after it starts");
        self.count.set(self.count.get() - 1);
        if self.count.get() == 0 {
            let since = self.busy_since.take().expect("set by the first write");
            add(&inner.counters.write_busy_us, since.elapsed().as_micros() as u64);
        }
    }
}

/// Copies `rounds` into the log cache while their write is at the disk,
/// instead of after it, between the write's completion and the acks (~70 KiB
/// at 64 appends a round: a few us of the disk's idle time between rounds);
/// true if it did. A timer fires only after the executor has submitted the
/// write. The cache is filled in log order, so only the oldest unpublished
/// rounds are copied early; later ones are copied as they are published.
async fn cache_while_written(inner: &Inner, rounds: &[Round]) -> bool {
    glommio::timer::sleep(Duration::from_micros(1)).await;
    let mut st = inner.state.borrow_mut();
    let st = &mut *st;
    if rounds.first().is_none_or(|r| r.start != st.log.written_end()) {
        return false;
    }
    for round in rounds {
        crate::read::reader::cache_write_through(&mut st.cache, round.start, round.new_bytes());
    }
    true
}

/// True if `round` was copied into the cache while written and its last
/// chunk is still there. That chunk becomes the write frontier's, which must
/// stay cached (later rounds update it in place, and readers never load it
/// from disk); before this publish it was not pinned, so a reader's miss may
/// have evicted it. Then the round is copied again.
fn still_cached(cache: &ChunkCache<u64>, round: &Round) -> bool {
    round.cached && (round.is_empty() || cache.contains(LogPos(round.data_end.0 - 1).chunk(cache.chunk_bytes() as u64)))
}

/// Writes every round, all submitted before any is awaited; `dsync` writes
/// through the O_DSYNC descriptor, durable on completion.
async fn write_rounds(inner: &Inner, rounds: &[Round], dsync: bool) -> Result<(), StorageError> {
    rounds.iter().for_each(Round::assert_framed);
    let writes = rounds.iter().map(|r| async move {
        inner.probes.while_held().await;
        inner.probes.write().map_err(|e| StorageError::io("writing", &r.segment.path, e))?;
        if dsync {
            inner.probes.sync().map_err(|e| StorageError::io("syncing", &r.segment.path, e))?;
        }
        let file = if dsync { &r.segment.dsync } else { &r.segment.file };
        file.write_rc_at(r.buf.clone(), r.file_position())
            .await
            .map_err(|e| StorageError::io("writing", &r.segment.path, e))
    });
    for result in join_all(writes).await {
        add(&inner.counters.write_bytes, result? as u64);
    }
    Ok(())
}

/// Counts `fsyncs` durability barriers that made `bytes` and `records`
/// durable in `took` (one barrier as the histograms see it: they ran at once).
fn synced(inner: &Inner, last_sync: &Cell<Instant>, fsyncs: u64, bytes: usize, records: u64, took: Duration) {
    let c = &inner.counters;
    add(&c.fsyncs, fsyncs);
    add(&c.synced_bytes, bytes as u64);
    add(&c.synced_records, records);
    inner.histograms.sync_seconds.observe_duration(took);
    inner.histograms.sync_records.observe(records as f64);
    last_sync.set(Instant::now());
}

/// Makes written rounds readable, fills the cache, acknowledges waiters,
/// then wakes the readers parked on the queues. The appends' waiters wake
/// first: their acks let producers send the next round, while a fetch reply
/// is the bigger send (at 175k msgs/s, 14 alternating runs: e2e p99 median
/// 2.87 -> 2.27 ms, publish p50 lower in most pairs).
fn publish(inner: &Inner, rounds: Vec<Round>, synced: bool) {
    let mut st = inner.state.borrow_mut();
    let st = &mut *st;
    for round in &rounds {
        st.log.written(round);
        if !still_cached(&st.cache, round) {
            crate::read::reader::cache_write_through(&mut st.cache, round.start, round.new_bytes());
        }
    }
    if synced {
        st.log.synced();
    }
    let written_end = st.log.written_end();
    st.cache.pin(Some(written_end.chunk(st.cache.chunk_bytes() as u64)));
    let mut arrived = Vec::new(); // queues with new readable bytes
    for round in &rounds {
        for q in &round.touched {
            // A queue deleted while its appends were in flight has nothing to publish.
            let Some(readable_end) = st.readable_end(*q, written_end, synced) else { continue };
            if st.queues.get_mut(q).expect("readable_end found it").publish(readable_end) {
                arrived.push(*q);
            }
        }
        round.done.complete(Ok(()));
    }
    for q in arrived {
        st.queues.get_mut(&q).expect("just published").arrivals().notify();
    }
    add(&inner.counters.rounds, rounds.len() as u64);
    if st.index_mem_entries() > inner.config.index_mem_entries_max {
        inner.checkpoint_needed.notify();
    }
    inner.space_freed.notify();
    inner.published.notify();
}

/// Marks the shard failed and fails every waiting append: after a failed
/// write or fdatasync the page state is unknown (fsyncgate), so only a
/// restart, which recovers from what is durable, may append again. Returns
/// the reason.
fn fail(inner: &Inner, rounds: Vec<Round>, error: StorageError) -> StorageError {
    let mut st = inner.state.borrow_mut();
    if st.failed().is_none() {
        tracing::error!(%error, "shard flush failed; refusing writes until restart");
    }
    let reason = st.fail(error.to_string());
    let stranded = st.log.strand();
    drop(st);
    for round in rounds.iter().chain(stranded.iter()) {
        round.done.complete(Err(StorageError::Failed(reason.clone())));
    }
    inner.space_freed.notify();
    inner.published.notify();
    inner.taken.notify();
    inner.flush_needed.notify();
    StorageError::Failed(reason)
}
