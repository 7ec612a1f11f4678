//! Checkpoints bound recovery time: the index entries of every batch before a
//! log position are written and synced, then a small file records that
//! position and each queue's offsets there. Recovery scans the log only from
//! the checkpointed position.
//!
//! File layout (little-endian, padded to a page): u32 magic, u32 version,
//! u64 log position, u32 queue count, per queue (u32 id, u64 start, u64 next;
//! a compacted queue's start is that of its compacted part),
//! then a CRC32 of all the bytes before it.

use crate::error::{Result, StorageError};
use crate::fs;
use crate::index::queue_index::{self as index, ENTRIES_PER_PAGE, ENTRY_BYTES};
use crate::position::{LogPos, Offset, QueueId, PAGE_BYTES};
use crate::probe::stats::add;
use crate::shard::Inner;
use std::path::Path;
use std::time::Duration;

const MAGIC: u32 = 0x4b43_4d52; // "RMCK"
const VERSION: u32 = 1;
/// File name of the checkpoint inside a shard directory.
pub const CHECKPOINT_FILE: &str = "checkpoint";

/// What a checkpoint records.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Checkpoint {
    /// Every batch before this log position is indexed durably.
    pub position: LogPos,
    /// (queue, start offset, next offset at `position`).
    pub queues: Vec<(QueueId, Offset, Offset)>,
}

impl Checkpoint {
    fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(24 + self.queues.len() * 20);
        b.extend_from_slice(&MAGIC.to_le_bytes());
        b.extend_from_slice(&VERSION.to_le_bytes());
        b.extend_from_slice(&self.position.0.to_le_bytes());
        b.extend_from_slice(&(self.queues.len() as u32).to_le_bytes());
        for (q, start, next) in &self.queues {
            b.extend_from_slice(&q.0.to_le_bytes());
            b.extend_from_slice(&start.0.to_le_bytes());
            b.extend_from_slice(&next.0.to_le_bytes());
        }
        let crc = crc32fast::hash(&b);
        b.extend_from_slice(&crc.to_le_bytes());
        b
    }

    fn decode(b: &[u8]) -> Option<Checkpoint> {
        use crate::batch::{u32_at, u64_at};
        if b.len() < 24 || u32_at(b, 0) != MAGIC || u32_at(b, 4) != VERSION {
            return None;
        }
        let count = u32_at(b, 16) as usize;
        let end = 20 + count.checked_mul(20)?;
        if b.len() < end + 4 || crc32fast::hash(&b[..end]) != u32_at(b, end) {
            return None;
        }
        let queues = (0..count)
            .map(|i| {
                let at = 20 + i * 20;
                (QueueId(u32_at(b, at)), Offset(u64_at(b, at + 4)), Offset(u64_at(b, at + 12)))
            })
            .collect();
        Some(Checkpoint { position: LogPos(u64_at(b, 8)), queues })
    }

    /// Replaces the shard's checkpoint file atomically.
    pub async fn store(&self, dir: &Path) -> Result<()> {
        fs::write_atomic(dir, CHECKPOINT_FILE, &self.encode()).await
    }

    /// Loads the shard's checkpoint; None if there is none yet.
    pub async fn load(dir: &Path) -> Result<Option<Checkpoint>> {
        let path = dir.join(CHECKPOINT_FILE);
        match fs::read_small(&path).await? {
            None => Ok(None),
            Some(bytes) => Checkpoint::decode(&bytes).map(Some).ok_or_else(|| StorageError::Corruption {
                what: "checkpoint file",
                position: 0,
                detail: format!(
                    "{} fails its magic, version or CRC check; it is only replaced by rename, so this is disk damage",
                    path.display()
                ),
            }),
        }
    }
}

/// Pause between steps of a lookup chunk build (~0.2 ms each), so the build
/// takes at most about a tenth of the shard's CPU while it runs: with only
/// a turn of the executor between steps, its 24 ms for 1M entries came in
/// 45 ms and queued appends behind it. A timer, not a yield: a yield would
/// run the next step before the reactor polls for waiting completions.
const BUILD_PAUSE: Duration = Duration::from_millis(2);

