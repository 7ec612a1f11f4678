//! The lookup entries of appends since the last chunk, in memory, and the
//! chunks written so far.

use super::build::{ChunkBuilder, WrittenChunk};
use super::chunk::{parse_name, BlockRead, Chunk};
use super::recent::{BatchKey, RecentBatches, Stored};
use super::{id_hash, key_hash, Entry};
use crate::error::Result;
use crate::fs;
use crate::position::{LogPos, Offset, QueueId};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::rc::Rc;

/// Tail entries per block: appends fill a block allocated up front, so the
/// tail never reallocates or copies (a 32 MiB tail copied on the shard's
/// thread stalled every append for milliseconds).
pub(super) const TAIL_BLOCK: usize = 64 * 1024;

/// (log position, entry), in log order.
pub(super) type Block = Vec<(u64, Entry)>;

/// A shard's lookup entries: the in-memory tail and the written chunks,
/// and the recent batches (idempotent appends).
#[derive(Default)]
pub(crate) struct Lookup {
    dir: PathBuf,
    recent: RecentBatches,
    /// Full blocks of the tail, shared with a chunk being built.
    full: Vec<Rc<Block>>,
    /// The block being filled.
    open: Block,
    chunks: BTreeMap<u64, Chunk>,
}

impl Lookup {
    /// Opens the chunks in `dir` (created if missing); remembers the last
    /// `recent_batches` batches.
    pub async fn open(dir: PathBuf, recent_batches: usize) -> Result<Lookup> {
        fs::create_dir(&dir).await?;
        let mut chunks = BTreeMap::new();
        for name in fs::list_dir(&dir).await? {
            let Some((from, to)) = parse_name(&name) else { continue };
            chunks.insert(from, Chunk::load(dir.join(&name), to).await?);
        }
        let recent = RecentBatches::new(recent_batches);
        Ok(Lookup { dir, recent, full: Vec::new(), open: Block::with_capacity(TAIL_BLOCK), chunks })
    }

    /// Adds the entries of one record at log position `pos`.
    pub fn note(&mut self, pos: LogPos, queue: QueueId, offset: Offset, id: &[u8; 16], key: &[u8]) {
        let offset = offset.0;
        self.push((pos.0, Entry { hash: id_hash(id), queue, offset }));
        if !key.is_empty() {
            self.push((pos.0, Entry { hash: key_hash(key), queue, offset }));
        }
    }

    /// Remembers a batch just placed or recovered (None: one no client retries).
    pub fn note_batch(&mut self, key: Option<BatchKey>, stored: Stored) {
        if let Some(key) = key {
            self.recent.note(key, stored);
        }
    }

    /// The recent batches, as a clean stop saves them.
    pub fn recent_saved(&self) -> (Vec<u8>, PathBuf) {
        (self.recent.encode(), self.dir.clone())
    }

    /// Loads the recent batches a clean stop saved, for a log ending at `end`.
    pub async fn load_recent(&mut self, end: LogPos) -> Result<usize> {
        let dir = self.dir.clone();
        self.recent.load(&dir, end).await
    }

    /// Where the batch of `key` was stored, if it is one of the recent ones.
    pub fn stored_before(&self, key: Option<&BatchKey>) -> Option<Stored> {
        self.recent.find(key?)
    }

    fn push(&mut self, entry: (u64, Entry)) {
        if self.open.len() == TAIL_BLOCK {
            let full = std::mem::replace(&mut self.open, Block::with_capacity(TAIL_BLOCK));
            self.full.push(Rc::new(full));
        }
        self.open.push(entry);
    }

    fn tail(&self) -> impl Iterator<Item = &(u64, Entry)> {
        self.full.iter().flat_map(|b| b.iter()).chain(self.open.iter())
    }

    /// A builder of the chunk of the tail's entries in [last chunk's end,
    /// `position`): the full blocks (shared, not copied) and a copy of the
    /// open block's part. None if there is nothing to write.
    pub fn chunk_builder(&self, position: LogPos) -> Option<ChunkBuilder> {
        let position = position.0;
        let from = self.chunks.values().map(|c| c.to).max().unwrap_or(0);
        let open: Block = self.open.iter().take_while(|(p, _)| *p < position).copied().collect();
        let any = self.full.iter().any(|b| b.first().is_some_and(|(p, _)| *p < position)) || !open.is_empty();
        let blocks = self.full.iter().cloned().chain([Rc::new(open)]).collect();
        (any && position > from).then(|| ChunkBuilder::new(&self.dir, from, position, blocks))
    }

    /// Records a written chunk and drops the tail blocks it covers whole (a
    /// block it covers in part stays; lookups drop the duplicates).
    pub fn chunk_written(&mut self, written: WrittenChunk) {
        let to = written.chunk.to;
        self.full.retain(|b| b.last().is_some_and(|(p, _)| *p >= to));
        if self.full.is_empty() && self.open.last().is_some_and(|(p, _)| *p < to) {
            self.open.retain(|(p, _)| *p >= to);
        }
        self.chunks.insert(written.from, written.chunk);
    }

    /// What a lookup of `hash` must read (chunk blocks) and the tail's matches.
    pub fn plan(&self, hash: u64) -> (Vec<BlockRead>, Vec<(QueueId, u64)>) {
        let reads = self.chunks.values().filter_map(|c| c.block_read(hash)).collect();
        let tail = self.tail().filter(|(_, e)| e.hash == hash).map(|(_, e)| (e.queue, e.offset)).collect();
        (reads, tail)
    }

    /// Drops the chunks that only cover log positions below `log_start`;
    /// returns their files, for the caller to delete.
    pub fn remove_below(&mut self, log_start: LogPos) -> Vec<PathBuf> {
        let log_start = log_start.0;
        let doomed: Vec<u64> = self.chunks.iter().filter(|(_, c)| c.to <= log_start).map(|(f, _)| *f).collect();
        doomed.into_iter().map(|from| self.chunks.remove(&from).expect("listed above").path).collect()
    }
}
