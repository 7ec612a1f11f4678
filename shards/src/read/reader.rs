//! Reads: a queue offset goes through the index to a log position, the batch
//! bytes come from the user-space cache, and misses read whole chunks with
//! O_DIRECT (reading ahead after sequential misses). Every batch handed out is
//! re-checked (CRC, queue, offset), so corrupt data is never returned.

use crate::batch::{self, verify_in, Generation, ATTR_SEALED};
use crate::error::{Result, StorageError};
use crate::index::queue_index::{IndexEntry, ENTRIES_PER_PAGE};
use crate::position::{LogPos, Offset, QueueId, PAGE_BYTES};
use crate::probe::stats::add;
use crate::read::cache::ChunkCache;
use crate::shard::Inner;
use futures_util::future::join_all;
use std::cell::Cell;
use std::time::Duration;

/// Whole batches read from a queue.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadBatches {
    /// Concatenated stored batches; split them with [`crate::batch::split`].
    /// The first batch may start before the requested offset.
    pub bytes: Vec<u8>,
    /// Offset to read next.
    pub next_offset: u64,
    /// The queue's readable end when the read was served.
    pub end_offset: u64,
}

/// A read's share of a compacted queue's part.
enum Compacted {
    /// Served from the part.
    Read(ReadBatches),
    /// The log serves the read, from this offset.
    LogFrom(u64),
}

/// What a read does when the offset is at the readable end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadWait {
    /// Return empty at once.
    No,
    /// Park until data arrives or the duration passes (long polling).
    Upto(Duration),
}

impl Inner {
    /// Reads whole batches of `queue` from `offset`, up to about `max_bytes`
    /// (at least one batch is returned when one is readable). A read that
    /// retention overtook (its data retired while it read) is out of range.
    pub(crate) async fn read(
        &self,
        queue: QueueId,
        offset: u64,
        max_bytes: usize,
        wait: ReadWait,
    ) -> Result<ReadBatches> {
        let offset = match self.read_compacted(queue, offset, max_bytes).await? {
            Compacted::Read(batches) => return Ok(batches),
            Compacted::LogFrom(offset) => offset,
        };
        let read = self.read_batches(queue, offset, max_bytes, wait).await;
        read.map_err(|error| {
            let st = self.state.borrow();
            match st.queues.get(&queue) {
                Some(q) if offset < q.start().0 => StorageError::OffsetOutOfRange {
                    queue: queue.0,
                    offset,
                    start: st.start_of(q).0,
                    end: q.visible().0,
                },
                _ => error,
            }
        })
    }

    /// Reads below the end of the queue's compacted part from the part;
    /// an offset past what it holds reads on from the log.
    async fn read_compacted(&self, queue: QueueId, offset: u64, max_bytes: usize) -> Result<Compacted> {
        let (part, end) = {
            let st = self.state.borrow();
            let q = st.queues.get(&queue).ok_or(StorageError::UnknownQueue(queue.0))?;
            let Some(part) = st.compacted.get(&queue).filter(|p| offset < p.end().0).cloned() else {
                return Ok(Compacted::LogFrom(offset));
            };
            let start = st.start_of(q).0;
            if offset < start {
                return Err(StorageError::OffsetOutOfRange { queue: queue.0, offset, start, end: q.visible().0 });
            }
            (part, q.visible().0)
        };
        let (bytes, next) = part.read(Offset(offset), max_bytes, self.config.keyring.as_deref()).await?;
        if bytes.is_empty() {
            return Ok(Compacted::LogFrom(part.end().0));
        }
        Ok(Compacted::Read(ReadBatches { bytes, next_offset: next.0, end_offset: end }))
    }

    async fn read_batches(&self, queue: QueueId, offset: u64, max_bytes: usize, wait: ReadWait) -> Result<ReadBatches> {
        let end = self.wait_readable(queue, offset, wait).await?;
        let mut out = ReadBatches { bytes: Vec::new(), next_offset: offset, end_offset: end };
        while out.next_offset < end {
            let entry = self.entry(queue, Offset(out.next_offset)).await?;
            if !out.bytes.is_empty() && out.bytes.len() + entry.size as usize > max_bytes {
                break;
            }
            let at = out.bytes.len();
            self.read_log(entry.position.0, entry.size as usize, &mut out.bytes).await?;
            let offset = out.next_offset;
            let generation = self.generation_at(entry.position)?;
            let checked = verify_in(&out.bytes[at..], generation).and_then(|header| {
                let holds = header.queue == queue.0
                    && header.base_offset <= offset
                    && offset < header.next_offset()
                    && header.length == entry.size;
                holds.then_some(header).ok_or("the batch does not hold the offset its index entry points at")
            });
            match checked {
                Ok(header) => {
                    out.next_offset = header.next_offset();
                    if header.attributes & ATTR_SEALED != 0 {
                        let plain =
                            crate::crypt::in_clear(self.config.keyring.as_deref(), &out.bytes[at..], entry.position.0)?;
                        let plain = plain.into_owned();
                        out.bytes.truncate(at);
                        out.bytes.extend_from_slice(&plain);
                    } else {
                        batch::to_wire(&mut out.bytes[at..], generation);
                    }
                }
                // The good batches before a damaged one are returned; a read
                // that starts at it is told which offsets it covers.
                Err(_) if at > 0 => {
                    out.bytes.truncate(at);
                    break;
                }
                Err(detail) => return Err(self.damaged(queue, offset, end, entry, detail).await?),
            }
        }
        Ok(out)
    }

