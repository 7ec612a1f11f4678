//! Opening a shard directory: load the checkpoint, scan the log from there,
//! stop at the first batch with a bad header, length or CRC, wipe the torn
//! tail, and rebuild the index entries the checkpoint did not cover.

use crate::batch::{verify_in, BatchHeader, HEADER_BYTES};
use crate::compact::clean::CleanStore;
use crate::config::ShardConfig;
use crate::error::{Result, StorageError};
use crate::fs;
use crate::index::checkpoint::Checkpoint;
use crate::index::queue_index::{self as index, IndexEntry, QueueIndex, ENTRIES_PER_PAGE, ENTRY_BYTES};
use crate::log::pool::{self, SegmentPool};
use crate::log::segment::{self, Segment};
use crate::lookup::{self, Lookup};
use crate::position::{LogPos, Offset, QueueId, PAGE_BYTES};
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;

/// Bytes read per I/O while scanning the log.
const SCAN_READ_BYTES: usize = 1 << 20;

/// A shard's storage as found on disk.
pub(crate) struct Recovered {
    pub segments: BTreeMap<LogPos, Rc<Segment>>,
    /// Log position after the last good batch.
    pub end: LogPos,
    /// The page holding `end`, zero from `end` on.
    pub tail_page: Box<[u8]>,
    pub queues: HashMap<QueueId, QueueIndex>,
    /// Compacted queues' parts.
    pub compacted: HashMap<QueueId, Rc<CleanStore>>,
    /// Lookup chunks, with the tail rebuilt from the checkpoint on.
    pub lookup: Lookup,
    /// Retired segment files kept for recycling.
    pub pool: SegmentPool,
}

/// Recovers the shard in `config.dir`, creating it if new; with `cut`, the
/// log ends at that position at the latest (a follower cut back to what its
/// leader holds), its batches from there on wiped like a torn tail.
pub(crate) async fn recover(config: &ShardConfig, cut: Option<LogPos>) -> Result<Recovered> {
    let dir = &config.dir;
    fs::create_dir(dir).await?;
    fs::probe_device(dir).await?;
    fs::create_dir(&dir.join("index")).await?;
    let checkpoint = Checkpoint::load(dir).await?;
    let mut queues = load_queues(config, checkpoint.as_ref()).await?;
    let mut segments = BTreeMap::new();
    for (base, generation) in segment::list_segments(dir).await? {
        segments.insert(base, Segment::open(dir, base, generation, config.segment_bytes).await?);
    }
    let mut pool = pool::load(dir, config.segment_pool_max, config.segment_bytes).await?;
    let first = segments.keys().next().copied().unwrap_or_default();
    let checkpointed = checkpoint.as_ref().map_or(first, |c| c.position.max(first));
    let mut lookup = Lookup::open(lookup::dir_of(dir), config.recent_batches).await?;
    let mut scan = Scan { config, segments: &segments, buf: Vec::new(), buf_pos: LogPos(0) };
    // The scan starts where every queue's index agrees with the log: the
    // checkpoint, or below it where the log lost batches it covers.
    let mut lost = scan.first_lost(config, &queues).await?;
    if let Some(cut) = cut.filter(|c| *c < checkpointed) {
        lost = Some(lost.map_or(cut, |l| l.min(cut)));
    }
    if let Some(at) = lost {
        tracing::warn!(dir = %dir.display(), at = at.0, checkpointed = checkpointed.0, "the log lost batches below its checkpoint; rolling back");
        roll_back(config, &mut queues, at).await?;
    }
    let from = lost.map_or(checkpointed, |at| at.min(checkpointed));
    let until = cut.unwrap_or(LogPos(u64::MAX));
    let end = scan.run(from, until, Some((&mut queues, &mut lookup))).await?;
    // Past a cut, the batches that are still there must be wiped too.
    let found_end = if cut.is_some() { scan.run(end, LogPos(u64::MAX), None).await? } else { end };
    if !segments.contains_key(&end)
        && segments.range(..end).next_back().is_none_or(|(b, _)| end >= *b + config.segment_bytes)
    {
        let depth = |_| fs::ZERO_FILL_DEPTH_MAX;
        segments.insert(end, Segment::create(dir, end, config.segment_bytes, &depth).await?);
    }
    // Past a rollback, valid batches may remain up to the old checkpoint.
    let old_end = if lost.is_some() { checkpointed.max(found_end) } else { found_end };
    let tail_page = wipe_torn_tail(config, &mut segments, &mut pool, end, old_end).await?;
    queues.values_mut().for_each(QueueIndex::recovered);
    let compacted = load_compacted(&mut queues).await?;
    lookup.load_recent(end).await?;
    if lost.is_some() {
        // The old checkpoint names offsets the log no longer holds: replace it
        // before any append lands where its batches were.
        let queues = queues.values().map(|q| (q.id(), q.start(), q.next())).collect();
        Checkpoint { position: end, queues }.store(dir).await?;
    }
    tracing::info!(dir = %dir.display(), end = end.0, queues = queues.len(), "shard recovered");
    Ok(Recovered { segments, end, tail_page, queues, compacted, lookup, pool })
}

