//! Per-queue index: one fixed-size entry per record (log position of its
//! batch, batch size, tag hash), so a queue offset maps to a log position in
//! O(1). Entries live in memory from the last checkpointed page onward and on
//! disk in preallocated, zero-filled Direct I/O files of `index_file_entries`
//! entries, named by their 20-digit base offset. The index may lag the log:
//! recovery rebuilds entries past the checkpoint from the log.

use crate::config::FlushPolicy;
use crate::error::Result;
use crate::fs;
use crate::position::{LogPos, Offset, QueueId, PAGE_BYTES};
use crate::signal::Signal;
use glommio::io::DmaFile;
use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// Bytes per index entry.
pub const ENTRY_BYTES: usize = 16;
/// Entries per 4 KiB index page.
pub const ENTRIES_PER_PAGE: u64 = PAGE_BYTES / ENTRY_BYTES as u64;
const PAGE_ENTRIES: usize = ENTRIES_PER_PAGE as usize;
const INDEX_SUFFIX: &str = ".idx";

/// Where one record's batch lives in the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexEntry {
    pub position: LogPos,
    pub size: u32,
    pub tag_hash: u32,
}

impl IndexEntry {
    /// The log position after the entry's batch.
    pub fn end(&self) -> LogPos {
        self.position + u64::from(self.size)
    }

    fn encode(&self, out: &mut [u8]) {
        out[0..8].copy_from_slice(&self.position.0.to_le_bytes());
        out[8..12].copy_from_slice(&self.size.to_le_bytes());
        out[12..16].copy_from_slice(&self.tag_hash.to_le_bytes());
    }

    /// Decodes entry `slot` of an index page.
    pub fn decode(page: &[u8], slot: usize) -> IndexEntry {
        let b = &page[slot * ENTRY_BYTES..(slot + 1) * ENTRY_BYTES];
        IndexEntry {
            position: LogPos(crate::batch::u64_at(b, 0)),
            size: crate::batch::u32_at(b, 8),
            tag_hash: crate::batch::u32_at(b, 12),
        }
    }
}

/// One queue's offsets and index.
pub(crate) struct QueueIndex {
    id: QueueId,
    dir: PathBuf,
    policy: FlushPolicy,
    /// First offset still stored (retention moves it up).
    start: Offset,
    /// Next offset to assign at append.
    next: Offset,
    /// Readable offsets are [start, visible): written (and synced, under the sync policy).
    visible: Offset,
    /// Entries below this offset are durable in the index files.
    disk_next: Offset,
    /// Offset of the first entry in memory; a page boundary, at or below `disk_next`.
    mem_base: Offset,
    /// Entries from `mem_base` on, one index page's worth per block: an
    /// append never moves earlier entries (one growing Vec copied megabytes
    /// at each doubling, stalling the shard ~9 ms at 128k entries), and a
    /// checkpoint's trim drops whole blocks.
    mem: VecDeque<Vec<IndexEntry>>,
    files: BTreeMap<Offset, Rc<DmaFile>>,
    /// Notified when `visible` moves (long polls wait on it).
    arrivals: Rc<Signal>,
    /// Id of the last group-commit round that touched this queue.
    last_round: u64,
}

impl QueueIndex {
    /// A queue whose durable index ends at `disk_next`.
    pub fn new(id: QueueId, dir: PathBuf, policy: FlushPolicy, start: Offset, disk_next: Offset) -> Self {
        let mem_base = disk_next.round_down(ENTRIES_PER_PAGE);
        QueueIndex {
            id,
            dir,
            policy,
            start,
            next: disk_next,
            visible: disk_next,
            disk_next,
            mem_base,
            mem: VecDeque::new(),
            files: BTreeMap::new(),
            arrivals: Rc::new(Signal::default()),
            last_round: u64::MAX,
        }
    }

    /// Records the entry of offset `next` and advances it.
    pub fn push(&mut self, entry: IndexEntry) {
        debug_assert_eq!(self.mem_base + self.mem_len() as u64, self.next);
        // Offsets and log positions grow together, at append and at rebuild.
        assert!(
            self.mem.back().and_then(|b| b.last()).is_none_or(|e| e.position <= entry.position),
            "queue {}: offset {} at position {} before its predecessor's",
            self.id,
            self.next,
            entry.position
        );
        if self.mem.back().is_none_or(|block| block.len() == PAGE_ENTRIES) {
            self.mem.push_back(Vec::with_capacity(PAGE_ENTRIES));
        }
        self.mem.back_mut().expect("pushed above").push(entry);
        self.next += 1;
    }

