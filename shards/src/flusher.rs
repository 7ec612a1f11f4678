//! The shard's one flusher: takes every round appended since the last flush,
//! writes them (one I/O per round, all submitted together), issues one
//! fdatasync per segment touched, then publishes the bytes to readers and
//! acknowledges every waiter. While a flush is in flight the next round fills.
//!
//! Back of the envelope (DESIGN.md figures): one fdatasync costs 0.1-5 ms, so
//! a single writer gets ~1,000-5,000 durable appends/s; with N concurrent
//! writers each flush carries ~N batches, so throughput grows with N until the
//! disk's ~200-240 MiB/s write+sync bandwidth is the limit. CPU per round is
//! one memcpy of the batches (into the round) plus one into the cache.

use crate::config::FlushPolicy;
use crate::error::StorageError;
use crate::join::join_all;
use crate::round::Round;
use crate::segment::Segment;
use crate::shard::Inner;
use crate::stats::add;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// Flushes until the shard closes or fails.
pub(crate) async fn run(inner: Rc<Inner>) {
    let mut flusher =
        Flusher { inner, unsynced: Vec::new(), unsynced_bytes: 0, unsynced_records: 0, last_sync: Instant::now() };
    while flusher.step().await {}
}

struct Flusher {
    inner: Rc<Inner>,
    /// Segments written since the last fdatasync.
    unsynced: Vec<Rc<Segment>>,
    unsynced_bytes: usize,
    unsynced_records: u64,
    last_sync: Instant,
}

impl Flusher {
    /// One flush, or one wait for work; false when the flusher should stop.
    async fn step(&mut self) -> bool {
        let inner = self.inner.clone();
        let has_work = {
            let st = inner.state.borrow();
            if st.failed.is_some() {
                return false;
            }
            st.log.open.is_some() || !st.log.sealed.is_empty()
        };
        if !has_work {
            if inner.closed.get() {
                return self.unsynced_bytes > 0 && self.sync_and_publish(Vec::new()).await;
            }
            if self.unsynced_bytes == 0 {
                inner.flush_needed.wait().await;
            } else {
                let due = inner.config.async_flush_interval.saturating_sub(self.last_sync.elapsed());
                if !inner.flush_needed.wait_for(due.max(Duration::from_micros(100))).await {
                    return self.sync_and_publish(Vec::new()).await;
                }
            }
            return true;
        }
        if !inner.config.flush_delay.is_zero() && self.open_round_is_small() {
            glommio::timer::sleep(inner.config.flush_delay).await;
        }
        let rounds = {
            let mut st = inner.state.borrow_mut();
            st.log.seal_open();
            st.log.sealed.drain(..).collect::<Vec<_>>()
        };
        // A lone sync round with nothing else unsynced is written durable in one I/O.
        let dsync = rounds.len() == 1 && rounds[0].needs_sync && self.unsynced.is_empty();
        if let Err(e) = self.write(&rounds, dsync).await {
            self.fail(rounds, e);
            return false;
        }
        if dsync {
            self.synced(1, rounds[0].batch_bytes, rounds[0].records);
            self.publish(rounds, true);
            return true;
        }
        let needs_sync = rounds.iter().any(|r| r.needs_sync)
            || self.unsynced_bytes >= inner.config.async_flush_bytes
            || self.last_sync.elapsed() >= inner.config.async_flush_interval;
        if needs_sync {
            return self.sync_and_publish(rounds).await;
        }
        self.publish(rounds, false);
        true
    }

    fn open_round_is_small(&self) -> bool {
        let st = self.inner.state.borrow();
        st.log.sealed.is_empty()
            && st.log.open.as_ref().is_some_and(|r| r.batch_bytes < self.inner.config.round_bytes_max / 2)
    }