/// Opens each queue's compacted part, if it has one: readers see it from
/// the checkpointed start (a trim may have moved it past the part's own),
/// and the log's share of the queue starts at the part's end.
async fn load_compacted(queues: &mut HashMap<QueueId, QueueIndex>) -> Result<HashMap<QueueId, Rc<CleanStore>>> {
    let mut parts = HashMap::new();
    for q in queues.values_mut() {
        let Some(mut part) = crate::compact::clean::open(q.dir(), q.id()).await? else { continue };
        part.cut(q.next());
        part.move_start(q.start());
        q.move_start(part.end());
        parts.insert(q.id(), Rc::new(part));
    }
    Ok(parts)
}

/// Queues from the index directories, with offsets from the checkpoint and
/// the checkpoint's partial index page back in memory.
async fn load_queues(config: &ShardConfig, checkpoint: Option<&Checkpoint>) -> Result<HashMap<QueueId, QueueIndex>> {
    let index_dir = config.dir.join("index");
    let saved: HashMap<QueueId, (Offset, Offset)> =
        checkpoint.map(|c| c.queues.iter().map(|&(q, s, n)| (q, (s, n))).collect()).unwrap_or_default();
    let mut queues = HashMap::new();
    for name in fs::list_dir(&index_dir).await? {
        let Some(id) = index::parse_queue_dir(&name) else { continue };
        let (start, next) = saved.get(&id).copied().unwrap_or_default();
        let mut q = QueueIndex::new(id, index_dir.join(&name), config.default_flush_policy, start, next);
        for base in index::list_files(q.dir()).await? {
            q.add_file(base, index::open_file(q.dir(), base).await?);
        }
        load_partial_page(config, &mut q).await?;
        queues.insert(id, q);
    }
    Ok(queues)
}

/// Reads entries [mem_base, next) of the checkpointed partial page.
async fn load_partial_page(config: &ShardConfig, q: &mut QueueIndex) -> Result<()> {
    let count = (q.next() - q.mem_base()) as usize;
    if count == 0 {
        return Ok(());
    }
    let (page, first) = index_page(config, q, q.mem_base()).await?;
    debug_assert!(first == 0 && count < ENTRIES_PER_PAGE as usize);
    q.restore_partial_page((0..count).map(|slot| IndexEntry::decode(&page, slot)));
    Ok(())
}

