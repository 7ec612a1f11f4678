//! The leader's end: whole stored batches of the log from a position, up to
//! what is written, read through the cache like any read.

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
    /// The leader's written end when the range was read.
    pub written_end: u64,
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
    /// about `max_bytes` (at least one batch when one is written), parking at
    /// the written end as `wait` says.
    pub(crate) async fn read_range(&self, from: LogPos, max_bytes: usize, wait: ReadWait) -> Result<LogRange> {
        let written_end = self.wait_written_past(from, wait).await?;
        let log_start = self.state.borrow().log.start();
        let mut range = LogRange {
            from: from.0,
            next: from.0,
            bytes: Vec::new(),
            log_start: log_start.0,
            written_end: written_end.0,
        };
        let mut head = Vec::with_capacity(HEADER_BYTES);
        while range.next < written_end.0 {
            let at = range.next;
            head.clear();
            self.read_log(at, HEADER_BYTES, &mut head).await?;
            let not_boundary = |detail: &str| StorageError::Corruption {
                what: "log range",
                position: at,
                detail: format!("no stored batch starts here ({detail}); a follower asks only from a batch boundary"),
            };
            let header = BatchHeader::decode(&head).ok_or_else(|| not_boundary("bad header"))?;
            let shipped = if header.is_padding() { HEADER_BYTES } else { header.length as usize };
            if !range.bytes.is_empty() && range.bytes.len() + shipped > max_bytes {
                break;
            }
            let start = range.bytes.len();
            if header.is_padding() {
                range.bytes.extend_from_slice(&head);
            } else {
                self.read_log(at, shipped, &mut range.bytes).await?;
            }
            let generation = self.generation_at(LogPos(at))?;
            verify_in(&range.bytes[start..], generation).map_err(not_boundary)?;
            // Shipped as on the wire: the follower seals it for its own file's life.
            batch::to_wire(&mut range.bytes[start..], generation);
            range.next = at + u64::from(header.length);
        }
        Ok(range)
    }

    /// The written end once it is past `from` (or at once if the caller does
    /// not wait, or the wait ends first); `from` must be inside the log.
    async fn wait_written_past(&self, from: LogPos, wait: ReadWait) -> Result<LogPos> {
        let deadline = match wait {
            ReadWait::No => std::time::Instant::now(),
            ReadWait::Upto(d) => std::time::Instant::now() + d,
        };
        loop {
            let (start, written_end) = {
                let st = self.state.borrow();
                (st.log.start(), st.log.written_end())
            };
            if from < start || from > written_end {
                return Err(StorageError::PositionOutOfRange { position: from.0, start: start.0, end: written_end.0 });
            }
            if from < written_end || self.is_closed() {
                return Ok(written_end);
            }
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() || !self.published.wait_for(left).await {
                return Ok(written_end);
            }
        }
    }
}