    /// Writes every round, all submitted before any is awaited; `dsync` writes
    /// through the O_DSYNC descriptor, durable on completion.
    async fn write(&mut self, rounds: &[Round], dsync: bool) -> Result<(), StorageError> {
        let inner = &*self.inner;
        let writes = rounds.iter().map(|r| async move {
            inner.probes.write().map_err(|e| StorageError::io("writing", &r.segment.path, e))?;
            if dsync {
                inner.probes.sync().map_err(|e| StorageError::io("syncing", &r.segment.path, e))?;
            }
            let file = if dsync { &r.segment.dsync } else { &r.segment.file };
            file.write_rc_at(r.buf.clone(), r.file_position())
                .await
                .map_err(|e| StorageError::io("writing", &r.segment.path, e))
        });
        for result in join_all(writes.collect()).await {
            add(&self.inner.counters.write_bytes, result? as u64);
        }
        if dsync {
            return Ok(());
        }
        for r in rounds {
            if !self.unsynced.iter().any(|s| Rc::ptr_eq(s, &r.segment)) {
                self.unsynced.push(r.segment.clone());
            }
            self.unsynced_bytes += r.batch_bytes;
            self.unsynced_records += r.records;
        }
        Ok(())
    }

    /// fdatasyncs every segment written since the last sync, then publishes.
    async fn sync_and_publish(&mut self, rounds: Vec<Round>) -> bool {
        let segments = std::mem::take(&mut self.unsynced);
        let inner = &*self.inner;
        let syncs = segments.iter().map(|s| async move {
            inner.probes.sync().map_err(|e| StorageError::io("syncing", &s.path, e))?;
            s.file.fdatasync().await.map_err(|e| StorageError::io("syncing", &s.path, e))
        });
        let results = join_all(syncs.collect()).await;
        if let Some(Err(e)) = results.into_iter().find(|r| r.is_err()) {
            self.fail(rounds, e);
            return false;
        }
        self.synced(segments.len() as u64, self.unsynced_bytes, self.unsynced_records);
        self.unsynced_bytes = 0;
        self.unsynced_records = 0;
        self.publish(rounds, true);
        true
    }

    /// Counts `fsyncs` durability barriers that made `bytes` and `records` durable.
    fn synced(&mut self, fsyncs: u64, bytes: usize, records: u64) {
        let c = &self.inner.counters;
        add(&c.fsyncs, fsyncs);
        add(&c.synced_bytes, bytes as u64);
        add(&c.synced_records, records);
        self.last_sync = Instant::now();
    }

    /// Makes written rounds readable, fills the cache, acknowledges waiters.
    fn publish(&mut self, rounds: Vec<Round>, synced: bool) {
        let inner = &self.inner;
        let mut st = inner.state.borrow_mut();
        let st = &mut *st;
        for round in &rounds {
            st.log.written_end = round.end;
            st.log.pending_bytes -= round.batch_bytes;
            crate::reader::cache_write_through(&mut st.cache, round.start, round.new_bytes());
        }
        if synced {
            st.log.synced_end = st.log.written_end;
        }
        let written_end = st.log.written_end;
        st.cache.pin(Some(written_end / st.cache.chunk_bytes() as u64));
        for round in &rounds {
            for q in &round.touched {
                let queue = st.queues.get_mut(q).expect("queues are never removed while appended to");
                // Sync-policy data becomes readable only once durable.
                let readable_end =
                    if synced || queue.policy == FlushPolicy::Async { written_end } else { st.log.synced_end };
                if queue.publish(readable_end) {
                    queue.arrivals.notify();
                }
            }
            round.done.complete(Ok(()));
        }
        add(&inner.counters.rounds, rounds.len() as u64);
        if st.index_mem_entries > inner.config.index_mem_entries_max {
            inner.checkpoint_needed.notify();
        }
        inner.space_freed.notify();
    }

    /// Marks the shard failed and fails every waiting append: after a failed
    /// write or fdatasync the page state is unknown (fsyncgate), so only a
    /// restart, which recovers from what is durable, may append again.
    fn fail(&mut self, rounds: Vec<Round>, error: StorageError) {
        tracing::error!(%error, "shard flush failed; refusing writes until restart");
        let reason = error.to_string();
        let mut st = self.inner.state.borrow_mut();
        st.failed = Some(reason.clone());
        st.log.seal_open();
        let stranded: Vec<Round> = st.log.sealed.drain(..).collect();
        drop(st);
        for round in rounds.iter().chain(stranded.iter()) {
            round.done.complete(Err(StorageError::Failed(reason.clone())));
        }
        self.inner.space_freed.notify();
        self.inner.flush_needed.notify();
    }
}
