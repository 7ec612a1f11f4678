//! Retention: deletes whole old segments, by age and by the log's total size,
//! and the index files that only covered them. Queue start offsets move past
//! the deleted data and are checkpointed before any file is deleted, so a
//! crash in between never leaves an index pointing into a missing segment.

use crate::error::{Result, StorageError};
use crate::fs;
use crate::position::{LogPos, Offset, QueueId};
use crate::probe::stats::add;
use crate::shard::Inner;
use std::rc::Rc;
use std::time::SystemTime;

impl Inner {
    /// Deletes the segments retention allows; returns how many.
    pub(crate) async fn apply_retention(&self) -> Result<usize> {
        let cfg = &self.config;
        if cfg.retention_age.is_none() && cfg.retention_bytes.is_none() {
            return Ok(0);
        }
        let covered = self.checkpoint().await?;
        let doomed = self.doomed_segments(covered).await?;
        let Some(&(last_base, _)) = doomed.last() else { return Ok(0) };
        let new_log_start = last_base + cfg.segment_bytes;
        let queues: Vec<QueueId> = self.state.borrow().queues.keys().copied().collect();
        for queue in queues {
            let start = self.first_offset_at_or_after(queue, new_log_start).await?;
            if let Some(q) = self.state.borrow_mut().queues.get_mut(&queue) {
                q.move_start(start);
            }
        }
        self.checkpoint().await?;
        self.delete(&doomed, new_log_start).await?;
        Ok(doomed.len())
    }

    /// The oldest segments, wholly below `covered` and the retention floor,
    /// that age or size retention dooms; never the active segment.
    async fn doomed_segments(&self, covered: LogPos) -> Result<Vec<(LogPos, std::path::PathBuf)>> {
        let cfg = &self.config;
        let (mut total, candidates) = {
            let st = self.state.borrow();
            let keep = covered.min(self.retention_floor());
            (st.log.segments_bytes(), st.log.sealed_segments_before(keep))
        };
        let mut doomed = Vec::new();
        for (base, path) in candidates {
            let too_big = cfg.retention_bytes.is_some_and(|max| total > max);
            let too_old = match cfg.retention_age {
                Some(age) => {
                    let modified = fs::blocking("reading the age of", &path, |p| std::fs::metadata(p)?.modified());
                    SystemTime::now().duration_since(modified.await?).unwrap_or_default() >= age
                }
                None => false,
            };
            if !too_big && !too_old {
                break;
            }
            total -= cfg.segment_bytes;
            doomed.push((base, path));
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

    async fn delete(&self, doomed: &[(LogPos, std::path::PathBuf)], new_log_start: LogPos) -> Result<()> {
        let file_entries = self.config.index_file_entries;
        let chunk_bytes = self.config.cache_chunk_bytes as u64;
        let mut dead_index_files = Vec::new();
        let dead_chunks = {
            let mut st = self.state.borrow_mut();
            for (base, _) in doomed {
                st.log.remove_segment(*base);
            }
            st.cache.remove_where(|chunk| chunk * chunk_bytes < new_log_start.0);
            for q in st.queues.values_mut() {
                dead_index_files.extend(q.remove_files_below_start(file_entries));
            }
            st.lookup.remove_below(new_log_start)
        };
        let index_files = dead_index_files.len();
        fs::remove_big_files("deleting old segment", doomed.iter().map(|(_, p)| p.clone()).collect()).await?;
        fs::remove_files("deleting old index file", dead_index_files).await?;
        fs::remove_files("deleting old lookup chunk", dead_chunks).await?;
        fs::sync_dir(&self.config.dir).await?;
        add(&self.counters.segments_deleted, doomed.len() as u64);
        tracing::info!(
            segments = doomed.len(),
            index_files,
            new_log_start = new_log_start.0,
            "retention deleted old data"
        );
        Ok(())
    }
}

/// Runs retention on its interval until the shard closes.
pub(crate) async fn run(inner: Rc<Inner>) {
    while !inner.is_closed() {
        glommio::timer::sleep(inner.config.retention_interval).await;
        if let Err(error) = inner.apply_retention().await {
            tracing::warn!(%error, "retention pass failed; will retry");
        }
    }
}