impl Inner {
    /// Writes out and syncs the index up to the durable log end, then records
    /// the checkpoint; returns the log position it covers. One runs at a time.
    pub(crate) async fn checkpoint(&self) -> Result<LogPos> {
        let _one_at_a_time = self.checkpoint_lock.acquire_permit(1).await;
        let (position, plan) = {
            let st = self.state.borrow();
            let position = st.log.synced_end();
            // A compacted queue's start is its part's: recovery moves the log's past the part.
            let plan: Vec<(QueueId, Offset, Offset, Offset)> =
                st.queues.values().map(|q| (q.id(), st.start_of(q), q.disk_next(), q.next_before(position))).collect();
            (position, plan)
        };
        for &(queue, _, from, upto) in &plan {
            self.write_index(queue, from, upto).await?;
        }
        let builder = self.state.borrow().lookup.chunk_builder(position);
        let mut chunk = None;
        if let Some(mut builder) = builder {
            while !builder.step() {
                glommio::timer::sleep(BUILD_PAUSE).await;
            }
            chunk = Some(builder.write().await?);
        }
        let checkpoint =
            Checkpoint { position, queues: plan.iter().map(|&(q, start, _, upto)| (q, start, upto)).collect() };
        checkpoint.store(&self.config.dir).await?;
        let mut st = self.state.borrow_mut();
        let st = &mut *st;
        if let Some(chunk) = chunk {
            st.lookup.chunk_written(chunk);
        }
        for &(queue, _, _, upto) in &plan {
            if let Some(q) = st.queues.get_mut(&queue) {
                q.written_to_disk(upto);
                let dropped = q.trim_memory();
                st.index_entries_dropped(dropped);
            }
        }
        add(&self.counters.checkpoints, 1);
        Ok(position)
    }

    /// Writes and syncs the index pages holding entries [from, upto) of
    /// `queue`, in background-sized writes, one fdatasync per file.
    async fn write_index(&self, queue: QueueId, from: Offset, upto: Offset) -> Result<()> {
        if from >= upto {
            return Ok(());
        }
        let file_entries = self.config.index_file_entries;
        let slice_pages = (fs::BACKGROUND_WRITE_BYTES as u64 / PAGE_BYTES).max(1);
        let mut page = from.0 / ENTRIES_PER_PAGE;
        let last_page = upto.0.div_ceil(ENTRIES_PER_PAGE);
        while page < last_page {
            let file_base = Offset(page * ENTRIES_PER_PAGE).round_down(file_entries);
            let file_end_page = last_page.min((file_base + file_entries).0 / ENTRIES_PER_PAGE);
            let (file, dir) = self.index_file(queue, file_base).await?;
            let path = index::file_path(&dir, file_base);
            while page < file_end_page {
                let pages = slice_pages.min(file_end_page - page);
                let mut buf = file.alloc_dma_buffer((pages * PAGE_BYTES) as usize);
                {
                    let st = self.state.borrow();
                    let q = st.queues.get(&queue).ok_or(StorageError::UnknownQueue(queue.0))?;
                    q.encode_pages(page, pages, upto, buf.as_bytes_mut());
                }
                let at = (Offset(page * ENTRIES_PER_PAGE) - file_base) * ENTRY_BYTES as u64;
                file.write_at(buf, at).await.map_err(|e| StorageError::io("writing index", &path, e))?;
                page += pages;
            }
            file.fdatasync().await.map_err(|e| StorageError::io("syncing index", &path, e))?;
            // No index-cache invalidation: only pages at or past mem_base are
            // rewritten, and those are always served from memory.
        }
        Ok(())
    }
}

/// Checkpoints on the interval, or sooner when the in-memory index grows past
/// its bound, until the shard closes.
pub(crate) async fn run(inner: std::rc::Rc<Inner>) {
    loop {
        inner.checkpoint_needed.wait_for(inner.config.checkpoint_interval).await;
        if inner.is_closed() || inner.state.borrow().failed().is_some() {
            return;
        }
        if let Err(error) = inner.checkpoint().await {
            tracing::warn!(%error, "checkpoint failed; recovery will scan further back until one succeeds");
            if error.is_no_space() {
                inner.on_no_space(&error).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checkpoint_round_trips_and_rejects_damage() {
        let queues = vec![(QueueId(1), Offset(0), Offset(10)), (QueueId(7), Offset(3), Offset(99))];
        let c = Checkpoint { position: LogPos(12345), queues };
        let mut bytes = c.encode();
        assert_eq!(Checkpoint::decode(&bytes), Some(c));
        bytes[9] ^= 1;
        assert_eq!(Checkpoint::decode(&bytes), None);
    }
}
