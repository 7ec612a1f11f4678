//! Message lookup by id and by key (RocketMQ's IndexFile, as sorted runs):
//! every appended record adds an entry (64-bit hash of its message id, and
//! of its key if it has one; queue; offset) to an in-memory tail, in log
//! order. A checkpoint writes the tail's entries below the checkpoint
//! position as a chunk file, `lookup/<from>-<to>.lkp` (log positions),
//! sorted by hash; recovery rebuilds the tail from the checkpoint on, like
//! the queue index. Each chunk keeps a sparse index in memory (every 256th
//! hash), so a lookup reads one block per chunk that may hold the hash.
//! Retention deletes the chunks whose whole range it removed. A hash match
//! is a candidate: the caller confirms it against the stored record.

use crate::error::{Result, StorageError};
use crate::fs;
use crate::position::QueueId;
use glommio::io::DmaFile;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

const MAGIC: &[u8; 8] = b"RMQLKP01";
const HEADER_BYTES: usize = 16;
const ENTRY_BYTES: usize = 20;
/// Entries per block of the sparse index.
const BLOCK: usize = 256;

/// The lookup hash of a message id.
pub fn id_hash(id: &[u8; 16]) -> u64 {
    fnv1a(b'i', id)
}

/// The lookup hash of a message key (queues of every topic share it; the
/// caller filters by queue).
pub fn key_hash(key: &[u8]) -> u64 {
    fnv1a(b'k', key)
}

fn fnv1a(kind: u8, bytes: &[u8]) -> u64 {
    std::iter::once(&kind)
        .chain(bytes)
        .fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3))
}

/// One entry: a hash and where a record with it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Entry {
    pub hash: u64,
    pub queue: QueueId,
    pub offset: u64,
}

/// A written chunk: its range and sparse index.
struct Chunk {
    path: PathBuf,
    /// Log positions [from, to) it covers.
    to: u64,
    count: usize,
    /// First hash of every block.
    block_first: Vec<u64>,
    last_hash: u64,
}

/// Tail entries per block: appends fill a block allocated up front, so the
/// tail never reallocates or copies (a 32 MiB tail copied on the shard's
/// thread stalled every append for milliseconds).
const TAIL_BLOCK: usize = 64 * 1024;

/// (log position, entry), in log order.
type Block = Vec<(u64, Entry)>;

/// A shard's lookup entries: the in-memory tail and the written chunks.
#[derive(Default)]
pub(crate) struct Lookup {
    dir: PathBuf,
    /// Full blocks of the tail, shared with a chunk being built.
    full: Vec<Arc<Block>>,
    /// The block being filled.
    open: Block,
    chunks: BTreeMap<u64, Chunk>,
}

impl Lookup {
    /// Opens the chunks in `dir` (created if missing).
    pub async fn open(dir: PathBuf) -> Result<Lookup> {
        fs::create_dir(&dir).await?;
        let mut chunks = BTreeMap::new();
        for entry in std::fs::read_dir(&dir).map_err(|e| StorageError::io("listing", &dir, e))? {
            let entry = entry.map_err(|e| StorageError::io("listing", &dir, e))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some((from, to)) = parse_name(&name) else { continue };
            chunks.insert(from, Chunk::load(entry.path(), to).await?);
        }
        Ok(Lookup { dir, full: Vec::new(), open: Block::with_capacity(TAIL_BLOCK), chunks })
    }

    /// Adds the entries of one record at log position `pos`.
    pub fn note(&mut self, pos: u64, queue: QueueId, offset: u64, id: &[u8; 16], key: &[u8]) {
        self.push((pos, Entry { hash: id_hash(id), queue, offset }));
        if !key.is_empty() {
            self.push((pos, Entry { hash: key_hash(key), queue, offset }));
        }
    }

    fn push(&mut self, entry: (u64, Entry)) {
        if self.open.len() == TAIL_BLOCK {
            let full = std::mem::replace(&mut self.open, Block::with_capacity(TAIL_BLOCK));
            self.full.push(Arc::new(full));
        }
        self.open.push(entry);
    }

    fn tail(&self) -> impl Iterator<Item = &(u64, Entry)> {
        self.full.iter().flat_map(|b| b.iter()).chain(self.open.iter())
    }