    /// The error of a damaged batch at `entry`, read at `offset`: it names
    /// the offsets whose index entries point at that batch, so a reader can
    /// skip them.
    async fn damaged(
        &self,
        queue: QueueId,
        offset: u64,
        end: u64,
        entry: IndexEntry,
        detail: &'static str,
    ) -> Result<StorageError> {
        let (offset, end) = (Offset(offset), Offset(end));
        let start = self.state.borrow().queues.get(&queue).map_or(offset, |q| q.start());
        let mut first = offset;
        while first > start && self.entry(queue, first.back(1)).await?.position == entry.position {
            first = first.back(1);
        }
        let mut next = offset + 1;
        while next < end && self.entry(queue, next).await?.position == entry.position {
            next += 1;
        }
        add(&self.counters.corrupt_reads, 1);
        let (position, first_offset, next_offset) = (entry.position.0, first.0, next.0);
        Ok(StorageError::CorruptBatch { queue: queue.0, position, first_offset, next_offset, detail })
    }

    /// Returns the queue's readable end once `offset` is below it (or at once,
    /// if it is not and the caller does not wait).
    async fn wait_readable(&self, queue: QueueId, offset: u64, wait: ReadWait) -> Result<u64> {
        let at = Offset(offset);
        let deadline = match wait {
            ReadWait::No => None,
            ReadWait::Upto(d) => Some(std::time::Instant::now() + d),
        };
        loop {
            let arrivals = {
                let st = self.state.borrow();
                let q = st.queues.get(&queue).ok_or(StorageError::UnknownQueue(queue.0))?;
                if at < q.start() || at > q.visible() {
                    return Err(StorageError::OffsetOutOfRange {
                        queue: queue.0,
                        offset,
                        start: q.start().0,
                        end: q.visible().0,
                    });
                }
                if at < q.visible() || self.is_closed() {
                    return Ok(q.visible().0);
                }
                q.arrivals().clone()
            };
            let left = deadline.map(|d| d.saturating_duration_since(std::time::Instant::now())).unwrap_or_default();
            if left.is_zero() {
                return Ok(offset);
            }
            let _parked = self.parked_reads.park(queue);
            if !arrivals.wait_for(left).await {
                return Ok(offset);
            }
        }
    }

    /// The index entry of `offset`, from memory or from an index page.
    pub(crate) async fn entry(&self, queue: QueueId, offset: Offset) -> Result<IndexEntry> {
        let page = offset.0 / ENTRIES_PER_PAGE;
        let slot = (offset.0 % ENTRIES_PER_PAGE) as usize;
        let file = {
            let mut st = self.state.borrow_mut();
            let q = st.queues.get(&queue).ok_or(StorageError::UnknownQueue(queue.0))?;
            if let Some(e) = q.mem_entry(offset) {
                return Ok(e);
            }
            let file_base = offset.round_down(self.config.index_file_entries);
            let file = q.file(file_base).cloned();
            if let Some(bytes) = st.index_cache.get((queue, page)) {
                return Ok(IndexEntry::decode(bytes, slot));
            }
            file.ok_or_else(|| corrupt(0, "index file missing for a stored offset"))?
        };
        self.probes.read().map_err(|e| StorageError::io("reading index of queue", queue.to_string(), e))?;
        let in_file =
            (page * PAGE_BYTES) % (self.config.index_file_entries * crate::index::queue_index::ENTRY_BYTES as u64);
        let data = file
            .read_at_aligned(in_file, PAGE_BYTES as usize)
            .await
            .map_err(|e| StorageError::io("reading index of queue", queue.to_string(), e))?;
        add(&self.counters.index_page_reads, 1);
        let entry = IndexEntry::decode(&data, slot);
        if let Some(slot_bytes) = self.state.borrow_mut().index_cache.insert((queue, page)) {
            slot_bytes.copy_from_slice(&data);
        }
        Ok(entry)
    }

