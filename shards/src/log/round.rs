//! A group-commit round: the batches appended while the previous round was
//! being written, laid out contiguously in one page-aligned DMA buffer exactly
//! as they will sit in the segment, so the flusher writes them with one I/O.

use crate::batch::{self, BatchHeader, HEADER_BYTES};
use crate::log::segment::Segment;
use crate::position::{LogPos, QueueId, PAGE_BYTES};
use crate::signal::Completion;
use glommio::io::DmaBuffer;
use std::rc::Rc;

/// One group-commit round.
pub(crate) struct Round {
    pub id: u64,
    pub segment: Rc<Segment>,
    /// `buf[0]` sits at log position `aligned_start`.
    pub buf: Rc<DmaBuffer>,
    pub aligned_start: LogPos,
    /// First byte this round adds (the bytes before it rewrite the tail page).
    pub start: LogPos,
    /// After the last byte in `buf`.
    pub data_end: LogPos,
    /// Log position after the round; past `data_end` only for a padding round.
    pub end: LogPos,
    /// Bytes of the appended batches (padding excluded).
    pub batch_bytes: usize,
    pub records: u64,
    pub needs_sync: bool,
    pub touched: Vec<QueueId>,
    pub done: Rc<Completion>,
    /// Its new bytes are in the log cache already (copied while it was written).
    pub cached: bool,
    data_room: usize,
}

impl Round {
    /// Opens a round at log position `end` in `segment`; `tail_page` holds the
    /// bytes of the partial page before `end`, which the round rewrites.
    pub fn open(id: u64, segment: Rc<Segment>, end: LogPos, tail_page: &[u8], round_bytes_max: usize) -> Round {
        let aligned_start = end.page_down();
        let prefix = (end - aligned_start) as usize;
        // One page for the rewritten prefix, one for a padding header.
        let mut buf = segment.file.alloc_dma_buffer(round_bytes_max + 2 * PAGE_BYTES as usize);
        buf.as_bytes_mut()[..prefix].copy_from_slice(&tail_page[..prefix]);
        Round {
            id,
            segment,
            buf: Rc::new(buf),
            aligned_start,
            start: end,
            data_end: end,
            end,
            batch_bytes: 0,
            records: 0,
            needs_sync: false,
            touched: Vec::new(),
            done: Rc::new(Completion::default()),
            cached: false,
            data_room: round_bytes_max + PAGE_BYTES as usize,
        }
    }

    /// True if a batch of `len` bytes still fits.
    pub fn fits(&self, len: usize) -> bool {
        (self.data_end - self.aligned_start) as usize + len <= self.data_room
    }

    /// True if nothing was appended yet.
    pub fn is_empty(&self) -> bool {
        self.data_end == self.start
    }

    /// Copies `bytes` to the end of the round and returns the copy.
    pub fn put(&mut self, bytes: &[u8]) -> &mut [u8] {
        let copy = self.reserve(bytes.len());
        copy.copy_from_slice(bytes);
        copy
    }

    /// The next `len` bytes of the round, for the caller to fill (a sealed batch).
    pub fn reserve(&mut self, len: usize) -> &mut [u8] {
        let at = (self.data_end - self.aligned_start) as usize;
        self.data_end += len as u64;
        self.end = self.data_end;
        let buf = Rc::get_mut(&mut self.buf).expect("an open round owns its buffer");
        &mut buf.as_bytes_mut()[at..at + len]
    }

    /// Closes the round for appends: zeroes the rest of its last page (the
    /// segment past the data must stay zero, recovery reads zero as the end),
    /// trims the buffer to whole pages and saves the new partial tail page.
    pub fn seal(&mut self, tail_page: &mut [u8]) {
        let used = (self.data_end - self.aligned_start) as usize;
        let span = (self.data_end.page_up() - self.aligned_start) as usize;
        let buf = Rc::get_mut(&mut self.buf).expect("an open round owns its buffer");
        buf.as_bytes_mut()[used..span].fill(0);
        buf.trim_to_size(span);
        if self.end == self.data_end {
            let page_start = (self.end.page_down() - self.aligned_start) as usize;
            tail_page[..used - page_start].copy_from_slice(&buf.as_bytes()[page_start..used]);
        }
    }

    /// Byte offset of the round's write inside its segment file.
    pub fn file_position(&self) -> u64 {
        self.aligned_start - self.segment.base
    }

    /// Asserts, right before the round is written, that its new bytes are
    /// whole stored batches, each sealed by its header CRC (which covers its
    /// length and body CRC), ending exactly at `data_end`; a padding batch
    /// (only its header is written) comes last and ends the round at `end`.
    pub fn assert_framed(&self) {
        let bytes = self.new_bytes();
        let mut at = 0;
        while at < bytes.len() {
            let position = self.start + at as u64;
            let header = BatchHeader::decode(&bytes[at..])
                .unwrap_or_else(|| panic!("round {}: no batch header at position {position}", self.id));
            let sealed = batch::header_holds(&bytes[at..], self.segment.generation);
            assert!(sealed, "round {}: header CRC of the batch at {position} does not hold", self.id);
            if header.is_padding() {
                assert_eq!(at + HEADER_BYTES, bytes.len(), "round {}: padding at {position} is last", self.id);
                assert_eq!(position + u64::from(header.length), self.end, "round {}: padding ends it", self.id);
                return;
            }
            assert!(header.length as usize >= HEADER_BYTES, "round {}: batch at {position} too short", self.id);
            at += header.length as usize;
        }
        assert_eq!(at, bytes.len(), "round {}: its last batch runs past its data", self.id);
        assert_eq!(self.data_end, self.end, "round {}: only a padding batch ends past its data", self.id);
    }

    /// The bytes this round adds, from `start` to `data_end`.
    pub fn new_bytes(&self) -> &[u8] {
        let from = (self.start - self.aligned_start) as usize;
        let to = (self.data_end - self.aligned_start) as usize;
        &self.buf.as_bytes()[from..to]
    }
}
