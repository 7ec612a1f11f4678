//! The leader's end: whole stored batches of the log from a position, up to
//! what its flusher took: the written log read through the cache like any
//! read, the rounds still at the disk from their buffers.

use crate::batch::{self, verify_in, verify_stored, BatchHeader, HEADER_BYTES};
use crate::error::{Result, StorageError};
use crate::position::LogPos;
use crate::read::reader::ReadWait;
use crate::shard::Inner;

/// A run of whole stored batches of the log, as a leader ships it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogRange {
    /// Log position of the first batch.
    pub from: u64,
    /// Log position after the last batch (a padding batch counts at its full length).
    pub next: u64,
    /// The batches; a padding batch is its header alone.
    pub bytes: Vec<u8>,
    /// The oldest position the leader still holds.
    pub log_start: u64,
    /// The end of what the leader ships when the range was read: taken for
    /// its own durable write, which may still be at its disk.
    pub shipped_end: u64,
}

/// Splits shipped bytes into (header, batch bytes), checking each batch's
/// header and CRCs; the first bad one ends the iteration with an error.
pub fn shipped_batches(
    mut bytes: &[u8],
) -> impl Iterator<Item = std::result::Result<(BatchHeader, &[u8]), &'static str>> {
    std::iter::from_fn(move || {
        if bytes.is_empty() {
            return None;
        }
        let header = match verify_stored(bytes) {
            Ok(h) => h,
            Err(e) => {
                bytes = &[];
                return Some(Err(e));
            }
        };
        let take = if header.is_padding() { HEADER_BYTES } else { header.length as usize };
        let (batch, rest) = bytes.split_at(take);
        bytes = rest;
        Some(Ok((header, batch)))
    })
}

impl Inner {
    /// Reads whole batches from log position `from` (a batch boundary) up to
    /// about `max_bytes` (at least one batch when one is taken), parking at
    /// the taken end as `wait` says. The bytes past the written end come from
    /// the rounds at the disk: a follower writes them while this shard does.
    pub(crate) async fn read_range(&self, from: LogPos, max_bytes: usize, wait: ReadWait) -> Result<LogRange> {
        let taken_end = self.wait_taken_past(from, wait).await?;
        let log_start = self.state.borrow().log.start();
        // Sized once: growing a range of a megabyte copies it and faults in its pages again.
        let bytes = Vec::with_capacity(((taken_end - from) as usize).min(max_bytes) + HEADER_BYTES);
        let mut range =
            LogRange { from: from.0, next: from.0, bytes, log_start: log_start.0, shipped_end: taken_end.0 };
        while range.next < taken_end.0 {
            let at = range.next;
            let shipped = match self.ship_taken(at, max_bytes, &mut range.bytes)? {
                Some(shipped) => shipped,
                None => self.ship_written(at, max_bytes, &mut range.bytes).await?,
            };
            let Ship::Shipped(header) = shipped else { break };
            range.next = at + u64::from(header.length);
        }
        Ok(range)
    }

    /// Ships the batch at `at` from a taken round not yet written (None when
    /// no such round holds it).
    fn ship_taken(&self, at: u64, max_bytes: usize, out: &mut Vec<u8>) -> Result<Option<Ship>> {
        let st = self.state.borrow();
        let Some((bytes, generation)) = st.log.in_flight().bytes_from(LogPos(at)) else { return Ok(None) };
        let header = BatchHeader::decode(bytes).ok_or_else(|| not_boundary(at, "bad header"))?;
        let shipped = shipped_len(&header);
        if bytes.len() < shipped {
            return Err(not_boundary(at, "the batch runs past its round"));
        }
        if !out.is_empty() && out.len() + shipped > max_bytes {
            return Ok(Some(Ship::Full));
        }
        let start = out.len();
        out.extend_from_slice(&bytes[..shipped]);
        to_wire(&mut out[start..], generation, at)?;
        Ok(Some(Ship::Shipped(header)))
    }

    /// Ships the batch at `at` from the written log (through the cache).
    async fn ship_written(&self, at: u64, max_bytes: usize, out: &mut Vec<u8>) -> Result<Ship> {
        let mut head = Vec::with_capacity(HEADER_BYTES);
        self.read_log(at, HEADER_BYTES, &mut head).await?;
        let header = BatchHeader::decode(&head).ok_or_else(|| not_boundary(at, "bad header"))?;
        let shipped = shipped_len(&header);
        if !out.is_empty() && out.len() + shipped > max_bytes {
            return Ok(Ship::Full);
        }
        let start = out.len();
        if header.is_padding() {
            out.extend_from_slice(&head);
        } else {
            self.read_log(at, shipped, out).await?;
        }
        to_wire(&mut out[start..], self.generation_at(LogPos(at))?, at)?;
        Ok(Ship::Shipped(header))
    }

    /// The taken end once it is past `from` (or at once if the caller does
    /// not wait, or the wait ends first); `from` must be inside the log.
    async fn wait_taken_past(&self, from: LogPos, wait: ReadWait) -> Result<LogPos> {
        let deadline = match wait {
            ReadWait::No => std::time::Instant::now(),
            ReadWait::Upto(d) => std::time::Instant::now() + d,
        };
        loop {
            let (start, taken_end) = {
                let st = self.state.borrow();
                (st.log.start(), st.log.taken_end())
            };
            if from < start || from > taken_end {
                return Err(StorageError::PositionOutOfRange { position: from.0, start: start.0, end: taken_end.0 });
            }
            if from < taken_end || self.is_closed() {
                return Ok(taken_end);
            }
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() || !self.taken.wait_for(left).await {
                return Ok(taken_end);
            }
        }
    }
}

/// What shipping one batch did.
enum Ship {
    /// It was added to the range.
    Shipped(BatchHeader),
    /// The range is full without it.
    Full,
}

/// The bytes a batch ships as: a padding batch is its header alone.
fn shipped_len(header: &BatchHeader) -> usize {
    if header.is_padding() {
        HEADER_BYTES
    } else {
        header.length as usize
    }
}

/// Checks one stored batch and turns it into its wire form: the follower
/// seals it for its own file's life.
fn to_wire(stored: &mut [u8], generation: crate::batch::Generation, at: u64) -> Result<()> {
    verify_in(stored, generation).map_err(|detail| not_boundary(at, detail))?;
    batch::to_wire(stored, generation);
    Ok(())
}

fn not_boundary(at: u64, detail: &str) -> StorageError {
    StorageError::Corruption {
        what: "log range",
        position: at,
        detail: format!("no stored batch starts here ({detail}); a follower asks only from a batch boundary"),
    }
}
