//! Retention: retires whole old segments, by age, by the log's total size,
//! and those below what the owner released (no queue of its reads them),
//! and deletes the index files that only covered them. A retired segment
//! file goes into the pool of spares (renamed, see `log::pool`) while it has
//! room, and is deleted otherwise. Queue start offsets move past the retired
//! data and are checkpointed before any file is renamed or deleted, so a
//! crash in between never leaves an index pointing into a missing segment.

use crate::error::{Result, StorageError};
use crate::fs;
use crate::log::pool;
use crate::log::segment::Segment;
use crate::position::{LogPos, Offset, QueueId};
use crate::probe::stats::add;
use crate::shard::Inner;
use std::rc::Rc;
use std::time::{Instant, SystemTime};

impl Inner {
    /// Retires the segments retention allows; returns how many.
    pub(crate) async fn apply_retention(&self) -> Result<usize> {
        let cfg = &self.config;
        if cfg.retention_age.is_none() && cfg.retention_bytes.is_none() && self.released() == LogPos(0) {
            return Ok(0);
        }
        let covered = self.checkpoint().await?;
        let doomed = self.doomed_segments(covered).await?;
        let Some(last) = doomed.last() else { return Ok(0) };
        let new_log_start = last.base + cfg.segment_bytes;
        let queues: Vec<QueueId> = self.state.borrow().queues.keys().copied().collect();
        for queue in queues {
            let start = self.first_offset_at_or_after(queue, new_log_start).await?;
            if let Some(q) = self.state.borrow_mut().queues.get_mut(&queue) {
                q.move_start(start);
            }
        }
        self.checkpoint().await?;
        self.retire(&doomed, new_log_start).await?;
        Ok(doomed.len())
    }

    /// The oldest segments, wholly below `covered` and the retention floor,
    /// that age or size retention dooms, or that lie wholly below what the
    /// owner released; never the active segment.
    async fn doomed_segments(&self, covered: LogPos) -> Result<Vec<Rc<Segment>>> {
        let cfg = &self.config;
        let (mut total, candidates) = {
            let st = self.state.borrow();
            let keep = covered.min(self.retention_floor());
            (st.log.segments_bytes(), st.log.sealed_segments_before(keep))
        };
        let mut doomed = Vec::new();
        for segment in candidates {
            let too_big = self.over_size_bound(total);
            let too_old = match cfg.retention_age {
                Some(age) => {
                    let modified =
                        fs::blocking("reading the age of", &segment.path, |p| std::fs::metadata(p)?.modified());
                    SystemTime::now().duration_since(modified.await?).unwrap_or_default() >= age
                }
                None => false,
            };
            let released = segment.base + cfg.segment_bytes <= self.released();
            if !too_big && !too_old && !released {
                break;
            }
            total -= cfg.segment_bytes;
            doomed.push(segment);
        }
        Ok(doomed)
    }

    /// First offset of `queue` whose batch lies at or after `log_start`
    /// (binary search: positions grow with offsets).
    async fn first_offset_at_or_after(&self, queue: QueueId, log_start: LogPos) -> Result<Offset> {
        let (mut lo, mut hi) = {
            let st = self.state.borrow();
            let q = st.queues.get(&queue).ok_or(StorageError::UnknownQueue(queue.0))?;
            (q.start(), q.visible())
        };
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.entry(queue, mid).await?.position < log_start {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        Ok(lo)
    }

    /// Forgets the doomed segments and what only they held, pools as many
    /// of their files as the pool takes and deletes the rest.
    async fn retire(&self, doomed: &[Rc<Segment>], new_log_start: LogPos) -> Result<()> {
        let file_entries = self.config.index_file_entries;
        let chunk_bytes = self.config.cache_chunk_bytes as u64;
        let mut dead_index_files = Vec::new();
        let (dead_chunks, room) = {
            let mut st = self.state.borrow_mut();
            for segment in doomed {
                st.log.remove_segment(segment.base);
            }
            st.cache.remove_where(|chunk| chunk * chunk_bytes < new_log_start.0);
            for q in st.queues.values_mut() {
                dead_index_files.extend(q.remove_files_below_start(file_entries));
            }
            (st.lookup.remove_below(new_log_start), st.pool.room())
        };
        let index_files = dead_index_files.len();
        let (to_pool, to_delete) = doomed.split_at(room.min(doomed.len()));
        let mut deleted: Vec<std::path::PathBuf> = to_delete.iter().map(|s| s.path.clone()).collect();
        for segment in to_pool {
            let pooled = pool::rename_retired(&self.config.dir, segment).await?;
            // Another pass may have filled the pool meanwhile.
            if let Err(extra) = self.state.borrow_mut().pool.put(pooled) {
                deleted.push(extra.path);
            }
        }
        let (pooled, deleted_count) = (doomed.len() - deleted.len(), deleted.len());
        fs::remove_big_files("deleting old segment", deleted).await?;
        fs::remove_files("deleting old index file", dead_index_files).await?;
        fs::remove_files("deleting old lookup chunk", dead_chunks).await?;
        fs::sync_dir(&self.config.dir).await?;
        add(&self.counters.segments_deleted, deleted_count as u64);
        add(&self.counters.segments_pooled, pooled as u64);
        tracing::info!(
            pooled,
            deleted = deleted_count,
            index_files,
            new_log_start = new_log_start.0,
            "retention retired old data"
        );
        Ok(())
    }
}

/// Runs retention on its interval until the shard closes, and, with a size
/// bound, also at each rollover that leaves the log over it: a log that
/// rolls over faster than the interval then retires one segment per
/// rollover, and the pool hands it back as the next spare.
pub(crate) async fn run(inner: Rc<Inner>) {
    let mut due = Instant::now() + inner.config.retention_interval;
    while !inner.is_closed() {
        let rolled = inner.spare_needed.wait();
        let released = inner.released_moved.wait();
        let left = due.saturating_duration_since(Instant::now());
        let timer = glommio::timer::sleep(left);
        match inner.config.retention_bytes {
            Some(_) => futures_lite::future::or(rolled, futures_lite::future::or(released, timer)).await,
            None => futures_lite::future::or(released, timer).await,
        }
        let on_time = Instant::now() >= due;
        let (total, releasable) = {
            let st = inner.state.borrow();
            (st.log.segments_bytes(), !st.log.sealed_segments_before(inner.released()).is_empty())
        };
        // The owner's release retires at once what it frees, not at the next interval.
        if !on_time && !releasable && !inner.over_size_bound(total) {
            continue;
        }
        if on_time {
            due = Instant::now() + inner.config.retention_interval;
        }
        if let Err(error) = inner.apply_retention().await {
            tracing::warn!(%error, "retention pass failed; will retry");
        }
    }
}

impl Inner {
    /// True if a log of `total` bytes is larger than the retention size bound.
    fn over_size_bound(&self, total: u64) -> bool {
        self.config.retention_bytes.is_some_and(|max| total > max)
    }
}