    /// Lines the queue up for a stored batch whose first offset is `base`:
    /// possible if `base` is its next offset, or if the queue never held an
    /// offset, which then begins at `base` (a queue moved from another
    /// broker group keeps its offsets; the start travels in its first batch,
    /// to followers and to recovery alike). Some(the index entries it added
    /// in memory, for the shard's count), or None.
    pub fn line_up(&mut self, base: Offset) -> Option<usize> {
        if self.next == base {
            return Some(0);
        }
        if self.next != Offset(0) || !self.mem.is_empty() {
            return None;
        }
        Some(self.begin_at(base))
    }

    /// Makes a queue that never held an offset begin at `start`. The index
    /// is dense from a page boundary: the offsets before `start` on its page
    /// get empty entries, which no read reaches (they are below the start).
    /// Returns how many.
    fn begin_at(&mut self, start: Offset) -> usize {
        assert!(self.next == Offset(0) && self.mem.is_empty(), "queue {} begins once, before any offset", self.id);
        let base = start.round_down(ENTRIES_PER_PAGE);
        (self.mem_base, self.disk_next, self.next) = (base, base, base);
        while self.next < start {
            self.push(IndexEntry { position: LogPos(0), size: 0, tag_hash: 0 });
        }
        (self.start, self.visible) = (start, start);
        (start.0 - base.0) as usize
    }

    /// Entries in memory.
    pub fn mem_len(&self) -> usize {
        self.mem.back().map_or(0, |last| (self.mem.len() - 1) * PAGE_ENTRIES + last.len())
    }

    /// Puts back the entries [mem_base, next) of a checkpointed partial page.
    pub fn restore_partial_page(&mut self, entries: impl Iterator<Item = IndexEntry>) {
        let mut block = Vec::with_capacity(PAGE_ENTRIES);
        block.extend(entries);
        debug_assert!(self.mem.is_empty() && block.len() < PAGE_ENTRIES);
        debug_assert_eq!(self.mem_base + block.len() as u64, self.next);
        self.mem.push_back(block);
    }

    /// The entry of `offset` if it is in memory.
    pub fn mem_entry(&self, offset: Offset) -> Option<IndexEntry> {
        let i = offset.0.checked_sub(self.mem_base.0)? as usize;
        self.mem.get(i / PAGE_ENTRIES).and_then(|block| block.get(i % PAGE_ENTRIES)).copied()
    }

    /// Makes every entry whose batch ends at or before `written_end` readable.
    pub fn publish(&mut self, written_end: LogPos) -> bool {
        let before = self.visible;
        while let Some(e) = self.mem_entry(self.visible) {
            if e.end() > written_end {
                break;
            }
            self.visible += 1;
        }
        self.visible != before
    }

    /// Offsets whose batches lie wholly before log position `end`, counted
    /// from `next` down: a checkpoint at `end` must cover every batch before
    /// it, also those not readable yet (past a leader's commit gate), or
    /// recovery, which scans only from `end`, would never index them.
    pub fn next_before(&self, end: LogPos) -> Offset {
        let mut n = self.next;
        while n > self.mem_base {
            match self.mem_entry(n.back(1)) {
                Some(e) if e.end() > end => n = n.back(1),
                _ => break,
            }
        }
        n.max(self.disk_next)
    }

    /// Drops in-memory pages that lie wholly below `disk_next` and below
    /// `visible`; returns how many entries it dropped. Entries behind a
    /// leader's commit gate stay, though a checkpoint wrote them: `publish`
    /// makes them readable from memory when the gate passes them.
    pub fn trim_memory(&mut self) -> usize {
        let keep_from = self.disk_next.min(self.visible).round_down(ENTRIES_PER_PAGE);
        if keep_from <= self.mem_base {
            return 0;
        }
        let dropped = (keep_from - self.mem_base) as usize;
        self.mem.drain(..dropped / PAGE_ENTRIES);
        self.mem_base = keep_from;
        dropped
    }