/// The index file page holding checkpointed `offset` of `q`, and the offset's slot in it.
async fn index_page(config: &ShardConfig, q: &QueueIndex, offset: Offset) -> Result<(glommio::io::ReadResult, usize)> {
    let file_base = offset.round_down(config.index_file_entries);
    let path = index::file_path(q.dir(), file_base);
    let file = q.file(file_base).ok_or_else(|| StorageError::Corruption {
        what: "queue index",
        position: 0,
        detail: format!("{} is missing but the checkpoint covers offset {offset} of it", path.display()),
    })?;
    let in_file = (offset - file_base) * ENTRY_BYTES as u64;
    let page = file
        .read_at_aligned(crate::position::page_down(in_file), PAGE_BYTES as usize)
        .await
        .map_err(|e| StorageError::io("reading", &path, e))?;
    Ok((page, (in_file % PAGE_BYTES) as usize / ENTRY_BYTES))
}

/// Sequential reader over the log for the recovery scan.
struct Scan<'a> {
    config: &'a ShardConfig,
    segments: &'a BTreeMap<LogPos, Rc<Segment>>,
    buf: Vec<u8>,
    /// Log position of `buf[0]`.
    buf_pos: LogPos,
}

impl Scan<'_> {
    /// Walks batches from `pos` (indexing each good one into `index`, when
    /// given); returns the position of the first batch that is missing or
    /// damaged, or `until` if it comes first.
    async fn run(
        &mut self,
        mut pos: LogPos,
        until: LogPos,
        mut index: Option<(&mut HashMap<QueueId, QueueIndex>, &mut Lookup)>,
    ) -> Result<LogPos> {
        let segment_bytes = self.config.segment_bytes;
        let keyring = self.config.keyring.clone();
        while let Some(seg) = segment::at_or_before(self.segments, pos).filter(|_| pos < until) {
            let segment_end = seg.base + segment_bytes;
            if pos >= segment_end || segment_end - pos < HEADER_BYTES as u64 {
                break;
            }
            let head = self.bytes(&seg, pos, HEADER_BYTES).await?;
            let Some(header) = BatchHeader::decode(head) else { break };
            let len = header.length as u64;
            if len < HEADER_BYTES as u64 || pos + len > segment_end {
                break;
            }
            if header.is_padding() {
                // Fills a segment's end, or a round's last page (see Log::seal_open).
                if verify_in(head, seg.generation).is_err() {
                    break;
                }
                pos += len;
                continue;
            }
            let batch = self.bytes(&seg, pos, len as usize).await?;
            // A batch of an earlier life of a recycled file fails here: a torn tail.
            let Ok(header) = verify_in(batch, seg.generation) else { break };
            if let Some((queues, lookup)) = index.as_mut() {
                // Entries come from the records in clear (a sealed batch is opened).
                let plain = crate::crypt::in_clear(keyring.as_deref(), batch, pos.0)?;
                index_batch(queues, lookup, &header, &plain, pos)?;
            }
            pos += len;
        }
        Ok(pos)
    }

    /// The log position of the first batch an index names that the log no
    /// longer holds (checked at each queue's last entry, then found by a
    /// binary search over that queue's entries), or None if every queue's
    /// last batch is there.
    async fn first_lost(
        &mut self,
        config: &ShardConfig,
        queues: &HashMap<QueueId, QueueIndex>,
    ) -> Result<Option<LogPos>> {
        let mut lost: Option<LogPos> = None;
        for q in queues.values().filter(|q| q.next() > q.start()) {
            let last = q.next().back(1);
            if self.holds(q, last, &entry_at(config, q, last).await?).await? {
                continue;
            }
            // Offsets below `good` are held; `bad` is not.
            let (mut good, mut bad) = (q.start(), q.next().back(1));
            while good < bad {
                let mid = good + (bad - good) / 2;
                if self.holds(q, mid, &entry_at(config, q, mid).await?).await? {
                    good = mid + 1;
                } else {
                    bad = mid;
                }
            }
            let at = entry_at(config, q, bad).await?.position;
            lost = Some(lost.map_or(at, |l| l.min(at)));
        }
        Ok(lost)
    }

    /// True if the log holds the batch of `q`'s `offset` where `entry` says.
    async fn holds(&mut self, q: &QueueIndex, offset: Offset, entry: &IndexEntry) -> Result<bool> {
        let offset = offset.0;
        let pos = entry.position;
        let Some(seg) = segment::at_or_before(self.segments, pos) else { return Ok(false) };
        if pos + u64::from(entry.size) > seg.base + self.config.segment_bytes {
            return Ok(false);
        }
        let batch = self.bytes(&seg, pos, entry.size as usize).await?;
        Ok(verify_in(batch, seg.generation).is_ok_and(|h| {
            h.queue == q.id().0 && h.base_offset <= offset && offset < h.base_offset + u64::from(h.record_count)
        }))
    }

    /// `len` bytes at log position `pos` of `seg`, reading ahead in big chunks.
    async fn bytes(&mut self, seg: &Segment, pos: LogPos, len: usize) -> Result<&[u8]> {
        let have = pos >= self.buf_pos && pos + len as u64 <= self.buf_pos + self.buf.len() as u64;
        if !have {
            let start = pos.page_down();
            let end = ((pos + len as u64).page_up().max(start + SCAN_READ_BYTES as u64))
                .min(seg.base + self.config.segment_bytes);
            let data = seg
                .file
                .read_at_aligned(start - seg.base, (end - start) as usize)
                .await
                .map_err(|e| StorageError::io("scanning", &seg.path, e))?;
            self.buf.clear();
            self.buf.extend_from_slice(&data);
            self.buf_pos = start;
            if self.buf.len() < ((pos + len as u64) - start) as usize {
                return Err(StorageError::io(
                    "scanning",
                    &seg.path,
                    std::io::Error::other("short read inside a preallocated segment"),
                ));
            }
        }
        let at = (pos - self.buf_pos) as usize;
        Ok(&self.buf[at..at + len])
    }
}

