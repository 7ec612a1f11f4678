//! A queue's compacted part: the records compaction kept of offsets below
//! its `end`, in one file of the queue's index directory,
//! `<generation>.clean` (20 digits), written once, whole, by a compaction
//! pass and replaced whole by the next one. The log holds the queue from
//! `end` on.
//!
//! File layout: the kept batches back to back from byte 0, stored as on the
//! wire (stamped with their base offset and queue, header CRC of
//! generation 0; sealed when the shard has data keys), zeros to a page
//! boundary; the lookup entries of the kept records (u64 hash of the key
//! and of the message id, u64 offset; sorted by hash, 256 a page), zeros to
//! a page boundary; then the footer (little-endian): u64 magic, u64
//! generation, u64 start, u64 end, u64 data bytes, u64 records, u64 lookup
//! position, u64 lookup entries, u32 mark count, marks (u64 first offset,
//! u64 file position of the first batch that starts in each `MARK_BYTES`
//! of data), u32 page count, the first hash of each lookup page, u32 CRC32
//! of the footer before it; zeros, and the file's last 16 bytes: u64 footer
//! position, u32 footer length, u32 trailer magic. A file whose trailer or
//! footer fails is not used (a pass that did not finish leaves only its
//! `.tmp`). The lookup entries stand in for the log's lookup chunks, which
//! retention removes with the segments the part's records came from.

use crate::batch::{self, verify_stored, BatchHeader, ATTR_SEALED};
use crate::crypt::keyring::Keyring;
use crate::error::{Result, StorageError};
use crate::fs;
use crate::position::{page_down, page_up, Offset, QueueId, PAGE_BYTES};
use glommio::io::DmaFile;
use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::rc::Rc;

const SUFFIX: &str = ".clean";
const MAGIC: u64 = 0x3130_4e4c_4351_4d52; // "RMQCLN01"
/// Bytes of one lookup entry: u64 hash, u64 offset.
const LOOKUP_ENTRY_BYTES: usize = 16;
/// Lookup entries per page: a lookup reads the pages its hash may be on.
const LOOKUP_BLOCK: usize = PAGE_BYTES as usize / LOOKUP_ENTRY_BYTES;
const TRAILER_MAGIC: u32 = 0x4c43_4d52; // "RMCL"
const TRAILER_BYTES: usize = 16;
/// Data bytes per sparse mark: a read scans at most this much to its offset.
const MARK_BYTES: u64 = 64 << 10;
/// Bytes written per I/O.
const WRITE_BYTES: usize = fs::BACKGROUND_WRITE_BYTES;
/// Bytes read per I/O at least, and at most (a batch longer than it is read whole).
const READ_BYTES: usize = 64 << 10;
const READ_BYTES_MAX: usize = 4 << 20;

/// One queue's compacted records, read from their file.
pub(crate) struct CleanStore {
    path: PathBuf,
    file: Rc<DmaFile>,
    generation: u64,
    /// The first offset readers see (a trim moves it up), at most `end`.
    start: Cell<Offset>,
    end: Offset,
    data_bytes: u64,
    records: u64,
    /// (first offset, file position) of a batch every `MARK_BYTES`, ascending.
    marks: Vec<(Offset, u64)>,
    lookup: LookupSection,
}

/// Where a part's lookup entries are, and the first hash of each page of them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct LookupSection {
    at: u64,
    entries: u64,
    firsts: Vec<u64>,
}

/// What a compacted part holds, as the shard's API tells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Compacted {
    /// Readers see offsets from here.
    pub start: u64,
    /// Offsets below this were compacted; the log holds the rest.
    pub end: u64,
    /// Bytes of kept batches.
    pub bytes: u64,
    /// Records kept.
    pub records: u64,
    /// Passes that made it (the file's generation).
    pub generation: u64,
}

impl CleanStore {
    pub fn generation(&self) -> u64 {
        self.generation
    }

    pub fn start(&self) -> Offset {
        self.start.get()
    }