    /// Encodes pages [first_page, first_page + pages) from memory; entries at or
    /// past `upto` are left zero.
    pub fn encode_pages(&self, first_page: u64, pages: u64, upto: Offset, out: &mut [u8]) {
        out.fill(0);
        let first = Offset(first_page * ENTRIES_PER_PAGE);
        for offset in first.max(self.mem_base).upto(upto.min(first + pages * ENTRIES_PER_PAGE)) {
            let e = self.mem_entry(offset).expect("entries below next are in memory");
            let at = ((offset - first) as usize) * ENTRY_BYTES;
            e.encode(&mut out[at..at + ENTRY_BYTES]);
        }
    }

    /// Forgets the index files wholly below the queue's start; returns their paths.
    pub fn remove_files_below_start(&mut self, file_entries: u64) -> Vec<PathBuf> {
        let doomed: Vec<Offset> =
            self.files.keys().copied().filter(|base| *base + file_entries <= self.start).collect();
        doomed.into_iter().filter_map(|base| self.files.remove(&base).map(|_| file_path(&self.dir, base))).collect()
    }

    /// Base of the last index file this queue should have now: the one
    /// holding `next` plus half a file, so the next file is ready well before
    /// appends reach it.
    pub fn file_wanted(&self, file_entries: u64) -> Offset {
        (self.next + file_entries / 2).round_down(file_entries)
    }

    /// The first index file a checkpoint or appends will need that does not
    /// exist yet: from the one holding `disk_next` to `file_wanted`. None
    /// while every entry is on disk: a queue gets its next file once it has
    /// entries to write (files are made lazily: a new topic of 4,096 queues
    /// zero-filled 4 GiB of index files for queues that may never be used).
    pub fn file_missing(&self, file_entries: u64) -> Option<Offset> {
        if self.next == self.disk_next {
            return None;
        }
        let first = self.disk_next.round_down(file_entries);
        (first.0..=self.file_wanted(file_entries).0)
            .step_by(file_entries as usize)
            .map(Offset)
            .find(|base| !self.files.contains_key(base))
    }

    pub fn id(&self) -> QueueId {
        self.id
    }

    /// The queue's index directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn policy(&self) -> FlushPolicy {
        self.policy
    }

    pub fn set_policy(&mut self, policy: FlushPolicy) {
        self.policy = policy;
    }

    /// First offset still stored.
    pub fn start(&self) -> Offset {
        self.start
    }

    /// Next offset to assign at append.
    pub fn next(&self) -> Offset {
        self.next
    }

    /// Readable offsets end here.
    pub fn visible(&self) -> Offset {
        self.visible
    }

    /// Entries below this offset are durable in the index files.
    pub fn disk_next(&self) -> Offset {
        self.disk_next
    }

    /// Offset of the first entry in memory.
    pub fn mem_base(&self) -> Offset {
        self.mem_base
    }

    /// Notified when `visible` moves (long polls wait on it).
    pub fn arrivals(&self) -> &Rc<Signal> {
        &self.arrivals
    }

    /// The index file starting at offset `base`, if it is open.
    pub fn file(&self, base: Offset) -> Option<&Rc<DmaFile>> {
        self.files.get(&base)
    }

    pub fn add_file(&mut self, base: Offset, file: Rc<DmaFile>) {
        assert_eq!(base.round_down(ENTRIES_PER_PAGE), base, "index file {base} starts on a page");
        self.files.insert(base, file);
    }

    /// Retention removed everything below `start`.
    pub fn move_start(&mut self, start: Offset) {
        self.start = self.start.max(start);
        assert!(self.start <= self.next, "queue {} start {} past next {}", self.id, self.start, self.next);
    }

    /// A checkpoint made the entries below `upto` durable in the index files.
    pub fn written_to_disk(&mut self, upto: Offset) {
        assert!(upto <= self.next, "queue {} index written to {upto} past next {}", self.id, self.next);
        self.disk_next = self.disk_next.max(upto);
    }

    /// After recovery: every recovered entry is readable.
    pub fn recovered(&mut self) {
        self.visible = self.next;
    }

    /// Moves the end back to `to` (recovery found the log lost what lies
    /// past it), as a checkpoint at `to` would have left the queue; the
    /// partial page is reloaded by the caller.
    pub fn roll_back(&mut self, to: Offset) {
        assert!(
            self.start <= to && to <= self.next,
            "queue {} rolls back to {to} outside [{}, {}]",
            self.id,
            self.start,
            self.next
        );
        let files = std::mem::take(&mut self.files);
        *self = QueueIndex::new(self.id, self.dir.clone(), self.policy, self.start, to);
        self.files = files;
    }

    /// Notes that `round` holds an append of this queue; true the first time.
    pub fn touched_by(&mut self, round: u64) -> bool {
        std::mem::replace(&mut self.last_round, round) != round
    }
}