    /// What a chunk of the tail's entries in [last chunk's end, `position`)
    /// is built from: the full blocks (shared, not copied) and a copy of the
    /// open block's part. None if there is nothing to write.
    pub fn chunk_source(&self, position: u64) -> Option<ChunkSource> {
        let from = self.chunks.values().map(|c| c.to).max().unwrap_or(0);
        let open: Block = self.open.iter().take_while(|(p, _)| *p < position).copied().collect();
        let any = self.full.iter().any(|b| b.first().is_some_and(|(p, _)| *p < position)) || !open.is_empty();
        (any && position > from).then(|| ChunkSource { from, to: position, full: self.full.clone(), open })
    }

    /// Sorts and encodes entries covering [from, to) as a chunk. Costly for
    /// big chunks (a sort of every entry): the checkpoint runs it off the
    /// shard's thread.
    pub fn build_chunk(dir: &Path, source: ChunkSource) -> PendingChunk {
        let ChunkSource { from, to, full, open } = source;
        let in_range = |(p, _): &&(u64, Entry)| (from..to).contains(p);
        let mut entries: Vec<Entry> =
            full.iter().flat_map(|b| b.iter()).chain(open.iter()).filter(in_range).map(|(_, e)| *e).collect();
        entries.sort_unstable();
        let mut bytes = Vec::with_capacity(HEADER_BYTES + entries.len() * ENTRY_BYTES);
        bytes.extend_from_slice(MAGIC);
        bytes.extend_from_slice(&(entries.len() as u64).to_le_bytes());
        for e in &entries {
            bytes.extend_from_slice(&e.hash.to_le_bytes());
            bytes.extend_from_slice(&e.queue.0.to_le_bytes());
            bytes.extend_from_slice(&e.offset.to_le_bytes());
        }
        let chunk = Chunk {
            path: dir.join(format!("{from:020}-{to:020}.lkp")),
            to,
            count: entries.len(),
            block_first: entries.iter().step_by(BLOCK).map(|e| e.hash).collect(),
            last_hash: entries.last().map_or(0, |e| e.hash),
        };
        // Footer: the sparse index, so opening a chunk reads only it.
        chunk.block_first.iter().chain([&chunk.last_hash]).for_each(|h| bytes.extend_from_slice(&h.to_le_bytes()));
        PendingChunk { from, bytes, chunk }
    }

    /// Writes a chunk made by `build_chunk` (no state is borrowed meanwhile).
    pub async fn write(dir: &Path, pending: &PendingChunk) -> Result<()> {
        let name = pending.chunk.path.file_name().expect("a file name").to_string_lossy().into_owned();
        fs::write_atomic(dir, &name, &pending.bytes).await
    }

    /// Records a written chunk and drops the tail blocks it covers whole (a
    /// block it covers in part stays; lookups drop the duplicates).
    pub fn chunk_written(&mut self, pending: PendingChunk) {
        let to = pending.chunk.to;
        self.full.retain(|b| b.last().is_some_and(|(p, _)| *p >= to));
        if self.full.is_empty() && self.open.last().is_some_and(|(p, _)| *p < to) {
            self.open.retain(|(p, _)| *p >= to);
        }
        self.chunks.insert(pending.from, pending.chunk);
    }

    /// The directory of the chunk files.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// What a lookup of `hash` must read (chunk blocks) and the tail's matches.
    pub fn plan(&self, hash: u64) -> (Vec<BlockRead>, Vec<(QueueId, u64)>) {
        let reads = self.chunks.values().filter_map(|c| c.block_read(hash)).collect();
        let tail = self.tail().filter(|(_, e)| e.hash == hash).map(|(_, e)| (e.queue, e.offset)).collect();
        (reads, tail)
    }

    /// Deletes the chunks that only cover log positions below `log_start`.
    pub fn remove_below(&mut self, log_start: u64) -> Result<()> {
        let doomed: Vec<u64> = self.chunks.iter().filter(|(_, c)| c.to <= log_start).map(|(f, _)| *f).collect();
        for from in doomed {
            let chunk = self.chunks.remove(&from).expect("listed above");
            std::fs::remove_file(&chunk.path).map_err(|e| StorageError::io("removing", &chunk.path, e))?;
        }
        Ok(())
    }
}

