//! A sealed segment read into a tiered object (`object.rs`), a part at a
//! time: the batches the owner wants (of the queues it tiers, from the
//! offset each is uploaded to), as stored, with their records' lookup
//! entries (read in clear: a sealed batch is opened for them, and uploaded
//! sealed).

use super::object::{Closing, ObjectBuilder, ObjectPart};
use crate::batch;
use crate::error::{Result, StorageError};
use crate::position::{LogPos, QueueId};
use crate::read::reader::ReadWait;
use crate::replica::shipped_batches;
use crate::shard::Inner;
use std::ops::Range;

/// Log bytes read per step (a buffer under the allocator's mmap threshold).
const READ_BYTES: usize = 64 << 10;
/// Bytes of batches made ready between yields to the shard's other tasks.
const YIELD_BYTES: usize = 64 << 10;

/// What the next step of an export gives.
pub enum ExportStep {
    /// A part of the object (more follow).
    Part(ObjectPart),
    /// The rest of the object, its footer to make (`Closing::finish`);
    /// empty if the segment held none of the queues.
    Done(Closing),
}

/// The export of one sealed segment, read in steps.
pub struct SegmentExport<'a> {
    inner: &'a Inner,
    wanted: &'a dyn Fn(QueueId, Range<u64>) -> bool,
    next: u64,
    end: u64,
    builder: Option<ObjectBuilder>,
}

impl Inner {
    pub(crate) fn export_segment<'a>(
        &'a self,
        base: u64,
        wanted: &'a dyn Fn(QueueId, Range<u64>) -> bool,
    ) -> Result<SegmentExport<'a>> {
        let st = self.state.borrow();
        let sealed = st.log.segment_bases();
        let refused = |why: &str| StorageError::Busy(format!("segment {base} cannot be exported: {why}"));
        if !sealed.contains(&LogPos(base)) || sealed.last() == Some(&LogPos(base)) {
            return Err(refused("it is not a sealed segment of this shard (the last one is still written)"));
        }
        let end = base + self.config.segment_bytes;
        Ok(SegmentExport { inner: self, wanted, next: base, end, builder: Some(ObjectBuilder::new()) })
    }
}

impl SegmentExport<'_> {
    /// Reads on until the next part is cut or the segment ends.
    pub async fn step(&mut self) -> Result<ExportStep> {
        let keyring = self.inner.config.keyring.clone();
        let builder = self.builder.as_mut().expect("no step after Done");
        // Counted across reads: a read from the cache completes without
        // yielding, and a read's batches alone stay under YIELD_BYTES, so a
        // count per read held the shard for a whole part (milliseconds).
        let mut since_yield = 0;
        while self.next < self.end {
            let range = self.inner.read_range(LogPos(self.next), READ_BYTES, ReadWait::No).await?;
            if range.next <= self.next {
                break;
            }
            let mut at = range.from;
            let mut cut = None;
            for shipped in shipped_batches(&range.bytes) {
                // The shard's other work runs in between: leaving the task
                // queue (a plain yield stays in it) lets the executor poll
                // the rings, so requests that arrived meanwhile are served.
                if since_yield >= YIELD_BYTES {
                    glommio::executor().yield_task_queue_now().await;
                    since_yield = 0;
                }
                let (header, stored) = shipped.map_err(|detail| StorageError::Corruption {
                    what: "segment export",
                    position: at,
                    detail: detail.to_string(),
                })?;
                let position = at;
                at += u64::from(header.length);
                since_yield += stored.len();
                if header.is_padding()
                    || !(self.wanted)(QueueId(header.queue), header.base_offset..header.next_offset())
                {
                    continue;
                }
                let clear = crate::crypt::in_clear(keyring.as_deref(), stored, position)?;
                let lookups = lookups_of(&clear, header.base_offset)?;
                if let Some(part) = builder.push(stored, batch::newest_timestamp(&clear)?, lookups)? {
                    cut = Some(part);
                    break;
                }
            }
            self.next = at;
            if let Some(part) = cut {
                return Ok(ExportStep::Part(part));
            }
        }
        Ok(ExportStep::Done(self.builder.take().expect("no step after Done").close()))
    }
}

/// The lookup entries (hash, offset) of a batch in clear: each record's
/// key, and its message id unless it has none.
fn lookups_of(clear: &[u8], base: u64) -> Result<Vec<(u64, u64)>> {
    let mut scratch = Vec::new();
    let mut out = Vec::new();
    for (i, record) in batch::records(clear, &mut scratch)?.enumerate() {
        let record = record?;
        let offset = base + i as u64;
        out.push((crate::lookup::key_hash(record.key.unwrap_or_default()), offset));
        if record.message_id != [0; 16] {
            out.push((crate::lookup::id_hash(&record.message_id), offset));
        }
    }
    Ok(out)
}