/// Directory of a queue's index files.
pub fn queue_dir(shard_dir: &Path, queue: QueueId) -> PathBuf {
    shard_dir.join("index").join(format!("{:010}", queue.0))
}

/// Parses a queue directory name.
pub fn parse_queue_dir(name: &str) -> Option<QueueId> {
    (name.len() == 10).then(|| name.parse().ok().map(QueueId))?
}

/// Path of the index file starting at `base` offset.
pub fn file_path(dir: &Path, base: Offset) -> PathBuf {
    dir.join(format!("{:020}{INDEX_SUFFIX}", base.0))
}

/// Base offsets of the index files in `dir`; removes leftover temporaries.
pub async fn list_files(dir: &Path) -> Result<Vec<Offset>> {
    let bases = fs::list_numbered(dir, |name| {
        let digits = name.strip_suffix(INDEX_SUFFIX)?;
        (digits.len() == 20).then(|| digits.parse().ok())?
    });
    Ok(bases.await?.into_iter().map(Offset).collect())
}

/// Opens an existing index file.
pub async fn open_file(dir: &Path, base: Offset) -> Result<Rc<DmaFile>> {
    Ok(Rc::new(fs::open_rw(&file_path(dir, base)).await?))
}

/// Creates an index file preallocated and zero-filled.
pub async fn create_file(dir: &Path, base: Offset, file_entries: u64) -> Result<Rc<DmaFile>> {
    let bytes = file_entries * ENTRY_BYTES as u64;
    Ok(Rc::new(fs::create_zero_filled(&file_path(dir, base), bytes, &|_| 1).await?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(offset: u64) -> IndexEntry {
        IndexEntry { position: LogPos(offset * 100), size: 100, tag_hash: offset as u32 }
    }

    #[test]
    fn entries_span_blocks_and_a_trim_drops_whole_pages() {
        let mut q = QueueIndex::new(QueueId(1), PathBuf::new(), FlushPolicy::Sync, Offset(0), Offset(0));
        for offset in 0..700 {
            q.push(entry(offset));
        }
        assert_eq!(q.mem_len(), 700);
        assert!((0..700).all(|o| q.mem_entry(Offset(o)) == Some(entry(o))));
        assert_eq!(q.mem_entry(Offset(700)), None);
        q.disk_next = Offset(600);
        assert!(q.publish(LogPos(300 * 100)), "offsets below 300 readable");
        assert_eq!(q.trim_memory(), 256, "the page below the readable end; those behind a commit gate stay");
        assert!(q.publish(LogPos(700 * 100)));
        assert_eq!(q.trim_memory(), 256, "the next page below offset 600, once readable");
        assert_eq!((q.mem_base, q.mem_len()), (Offset(512), 188));
        assert_eq!(q.mem_entry(Offset(511)), None);
        for offset in 700..800 {
            q.push(entry(offset));
        }
        assert!((512..800).all(|o| q.mem_entry(Offset(o)) == Some(entry(o))));
        let mut page = vec![0u8; PAGE_BYTES as usize];
        q.encode_pages(2, 1, Offset(600), &mut page);
        assert_eq!(IndexEntry::decode(&page, 87), entry(599));
        assert_eq!(IndexEntry::decode(&page, 88), IndexEntry { position: LogPos(0), size: 0, tag_hash: 0 });
    }

    #[test]
    fn a_restored_partial_page_takes_appends_after_it() {
        let mut q = QueueIndex::new(QueueId(1), PathBuf::new(), FlushPolicy::Sync, Offset(0), Offset(300));
        assert_eq!(q.mem_base, Offset(256));
        q.restore_partial_page((256..300).map(entry));
        for offset in 300..600 {
            q.push(entry(offset));
        }
        assert_eq!(q.mem_len(), 344);
        assert!((256..600).all(|o| q.mem_entry(Offset(o)) == Some(entry(o))));
    }
}