impl Chunk {
    /// Opens a chunk by reading its header and its footer (the sparse index).
    async fn load(path: PathBuf, to: u64) -> Result<Chunk> {
        let bad = |detail: &str| StorageError::Corruption {
            what: "lookup chunk",
            position: 0,
            detail: format!("{}: {detail}", path.display()),
        };
        let io = |what, e: glommio::GlommioError<()>| StorageError::io(what, &path, e);
        let file = DmaFile::open(&path).await.map_err(|e| io("opening", e))?;
        let head = file.read_at(0, HEADER_BYTES).await.map_err(|e| io("reading", e))?;
        if head.len() < HEADER_BYTES || &head[..8] != MAGIC {
            return Err(bad("bad magic"));
        }
        let count = u64::from_le_bytes(head[8..16].try_into().expect("8 bytes")) as usize;
        let blocks = count.div_ceil(BLOCK);
        let at = (HEADER_BYTES + count * ENTRY_BYTES) as u64;
        let foot = file.read_at(at, (blocks + 1) * 8).await.map_err(|e| io("reading", e))?;
        let _ = file.close().await;
        if foot.len() < (blocks + 1) * 8 {
            return Err(bad("shorter than its entry count"));
        }
        let mut hashes: Vec<u64> =
            foot.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes"))).collect();
        let last_hash = hashes.pop().unwrap_or(0);
        Ok(Chunk { path, to, count, block_first: hashes, last_hash })
    }

    /// The blocks that may hold `hash`, if any.
    fn block_read(&self, hash: u64) -> Option<BlockRead> {
        if self.count == 0 || hash < self.block_first[0] || hash > self.last_hash {
            return None;
        }
        // Blocks from the one where a run of `hash` may begin (equal hashes
        // may span blocks) to the last starting at or before it.
        let last = self.block_first.partition_point(|&f| f <= hash).max(1) - 1;
        let first = self.block_first[..=last].partition_point(|&f| f < hash).saturating_sub(1);
        let upto = ((last + 1) * BLOCK).min(self.count);
        let at = (HEADER_BYTES + first * BLOCK * ENTRY_BYTES) as u64;
        Some(BlockRead { path: self.path.clone(), at, len: (upto - first * BLOCK) * ENTRY_BYTES, hash })
    }
}

/// The tail entries a chunk is built from (off the shard's thread).
pub(crate) struct ChunkSource {
    from: u64,
    to: u64,
    full: Vec<Arc<Block>>,
    open: Block,
}

/// A chunk made from the tail, to be written.
pub(crate) struct PendingChunk {
    from: u64,
    bytes: Vec<u8>,
    chunk: Chunk,
}

/// Entries of a chunk file to read for one hash.
pub(crate) struct BlockRead {
    path: PathBuf,
    at: u64,
    len: usize,
    hash: u64,
}

impl BlockRead {
    /// Reads the blocks and adds the entries with the hash to `out`.
    pub async fn run(&self, out: &mut Vec<(QueueId, u64)>) -> Result<()> {
        let io = |what, e: glommio::GlommioError<()>| StorageError::io(what, &self.path, e);
        let file = DmaFile::open(&self.path).await.map_err(|e| io("opening", e))?;
        let data = file.read_at(self.at, self.len).await.map_err(|e| io("reading", e))?;
        let _ = file.close().await;
        for e in data.chunks_exact(ENTRY_BYTES) {
            if u64::from_le_bytes(e[..8].try_into().expect("8 bytes")) == self.hash {
                let queue = QueueId(u32::from_le_bytes(e[8..12].try_into().expect("4 bytes")));
                out.push((queue, u64::from_le_bytes(e[12..20].try_into().expect("8 bytes"))));
            }
        }
        Ok(())
    }
}

fn parse_name(name: &str) -> Option<(u64, u64)> {
    let (from, to) = name.strip_suffix(".lkp")?.split_once('-')?;
    (from.len() == 20 && to.len() == 20).then_some(())?;
    Some((from.parse().ok()?, to.parse().ok()?))
}

/// Lookup files live here, under the shard directory.
pub(crate) fn dir_of(shard_dir: &Path) -> PathBuf {
    shard_dir.join("lookup")
}