    /// Appends `len` log bytes at `pos` to `out`, from the cache or the disk.
    pub(crate) async fn read_log(&self, pos: u64, len: usize, out: &mut Vec<u8>) -> Result<()> {
        let chunk_bytes = self.config.cache_chunk_bytes as u64;
        let mut at = pos;
        let end = pos + len as u64;
        while at < end {
            let chunk = at / chunk_bytes;
            let hit = {
                let mut st = self.state.borrow_mut();
                match st.cache.get(chunk) {
                    Some(data) => {
                        let from = (at % chunk_bytes) as usize;
                        let to = (end.min((chunk + 1) * chunk_bytes) - chunk * chunk_bytes) as usize;
                        out.extend_from_slice(&data[from..to]);
                        at = chunk * chunk_bytes + to as u64;
                        true
                    }
                    None => false,
                }
            };
            if hit {
                add(&self.counters.cache_hits, 1);
            } else {
                add(&self.counters.cache_misses, 1);
                self.load_chunks(chunk).await?;
            }
        }
        Ok(())
    }

    /// The generation of the segment holding log position `pos`: the seed of
    /// the header CRCs of the batches there.
    pub(crate) fn generation_at(&self, pos: LogPos) -> Result<Generation> {
        let st = self.state.borrow();
        let segment = st.log.segment_at(pos).ok_or_else(|| corrupt(pos.0, "no segment holds this position"))?;
        Ok(segment.generation)
    }

    /// Reads `chunk` from its segment into the cache, plus the following chunks
    /// when the previous miss was the chunk just before (sequential reader).
    async fn load_chunks(&self, chunk: u64) -> Result<()> {
        let chunk_bytes = self.config.cache_chunk_bytes as u64;
        let (segment, count) = {
            let st = self.state.borrow();
            let segment = st
                .log
                .segment_at(LogPos(chunk * chunk_bytes))
                .ok_or_else(|| corrupt(chunk * chunk_bytes, "no segment holds this position"))?;
            let sequential = self.readahead.sequential(chunk);
            let segment_last = (segment.base + self.config.segment_bytes).chunk(chunk_bytes) - 1;
            // Never read ahead at or past the write frontier: those chunks are not complete on disk.
            let frontier = st.log.written_end().chunk(chunk_bytes);
            let ahead = if sequential { self.config.readahead_chunks as u64 } else { 0 };
            let last = (chunk + ahead).min(segment_last).min(frontier.saturating_sub(1)).max(chunk);
            (segment, last - chunk + 1)
        };
        let reads = (chunk..chunk + count).map(|c| {
            let segment = segment.clone();
            async move {
                self.probes.read().map_err(|e| StorageError::io("reading", &segment.path, e))?;
                let data = segment
                    .file
                    .read_at_aligned(LogPos(c * chunk_bytes) - segment.base, chunk_bytes as usize)
                    .await
                    .map_err(|e| StorageError::io("reading", &segment.path, e))?;
                Ok::<_, StorageError>((c, data))
            }
        });
        for result in join_all(reads).await {
            let (c, data) = result?;
            let mut st = self.state.borrow_mut();
            if st.cache.contains(c) {
                continue;
            }
            if let Some(slot) = st.cache.insert(c) {
                slot[..data.len()].copy_from_slice(&data);
            }
            if c != chunk {
                add(&self.counters.cache_readahead, 1);
            }
        }
        Ok(())
    }
}

/// Which chunk last missed the cache, to tell sequential readers (read ahead
/// for them) from random ones.
pub(crate) struct Readahead {
    last_miss: Cell<u64>,
}

impl Default for Readahead {
    fn default() -> Self {
        // No chunk follows it: the first miss is not sequential.
        Readahead { last_miss: Cell::new(u64::MAX - 1) }
    }
}

impl Readahead {
    /// Notes a miss of `chunk`; true if the last miss was the chunk before.
    pub fn sequential(&self, chunk: u64) -> bool {
        self.last_miss.replace(chunk) == chunk.wrapping_sub(1)
    }
}

/// Copies newly written log bytes at `pos` into the chunks that cache them. A
/// chunk that starts inside this write is created, unzeroed: the log fills it
/// in order and nothing reads past the written end; one that started earlier
/// is updated only if cached (the write frontier's chunk is pinned, so it is).
pub(crate) fn cache_write_through(cache: &mut ChunkCache<u64>, pos: LogPos, bytes: &[u8]) {
    let chunk_bytes = cache.chunk_bytes() as u64;
    let pos = pos.0;
    let mut at = pos;
    let end = pos + bytes.len() as u64;
    while at < end {
        let chunk = at / chunk_bytes;
        let chunk_end = ((chunk + 1) * chunk_bytes).min(end);
        let src = &bytes[(at - pos) as usize..(chunk_end - pos) as usize];
        let from = (at % chunk_bytes) as usize;
        let slot = if from == 0 { cache.insert_unzeroed(chunk) } else { cache.get_mut(chunk) };
        if let Some(slot) = slot {
            slot[from..from + src.len()].copy_from_slice(src);
        }
        at = chunk_end;
    }
}

fn corrupt(position: u64, detail: &str) -> StorageError {
    StorageError::Corruption { what: "log batch", position, detail: detail.to_string() }
}