/// The index entry of a checkpointed offset: from memory (the partial page),
/// else from the queue's index file.
async fn entry_at(config: &ShardConfig, q: &QueueIndex, offset: Offset) -> Result<IndexEntry> {
    if let Some(e) = q.mem_entry(offset) {
        return Ok(e);
    }
    let (page, slot) = index_page(config, q, offset).await?;
    Ok(IndexEntry::decode(&page, slot))
}

/// Moves every queue's end back to the first of its batches at or past log
/// position `at` (the log holds nothing from there on), with the index's
/// partial page back in memory, as a checkpoint at `at` would have left it.
async fn roll_back(config: &ShardConfig, queues: &mut HashMap<QueueId, QueueIndex>, at: LogPos) -> Result<()> {
    for q in queues.values_mut() {
        // The first offset whose batch starts at or past `at`.
        let (mut lo, mut hi) = (q.start(), q.next());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if entry_at(config, q, mid).await?.position < at {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        if lo < q.next() {
            q.roll_back(lo);
            load_partial_page(config, q).await?;
        }
    }
    Ok(())
}

/// Rebuilds the index entries of one good batch found by the scan.
fn index_batch(
    queues: &mut HashMap<QueueId, QueueIndex>,
    lookup: &mut Lookup,
    header: &BatchHeader,
    batch: &[u8],
    pos: LogPos,
) -> Result<()> {
    let corrupt = |detail: String| StorageError::Corruption { what: "log batch", position: pos.0, detail };
    // A batch whose header CRC holds names the queue it was appended to; a
    // queue without an index directory was deleted (creation is durable
    // before any append), so its batches are passed over.
    let Some(q) = queues.get_mut(&QueueId(header.queue)) else { return Ok(()) };
    // The shard counts the entries in memory once recovered.
    if q.line_up(Offset(header.base_offset)).is_none() {
        return Err(corrupt(format!(
            "queue {} expects offset {} but the batch starts at {}",
            header.queue,
            q.next(),
            header.base_offset
        )));
    }
    let stored = lookup::Stored { position: pos, base_offset: header.base_offset, records: header.record_count };
    lookup.note_batch(lookup::BatchKey::of(q.id(), batch), stored);
    let mut count = 0;
    // `header` is the stored batch's (its length the index's size); `batch` in clear.
    let mut inflated = Vec::new();
    for record in crate::batch::records(batch, &mut inflated).map_err(|e| corrupt(e.to_string()))? {
        let record = record.map_err(|e| corrupt(e.to_string()))?;
        lookup.note(pos, q.id(), q.next(), &record.message_id, record.key.unwrap_or_default());
        q.push(IndexEntry { position: pos, size: header.length, tag_hash: record.tag_hash() });
        count += 1;
    }
    if count != header.record_count {
        return Err(corrupt("record count does not match the records".into()));
    }
    Ok(())
}

/// Zeroes what a torn write may have left past `end` (the log up to
/// `old_end`, then at most the bytes that can be in flight beyond it),
/// retires later segments, and returns the tail page. Stale bytes past the
/// end could otherwise be read as batches after the next crash.
async fn wipe_torn_tail(
    config: &ShardConfig,
    segments: &mut BTreeMap<LogPos, Rc<Segment>>,
    pool: &mut SegmentPool,
    end: LogPos,
    old_end: LogPos,
) -> Result<Box<[u8]>> {
    let seg = segment::at_or_before(segments, end).expect("a segment holds the end");
    let later = segments.split_off(&(seg.base + 1)).into_values().collect();
    retire_past_end(config, pool, later).await?;
    let segment_end = seg.base + config.segment_bytes;
    let window = (config.pending_bytes_max + config.round_bytes_max) as u64 + 2 * PAGE_BYTES;
    let page_start = end.page_down();
    let wipe_end = (old_end.page_down() + window).min(segment_end);
    let mut tail_page = vec![0u8; PAGE_BYTES as usize].into_boxed_slice();
    if page_start < segment_end {
        let in_file = page_start - seg.base;
        let page = seg
            .file
            .read_at_aligned(in_file, PAGE_BYTES as usize)
            .await
            .map_err(|e| StorageError::io("reading", &seg.path, e))?;
        let keep = (end - page_start) as usize;
        tail_page[..keep].copy_from_slice(&page[..keep]);
        let mut buf = seg.file.alloc_dma_buffer(PAGE_BYTES as usize);
        buf.as_bytes_mut().copy_from_slice(&tail_page);
        seg.file.write_at(buf, in_file).await.map_err(|e| StorageError::io("wiping torn tail of", &seg.path, e))?;
        wipe(&seg, page_start + PAGE_BYTES, wipe_end).await?;
        seg.file.fdatasync().await.map_err(|e| StorageError::io("syncing", &seg.path, e))?;
    }
    fs::sync_dir(&config.dir).await?;
    Ok(tail_page)
}

/// Hands the segments past the end (the spare made before the stop, or what
/// a rollback left behind) to the pool while it has room, so the next spare
/// is recycled instead of zero-filled again, and deletes the rest. A pooled
/// file's next life has a new generation: no batch it holds now can ever be
/// read as live.
async fn retire_past_end(config: &ShardConfig, pool: &mut SegmentPool, later: Vec<Rc<Segment>>) -> Result<()> {
    let (to_pool, to_delete) = later.split_at(pool.room().min(later.len()));
    for segment in to_pool {
        let pooled = pool::rename_retired(&config.dir, segment).await?;
        pool.put(pooled).expect("the pool had room");
    }
    if !later.is_empty() {
        tracing::info!(pooled = to_pool.len(), deleted = to_delete.len(), "segments past the log's end retired");
    }
    let doomed = to_delete.iter().map(|s| s.path.clone()).collect();
    fs::remove_files("removing segments past the end", doomed).await
}

async fn wipe(seg: &Segment, from: LogPos, to: LogPos) -> Result<()> {
    fs::zero_fill(&seg.file, &seg.path, from - seg.base, to - seg.base, &|_| fs::ZERO_FILL_DEPTH_MAX).await
}
