//! A compacted part imported whole: the compacted records of a queue that
//! moves here from another broker group, where compaction left gaps in its
//! offsets that the log's dense index cannot hold. The copied batches
//! (in clear, ascending, below the part's end) are written as the queue's
//! next part generation, with their lookup entries, sealed when the shard
//! has data keys; once durable the part is the queue's, and a queue that
//! held no offset yet begins its log at the part's end.

use super::clean::CleanWriter;
use crate::batch::{self, verify_stored};
use crate::error::{Result, StorageError};
use crate::position::{Offset, QueueId};
use crate::shard::{Inner, State};
use std::rc::Rc;

/// A part being imported; `finish` makes it the queue's.
pub struct PartImport<'a> {
    inner: &'a Inner,
    queue: QueueId,
    writer: CleanWriter,
    /// The offset past the last batch pushed.
    next: u64,
}

impl Inner {
    /// Starts importing a compacted part of `queue` (created if this shard
    /// lacks it: storage ids are never reused).
    pub(crate) async fn import_part(&self, queue: QueueId) -> Result<PartImport<'_>> {
        if !self.state.borrow().queues.contains_key(&queue) {
            self.create_queues(&[(queue, None)]).await?;
        }
        let (dir, generation) = {
            let st = self.state.borrow();
            let q = st.queues.get(&queue).ok_or(StorageError::UnknownQueue(queue.0))?;
            (q.dir().to_path_buf(), st.compacted.get(&queue).map_or(0, |p| p.generation()) + 1)
        };
        let writer = CleanWriter::create(&dir, generation).await?;
        Ok(PartImport { inner: self, queue, writer, next: 0 })
    }
}

impl PartImport<'_> {
    /// Adds copied batches (in clear, as a read returns them), which must
    /// follow the ones pushed before.
    pub async fn push(&mut self, batches: &[u8]) -> Result<()> {
        let mut scratch = Vec::new();
        for stored in batch::split(batches) {
            let header = verify_stored(stored).map_err(|detail| self.refused(detail.to_string()))?;
            if header.is_padding() {
                continue;
            }
            if header.base_offset < self.next {
                let m = format!("a batch at offset {} follows one that ended at {}", header.base_offset, self.next);
                return Err(self.refused(m));
            }
            for (i, record) in batch::records(stored, &mut scratch)?.enumerate() {
                let record = record?;
                let at = header.base_offset + i as u64;
                self.writer.note_lookup(at, record.key.unwrap_or_default(), &record.message_id);
            }
            let mut out = self.inner.sealed(stored.to_vec());
            batch::stamp(&mut out, header.base_offset, self.queue.0);
            self.writer.push(&out, Offset(header.base_offset), header.record_count).await?;
            self.next = header.next_offset();
        }
        Ok(())
    }

    /// Makes the part durable and the queue's: readers see offsets from
    /// `start`, the part holds them below `end`, and the log's share of the
    /// queue begins at `end` (where it begins if it held no offset yet).
    pub async fn finish(self, start: u64, end: u64) -> Result<()> {
        if let Err(detail) = self.fits(start, end) {
            let error = self.refused(detail);
            self.writer.abandon().await;
            return Err(error);
        }
        let store = self.writer.finish(Offset(start), Offset(end)).await?;
        let old = {
            let mut st = self.inner.state.borrow_mut();
            let State { queues, compacted, .. } = &mut *st;
            let q = queues.get_mut(&self.queue).ok_or(StorageError::UnknownQueue(self.queue.0))?;
            // Checked by `fits`, and nothing appends between: a queue that held no offset begins at `end`.
            let filled = q.line_up(Offset(end)).unwrap_or(0);
            q.move_start(Offset(end));
            let old = compacted.insert(self.queue, Rc::new(store)).map(|old| old.path().to_path_buf());
            st.index_entries_added(filled);
            old
        };
        crate::fs::remove_files("removing an old compacted part", old.into_iter().collect()).await
    }

    /// Why a part of [start, end) cannot be the queue's, if it cannot.
    fn fits(&self, start: u64, end: u64) -> std::result::Result<(), String> {
        if self.next > end || start > end {
            return Err(format!("the part ends at {end}, its batches at {}, its start is {start}", self.next));
        }
        let st = self.inner.state.borrow();
        let q = st.queues.get(&self.queue).ok_or_else(|| "the queue was deleted".to_string())?;
        let empty = q.next() == Offset(0) && q.mem_len() == 0;
        if !empty && q.start() < Offset(end) {
            return Err(format!("the queue's log holds offsets from {} below the part's end {end}", q.start()));
        }
        Ok(())
    }

    /// Drops the unfinished part.
    pub async fn abandon(self) {
        self.writer.abandon().await;
    }

    fn refused(&self, detail: String) -> StorageError {
        StorageError::Corruption {
            what: "imported compacted part",
            position: 0,
            detail: format!("queue {}: {detail}", self.queue),
        }
    }
}