    pub fn end(&self) -> Offset {
        self.end
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Readers see no offset below `offset` any more (never moves back; the
    /// part is empty once it reaches `end`).
    pub fn move_start(&self, offset: Offset) {
        self.start.set(self.start.get().max(offset.min(self.end)));
    }

    /// True while some offset below `end` is readable here.
    pub fn holds_any(&self) -> bool {
        self.start.get() < self.end
    }

    pub fn describe(&self) -> Compacted {
        Compacted {
            start: self.start.get().0,
            end: self.end.0,
            bytes: self.data_bytes,
            records: self.records,
            generation: self.generation,
        }
    }

    /// Ends the part at `next` (the log lost what the part covered past the
    /// queue's end: disk damage), so no offset is read twice.
    pub fn cut(&mut self, next: Offset) {
        if next < self.end {
            tracing::warn!(path = %self.path.display(), end = self.end.0, next = next.0, "the log ends below a compacted part; its records past the end are not read");
            self.end = next;
            self.start.set(self.start.get().min(next));
        }
    }

    /// Batches holding offsets at or past `offset` (and below `end`), about
    /// `max_bytes` (at least one batch if any is left), in clear, and the
    /// offset to read next (`end` once the part has no more).
    pub async fn read(&self, offset: Offset, max_bytes: usize, keyring: Option<&Keyring>) -> Result<(Vec<u8>, Offset)> {
        let mark = self.marks.partition_point(|(first, _)| *first <= offset).saturating_sub(1);
        let mut pos = self.marks.get(mark).map_or(self.data_bytes, |m| m.1);
        let mut out = Vec::new();
        let mut next = offset;
        while pos < self.data_bytes && (out.is_empty() || out.len() < max_bytes) {
            let want = (max_bytes.saturating_sub(out.len()) + READ_BYTES)
                .min(READ_BYTES_MAX)
                .min((self.data_bytes - pos) as usize);
            let chunk = self.read_at(pos, want).await?;
            let mut at = 0;
            while at + batch::HEADER_BYTES <= chunk.len() {
                let length = batch::u32_at(&chunk, at) as usize;
                if at + length > chunk.len() {
                    break;
                }
                let stored = &chunk[at..at + length];
                let header = verify_stored(stored).map_err(|detail| self.damaged(pos + at as u64, detail))?;
                at += length;
                if header.next_offset() <= offset.0 {
                    continue;
                }
                if header.base_offset >= self.end.0 {
                    return Ok((out, self.end.max(next)));
                }
                self.put_clear(stored, &header, pos + (at - length) as u64, keyring, &mut out)?;
                next = Offset(header.next_offset());
                if out.len() >= max_bytes {
                    break;
                }
            }
            if at == 0 {
                // One batch longer than what was read: read it whole.
                let length = batch::u32_at(&chunk, 0) as u64;
                if length < batch::HEADER_BYTES as u64 || pos + length > self.data_bytes {
                    return Err(self.damaged(pos, "a batch's length runs past the data"));
                }
                let whole = self.read_at(pos, length as usize).await?;
                let header = verify_stored(&whole).map_err(|detail| self.damaged(pos, detail))?;
                if header.next_offset() > offset.0 && header.base_offset < self.end.0 {
                    self.put_clear(&whole, &header, pos, keyring, &mut out)?;
                    next = Offset(header.next_offset());
                }
                at = length as usize;
            }
            pos += at as u64;
        }
        let next = if pos >= self.data_bytes { self.end } else { next };
        Ok((out, next.min(self.end)))
    }

    /// Offsets of records whose key or message id has lookup `hash`
    /// ([`crate::lookup::key_hash`], [`crate::lookup::id_hash`]), from the
    /// part's start on: candidates to confirm against the records.
    pub async fn lookup(&self, hash: u64) -> Result<Vec<u64>> {
        let firsts = &self.lookup.firsts;
        let from = firsts.partition_point(|first| *first < hash).saturating_sub(1);
        let to = firsts.partition_point(|first| *first <= hash);
        let mut found = Vec::new();
        for page in from..to {
            let at = self.lookup.at + (page * LOOKUP_BLOCK * LOOKUP_ENTRY_BYTES) as u64;
            let left = self.lookup.entries as usize - page * LOOKUP_BLOCK;
            let entries = self.read_at(at, left.min(LOOKUP_BLOCK) * LOOKUP_ENTRY_BYTES).await?;
            for entry in entries.chunks_exact(LOOKUP_ENTRY_BYTES) {
                let offset = batch::u64_at(entry, 8);
                if batch::u64_at(entry, 0) == hash && offset >= self.start.get().0 && offset < self.end.0 {
                    found.push(offset);
                }
            }
        }
        Ok(found)
    }

    /// Appends a stored batch to `out` in clear.
    fn put_clear(
        &self,
        stored: &[u8],
        header: &BatchHeader,
        pos: u64,
        keyring: Option<&Keyring>,
        out: &mut Vec<u8>,
    ) -> Result<()> {
        if header.attributes & ATTR_SEALED == 0 {
            out.extend_from_slice(stored);
            return Ok(());
        }
        let plain = crate::crypt::in_clear(keyring, stored, pos).map_err(|e| self.damaged_by(pos, e.to_string()))?;
        out.extend_from_slice(&plain);
        Ok(())
    }

    async fn read_at(&self, pos: u64, len: usize) -> Result<Vec<u8>> {
        let from = page_down(pos);
        let to = page_up(pos + len as u64);
        let data = self
            .file
            .read_at_aligned(from, (to - from) as usize)
            .await
            .map_err(|e| StorageError::io("reading", &self.path, e))?;
        let skip = (pos - from) as usize;
        let have = data.len().saturating_sub(skip).min(len);
        Ok(data[skip..skip + have].to_vec())
    }

    fn damaged(&self, pos: u64, detail: &'static str) -> StorageError {
        self.damaged_by(pos, detail.to_string())
    }

    fn damaged_by(&self, pos: u64, detail: String) -> StorageError {
        StorageError::Corruption {
            what: "compacted part",
            position: pos,
            detail: format!(
                "{}: {detail} (the file is only replaced by rename, so this is disk damage)",
                self.path.display()
            ),
        }
    }
}

/// Writes the next generation of a queue's compacted part under a
/// temporary name; `finish` makes it the part.
pub(crate) struct CleanWriter {
    dir: PathBuf,
    tmp: PathBuf,
    file: DmaFile,
    generation: u64,
    /// Bytes not written yet; the file holds `written` bytes before them.
    pending: Vec<u8>,
    written: u64,
    records: u64,
    marks: Vec<(Offset, u64)>,
    /// (hash, offset) of the kept records' keys and message ids.
    lookups: Vec<(u64, u64)>,
}

impl CleanWriter {
    /// Starts generation `generation` of the part of the queue whose index directory is `dir`.
    pub async fn create(dir: &Path, generation: u64) -> Result<CleanWriter> {
        let tmp = file_path(dir, generation).with_extension("clean.tmp");
        let file = fs::create_truncated(&tmp).await?;
        Ok(CleanWriter {
            dir: dir.to_path_buf(),
            tmp,
            file,
            generation,
            pending: Vec::with_capacity(2 * WRITE_BYTES),
            written: 0,
            records: 0,
            marks: Vec::new(),
            lookups: Vec::new(),
        })
    }

    /// Notes a kept record's lookup entries: its key's, and its message
    /// id's unless it has none (all zero).
    pub fn note_lookup(&mut self, offset: u64, key: &[u8], message_id: &[u8; 16]) {
        self.lookups.push((crate::lookup::key_hash(key), offset));
        if *message_id != [0; 16] {
            self.lookups.push((crate::lookup::id_hash(message_id), offset));
        }
    }

    /// Bytes of batches pushed so far.
    pub fn data_bytes(&self) -> u64 {
        self.written + self.pending.len() as u64
    }

    /// Adds a stored batch (stamped, as on the wire; sealed or not).
    pub async fn push(&mut self, stored: &[u8], base_offset: Offset, records: u32) -> Result<()> {
        let pos = self.data_bytes();
        if self.marks.last().is_none_or(|(_, last)| pos / MARK_BYTES > last / MARK_BYTES) {
            self.marks.push((base_offset, pos));
        }
        self.pending.extend_from_slice(stored);
        self.records += u64::from(records);
        self.write_full().await
    }

    /// Writes every whole `WRITE_BYTES` piece of what is pending.
    async fn write_full(&mut self) -> Result<()> {
        while self.pending.len() >= WRITE_BYTES {
            self.write_piece(WRITE_BYTES).await?;
        }
        Ok(())
    }

    async fn write_piece(&mut self, len: usize) -> Result<()> {
        let mut buf = self.file.alloc_dma_buffer(len);
        buf.as_bytes_mut().copy_from_slice(&self.pending[..len]);
        let n = self.file.write_at(buf, self.written).await.map_err(|e| StorageError::io("writing", &self.tmp, e))?;
        if n != len {
            let short = std::io::Error::other(format!("short write: {n} of {len} bytes"));
            return Err(StorageError::io("writing", &self.tmp, short));
        }
        self.pending.drain(..len);
        self.written += len as u64;
        Ok(())
    }

    /// Writes the footer, syncs, and renames the file into place (the
    /// directory synced): from here a restart reads this generation.
    pub async fn finish(mut self, start: Offset, end: Offset) -> Result<CleanStore> {
        let data_bytes = self.data_bytes();
        let lookup_at = page_up(data_bytes);
        self.pending.resize((lookup_at - self.written) as usize, 0);
        self.write_full().await?;
        let mut lookups = std::mem::take(&mut self.lookups);
        lookups.sort_unstable();
        let firsts: Vec<u64> = lookups.chunks(LOOKUP_BLOCK).map(|page| page[0].0).collect();
        for (hash, offset) in &lookups {
            self.pending.extend_from_slice(&hash.to_le_bytes());
            self.pending.extend_from_slice(&offset.to_le_bytes());
            self.write_full().await?;
        }
        let lookup = LookupSection { at: lookup_at, entries: lookups.len() as u64, firsts };
        let footer_at = page_up(self.data_bytes());
        self.pending.resize((footer_at - self.written) as usize, 0);
        let footer = encode_footer(&Footer {
            generation: self.generation,
            start,
            end,
            data_bytes,
            records: self.records,
            marks: self.marks.clone(),
            lookup: lookup.clone(),
        });
        self.pending.extend_from_slice(&footer);
        let total = page_up(footer_at + (footer.len() + TRAILER_BYTES) as u64);
        self.pending.resize((total - self.written) as usize - TRAILER_BYTES, 0);
        self.pending.extend_from_slice(&footer_at.to_le_bytes());
        self.pending.extend_from_slice(&(footer.len() as u32).to_le_bytes());
        self.pending.extend_from_slice(&TRAILER_MAGIC.to_le_bytes());
        while !self.pending.is_empty() {
            self.write_piece(self.pending.len().min(WRITE_BYTES)).await?;
        }
        self.file.fdatasync().await.map_err(|e| StorageError::io("syncing", &self.tmp, e))?;
        let path = file_path(&self.dir, self.generation);
        self.file.rename(&path).await.map_err(|e| StorageError::io("renaming", &self.tmp, e))?;
        fs::sync_dir(&self.dir).await?;
        Ok(CleanStore {
            path,
            file: Rc::new(self.file),
            generation: self.generation,
            start: Cell::new(start),
            end,
            data_bytes,
            records: self.records,
            marks: self.marks,
            lookup,
        })
    }

    /// Drops the unfinished file.
    pub async fn abandon(self) {
        let _ = self.file.close().await;
        let _ = fs::blocking("removing", &self.tmp, |tmp| std::fs::remove_file(tmp)).await;
    }
}

/// A part's footer: what opening the part needs.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Footer {
    generation: u64,
    start: Offset,
    end: Offset,
    data_bytes: u64,
    records: u64,
    marks: Vec<(Offset, u64)>,
    lookup: LookupSection,
}

fn encode_footer(f: &Footer) -> Vec<u8> {
    let mut b = Vec::with_capacity(76 + f.marks.len() * 16 + f.lookup.firsts.len() * 8);
    for v in [MAGIC, f.generation, f.start.0, f.end.0, f.data_bytes, f.records, f.lookup.at, f.lookup.entries] {
        b.extend_from_slice(&v.to_le_bytes());
    }
    b.extend_from_slice(&(f.marks.len() as u32).to_le_bytes());
    for (offset, pos) in &f.marks {
        b.extend_from_slice(&offset.0.to_le_bytes());
        b.extend_from_slice(&pos.to_le_bytes());
    }
    b.extend_from_slice(&(f.lookup.firsts.len() as u32).to_le_bytes());
    for first in &f.lookup.firsts {
        b.extend_from_slice(&first.to_le_bytes());
    }
    let crc = crc32fast::hash(&b);
    b.extend_from_slice(&crc.to_le_bytes());
    b
}

fn decode_footer(b: &[u8]) -> Option<Footer> {
    use crate::batch::{u32_at, u64_at};
    if b.len() < 76 || u64_at(b, 0) != MAGIC {
        return None;
    }
    let marks = u32_at(b, 64) as usize;
    let pages_at = 68usize.checked_add(marks.checked_mul(16)?)?;
    let pages = u32_at(b.get(pages_at..pages_at + 4)?, 0) as usize;
    let end = (pages_at + 4).checked_add(pages.checked_mul(8)?)?;
    if b.len() < end + 4 || crc32fast::hash(&b[..end]) != u32_at(b, end) {
        return None;
    }
    Some(Footer {
        generation: u64_at(b, 8),
        start: Offset(u64_at(b, 16)),
        end: Offset(u64_at(b, 24)),
        data_bytes: u64_at(b, 32),
        records: u64_at(b, 40),
        marks: (0..marks).map(|i| (Offset(u64_at(b, 68 + i * 16)), u64_at(b, 76 + i * 16))).collect(),
        lookup: LookupSection {
            at: u64_at(b, 48),
            entries: u64_at(b, 56),
            firsts: (0..pages).map(|i| u64_at(b, pages_at + 4 + i * 8)).collect(),
        },
    })
}

/// Path of generation `generation` of the part in the queue's index directory `dir`.
fn file_path(dir: &Path, generation: u64) -> PathBuf {
    dir.join(format!("{generation:020}{SUFFIX}"))
}

/// Opens the newest whole part in the queue's index directory `dir`, if
/// there is one, and removes older generations and unfinished files.
pub(crate) async fn open(dir: &Path, queue: QueueId) -> Result<Option<CleanStore>> {
    // Unfinished passes' `.tmp` files go with the listing.
    let mut generations = fs::list_numbered(dir, |name| {
        let digits = name.strip_suffix(SUFFIX)?;
        (digits.len() == 20).then(|| digits.parse::<u64>().ok())?
    })
    .await?;
    let mut stale = Vec::new();
    let mut found = None;
    while let Some(generation) = generations.pop() {
        let path = file_path(dir, generation);
        if found.is_some() {
            stale.push(path);
            continue;
        }
        match open_file(&path).await? {
            Some(store) => found = Some(store),
            None => {
                tracing::warn!(queue = queue.0, path = %path.display(), "a compacted part fails its footer check; an older generation is read");
                stale.push(path);
            }
        }
    }
    if !stale.is_empty() {
        fs::remove_files("removing old compacted parts", stale).await?;
    }
    Ok(found)
}

async fn open_file(path: &Path) -> Result<Option<CleanStore>> {
    let file = fs::open_rw(path).await?;
    let size = file.file_size().await.map_err(|e| StorageError::io("sizing", path, e))?;
    if size < PAGE_BYTES || size % PAGE_BYTES != 0 {
        return Ok(None);
    }
    let last = file
        .read_at_aligned(size - PAGE_BYTES, PAGE_BYTES as usize)
        .await
        .map_err(|e| StorageError::io("reading", path, e))?;
    let t = &last[PAGE_BYTES as usize - TRAILER_BYTES..];
    if batch::u32_at(t, 12) != TRAILER_MAGIC {
        return Ok(None);
    }
    let (footer_at, footer_len) = (batch::u64_at(t, 0), batch::u32_at(t, 8) as u64);
    if footer_at % PAGE_BYTES != 0 || footer_at + footer_len + TRAILER_BYTES as u64 > size {
        return Ok(None);
    }
    let bytes = file
        .read_at_aligned(footer_at, page_up(footer_len) as usize)
        .await
        .map_err(|e| StorageError::io("reading", path, e))?;
    let Some(f) = decode_footer(&bytes[..footer_len as usize]) else { return Ok(None) };
    let lookup_end = f.lookup.at + f.lookup.entries * LOOKUP_ENTRY_BYTES as u64;
    if f.data_bytes > f.lookup.at || lookup_end > footer_at || f.start > f.end {
        return Ok(None);
    }
    Ok(Some(CleanStore {
        path: path.to_path_buf(),
        file: Rc::new(file),
        generation: f.generation,
        start: Cell::new(f.start),
        end: f.end,
        data_bytes: f.data_bytes,
        records: f.records,
        marks: f.marks,
        lookup: f.lookup,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_footer_round_trips_and_damage_is_refused() {
        let f = Footer {
            generation: 4,
            start: Offset(0),
            end: Offset(1_000),
            data_bytes: 80_000,
            records: 12,
            marks: vec![(Offset(3), 0), (Offset(900), 70_000)],
            lookup: LookupSection { at: 81_920, entries: 300, firsts: vec![5, 1 << 60] },
        };
        let mut b = encode_footer(&f);
        assert_eq!(decode_footer(&b), Some(f));
        b[20] ^= 1;
        assert_eq!(decode_footer(&b), None);
    }
}
