//! Message lookup by id and by key (RocketMQ's IndexFile, as sorted runs):
//! every appended record adds an entry (64-bit hash of its message id, and
//! of its key if it has one; queue; offset) to an in-memory tail, in log
//! order. A checkpoint writes the tail's entries below the checkpoint
//! position as a chunk file, `lookup/<from>-<to>.lkp` (log positions),
//! grouped into buckets by the top bits of their hash (a counting sort, about
//! 256 entries a bucket); recovery rebuilds the tail from the checkpoint on,
//! like the queue index. Each chunk keeps its bucket starts in memory, so a
//! lookup reads the one bucket per chunk that may hold the hash. (Chunks of
//! the first format, sorted by hash with a sparse index of every 256th hash,
//! are still read.)
//! Retention deletes the chunks whose whole range it removed. A hash match
//! is a candidate: the caller confirms it against the stored record.

use crate::error::{Result, StorageError};
use crate::fs;
use crate::position::QueueId;
use glommio::io::DmaFile;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// Chunks sorted by hash: header (magic, u64 count), entries, footer (the
/// first hash of every `BLOCK` entries, then the last hash).
const MAGIC_SORTED: &[u8; 8] = b"RMQLKP01";
/// Chunks grouped by bucket: header (magic, u64 count, u32 bucket bits, u32
/// zero), entries, footer (u32 start of every bucket, then the count).
const MAGIC_BUCKETED: &[u8; 8] = b"RMQLKP02";
const SORTED_HEADER_BYTES: usize = 16;
const HEADER_BYTES: usize = 24;
const ENTRY_BYTES: usize = 20;
/// Entries per block of a sorted chunk's sparse index.
const BLOCK: usize = 256;
/// Entries per bucket a chunk aims at: what a lookup reads per chunk.
const BUCKET_ENTRIES: usize = 256;

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

impl Entry {
    /// Appends the entry's `ENTRY_BYTES` file bytes: u64 hash, u32 queue, u64 offset.
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.hash.to_le_bytes());
        out.extend_from_slice(&self.queue.0.to_le_bytes());
        out.extend_from_slice(&self.offset.to_le_bytes());
    }

    /// The entry in the first `ENTRY_BYTES` of `bytes`.
    fn decode(bytes: &[u8]) -> Entry {
        Entry {
            hash: crate::batch::u64_at(bytes, 0),
            queue: QueueId(crate::batch::u32_at(bytes, 8)),
            offset: crate::batch::u64_at(bytes, 12),
        }
    }
}

/// A written chunk: its range and how to find a hash in it.
struct Chunk {
    path: PathBuf,
    /// Log positions [from, to) it covers.
    to: u64,
    layout: Layout,
}

/// Where a chunk's entries of one hash may be.
enum Layout {
    /// Entries grouped by the top `bits` bits of their hash; bucket `b`
    /// holds entries [starts[b], starts[b + 1]).
    Bucketed { bits: u32, starts: Vec<u32> },
    /// Entries sorted by hash (the first format): the first hash of every
    /// block, and the last hash.
    Sorted { count: usize, block_first: Vec<u64>, last_hash: u64 },
}

/// The bucket of `hash` among `1 << bits`.
fn bucket_of(hash: u64, bits: u32) -> usize {
    if bits == 0 {
        0
    } else {
        (hash >> (64 - bits)) as usize
    }
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
    full: Vec<Rc<Block>>,
    /// The block being filled.
    open: Block,
    chunks: BTreeMap<u64, Chunk>,
}

impl Lookup {
    /// Opens the chunks in `dir` (created if missing).
    pub async fn open(dir: PathBuf) -> Result<Lookup> {
        fs::create_dir(&dir).await?;
        let mut chunks = BTreeMap::new();
        for name in fs::list_dir(&dir).await? {
            let Some((from, to)) = parse_name(&name) else { continue };
            chunks.insert(from, Chunk::load(dir.join(&name), to).await?);
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
    pub fn chunk_builder(&self, position: u64) -> Option<ChunkBuilder> {
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
    pub fn remove_below(&mut self, log_start: u64) -> Vec<PathBuf> {
        let doomed: Vec<u64> = self.chunks.iter().filter(|(_, c)| c.to <= log_start).map(|(f, _)| *f).collect();
        doomed.into_iter().map(|from| self.chunks.remove(&from).expect("listed above").path).collect()
    }
}

impl Chunk {
    /// Opens a chunk by reading its header and its footer.
    async fn load(path: PathBuf, to: u64) -> Result<Chunk> {
        let bad = |detail: &str| StorageError::Corruption {
            what: "lookup chunk",
            position: 0,
            detail: format!("{}: {detail}", path.display()),
        };
        let io = |what, e: glommio::GlommioError<()>| StorageError::io(what, &path, e);
        let file = DmaFile::open(&path).await.map_err(|e| io("opening", e))?;
        let head = file.read_at(0, HEADER_BYTES).await.map_err(|e| io("reading", e))?;
        let sorted = head.len() >= SORTED_HEADER_BYTES && &head[..8] == MAGIC_SORTED;
        if !sorted && (head.len() < HEADER_BYTES || &head[..8] != MAGIC_BUCKETED) {
            return Err(bad("bad magic"));
        }
        let count = crate::batch::u64_at(&head, 8) as usize;
        let bits = if sorted { 0 } else { crate::batch::u32_at(&head, 16) };
        if bits > BUCKET_BITS_MAX {
            return Err(bad("bucket bits out of range"));
        }
        let (at, footer) = if sorted {
            (SORTED_HEADER_BYTES + count * ENTRY_BYTES, (count.div_ceil(BLOCK) + 1) * 8)
        } else {
            (HEADER_BYTES + count * ENTRY_BYTES, ((1 << bits) + 1) * 4)
        };
        let foot = file.read_at(at as u64, footer).await.map_err(|e| io("reading", e))?;
        let _ = file.close().await;
        if foot.len() < footer {
            return Err(bad("shorter than its entry count"));
        }
        let layout = if sorted {
            let mut hashes: Vec<u64> = foot.chunks_exact(8).map(|c| crate::batch::u64_at(c, 0)).collect();
            let last_hash = hashes.pop().unwrap_or(0);
            Layout::Sorted { count, block_first: hashes, last_hash }
        } else {
            let starts: Vec<u32> = foot.chunks_exact(4).map(|c| crate::batch::u32_at(c, 0)).collect();
            if starts.windows(2).any(|w| w[0] > w[1]) || starts.last() != Some(&(count as u32)) {
                return Err(bad("bucket starts out of order"));
            }
            Layout::Bucketed { bits, starts }
        };
        Ok(Chunk { path, to, layout })
    }

    /// The entries to read that may hold `hash`, if any.
    fn block_read(&self, hash: u64) -> Option<BlockRead> {
        let (first, upto, header) = match &self.layout {
            Layout::Bucketed { bits, starts } => {
                let b = bucket_of(hash, *bits);
                (starts[b] as usize, starts[b + 1] as usize, HEADER_BYTES)
            }
            Layout::Sorted { count, block_first, last_hash } => {
                if *count == 0 || hash < block_first[0] || hash > *last_hash {
                    return None;
                }
                // Blocks from the one where a run of `hash` may begin (equal
                // hashes may span blocks) to the last starting at or before it.
                let last = block_first.partition_point(|&f| f <= hash).max(1) - 1;
                let first = block_first[..=last].partition_point(|&f| f < hash).saturating_sub(1);
                (first * BLOCK, ((last + 1) * BLOCK).min(*count), SORTED_HEADER_BYTES)
            }
        };
        let at = (header + first * ENTRY_BYTES) as u64;
        (upto > first).then(|| BlockRead { path: self.path.clone(), at, len: (upto - first) * ENTRY_BYTES, hash })
    }
}

/// Entries spread into buckets in one step of a chunk build (~0.2 ms).
const BUILD_STEP_ENTRIES: usize = 16 * 1024;
/// At most 1M buckets (4 MiB of bucket starts in memory).
const BUCKET_BITS_MAX: u32 = 20;
/// Entries encoded at a time while the chunk file is written.
const STAGE_ENTRIES: usize = 256;

/// Builds a chunk on the shard's thread in steps of bounded work, the shard
/// serving appends and reads between them, then makes the file's bytes piece
/// by piece as they are written: entries are spread into buckets by the top
/// bits of their hash and written bucket after bucket. No whole-chunk buffer:
/// a 20 MB one, once malloc had raised its mmap threshold, was zeroed and
/// page-faulted in one go (an 18-20 ms stall at every checkpoint after the
/// first). One sort of a checkpoint's 1M entries took tens of ms; on a thread
/// of its own, even at the lowest priority, it held the shard's core for
/// 4 ms at a time.
pub(crate) struct ChunkBuilder {
    path: PathBuf,
    from: u64,
    to: u64,
    blocks: Vec<Rc<Block>>,
    /// The next entry to spread: (block, index in it).
    spread: (usize, usize),
    bits: u32,
    buckets: Vec<Vec<Entry>>,
    /// Start of every bucket in the file's entries, then their count; set
    /// once every entry is spread.
    starts: Vec<u32>,
    /// The next entry to write: (bucket, index in it).
    written: (usize, usize),
    footer_staged: bool,
    /// Bytes made and not yet handed out, from `staged_at`.
    staged: Vec<u8>,
    staged_at: usize,
}

impl ChunkBuilder {
    fn new(dir: &Path, from: u64, to: u64, blocks: Vec<Rc<Block>>) -> ChunkBuilder {
        let total: usize = blocks.iter().map(|b| b.len()).sum();
        let bits = (total / BUCKET_ENTRIES).next_power_of_two().trailing_zeros().min(BUCKET_BITS_MAX);
        ChunkBuilder {
            path: dir.join(format!("{from:020}-{to:020}.lkp")),
            from,
            to,
            blocks,
            spread: (0, 0),
            bits,
            // Empty: buckets grow as entries are spread, step by step (sizing
            // 4096 of them up front took 15 ms on the shard's thread).
            buckets: (0..1 << bits).map(|_| Vec::new()).collect(),
            starts: Vec::new(),
            written: (0, 0),
            footer_staged: false,
            staged: Vec::with_capacity(STAGE_ENTRIES * ENTRY_BYTES),
            staged_at: 0,
        }
    }

    /// Spreads up to a step's worth of the entries in range into their
    /// buckets; true once every entry is spread.
    pub fn step(&mut self) -> bool {
        let mut budget = BUILD_STEP_ENTRIES;
        while budget > 0 && self.spread.0 < self.blocks.len() {
            let block = self.blocks[self.spread.0].clone();
            let (start, end) = (self.spread.1, (self.spread.1 + budget).min(block.len()));
            for (position, entry) in &block[start..end] {
                if (self.from..self.to).contains(position) {
                    self.buckets[bucket_of(entry.hash, self.bits)].push(*entry);
                }
            }
            budget -= (end - start).max(1);
            self.spread = if end == block.len() { (self.spread.0 + 1, 0) } else { (self.spread.0, end) };
        }
        let done = self.spread.0 == self.blocks.len();
        if done && self.starts.is_empty() {
            self.spread_done();
        }
        done
    }

    /// Bucket starts, and the header staged as the file's first bytes.
    fn spread_done(&mut self) {
        let mut next = 0u32;
        self.starts = std::iter::once(0)
            .chain(self.buckets.iter().map(|b| {
                next += b.len() as u32;
                next
            }))
            .collect();
        self.staged.extend_from_slice(MAGIC_BUCKETED);
        self.staged.extend_from_slice(&u64::from(next).to_le_bytes());
        self.staged.extend_from_slice(&self.bits.to_le_bytes());
        self.staged.extend_from_slice(&0u32.to_le_bytes());
    }

    /// Puts the next bytes of the chunk file into `out` (after the last
    /// step); how many, 0 at the end.
    pub fn fill(&mut self, out: &mut [u8]) -> usize {
        debug_assert!(!self.starts.is_empty(), "every entry spread first");
        let mut n = 0;
        while n < out.len() {
            if self.staged_at == self.staged.len() {
                self.staged.clear();
                self.staged_at = 0;
                if !self.stage() {
                    break;
                }
                continue;
            }
            let take = (self.staged.len() - self.staged_at).min(out.len() - n);
            out[n..n + take].copy_from_slice(&self.staged[self.staged_at..self.staged_at + take]);
            n += take;
            self.staged_at += take;
        }
        n
    }

    /// Stages the next entries of the current bucket, or the footer after
    /// the last bucket; false once everything was staged.
    fn stage(&mut self) -> bool {
        let (b, i) = self.written;
        let Some(bucket) = self.buckets.get(b) else {
            if self.footer_staged {
                return false;
            }
            self.starts.iter().for_each(|s| self.staged.extend_from_slice(&s.to_le_bytes()));
            self.footer_staged = true;
            return true;
        };
        let end = (i + STAGE_ENTRIES).min(bucket.len());
        for e in &bucket[i..end] {
            e.encode(&mut self.staged);
        }
        self.written = if end == bucket.len() { (b + 1, 0) } else { (b, end) };
        true
    }

    /// Writes the chunk file (no shard state is borrowed meanwhile); the
    /// chunk to hand to `chunk_written`.
    pub async fn write(mut self) -> Result<WrittenChunk> {
        let dir = self.path.parent().expect("chunks live in the lookup directory").to_path_buf();
        let name = self.path.file_name().expect("a file name").to_string_lossy().into_owned();
        fs::write_atomic_from(&dir, &name, |out| self.fill(out)).await?;
        let layout = Layout::Bucketed { bits: self.bits, starts: self.starts };
        Ok(WrittenChunk { from: self.from, chunk: Chunk { path: self.path, to: self.to, layout } })
    }
}

/// A chunk file written from the tail.
pub(crate) struct WrittenChunk {
    from: u64,
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
        let entries = data.chunks_exact(ENTRY_BYTES).map(Entry::decode);
        out.extend(entries.filter(|e| e.hash == self.hash).map(|e| (e.queue, e.offset)));
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

#[cfg(test)]
mod tests {
    use super::*;

    /// 70k entries over two blocks at log positions 0, 10, 20, ...: hashes
    /// spread over the whole range, a run of one repeated hash, and both
    /// extremes.
    fn sample() -> Vec<Rc<Block>> {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut all: Block = (0..70_000u64)
            .map(|i| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let hash = match i {
                    _ if i % 10 == 0 => 42,
                    1 => u64::MAX,
                    2 => 0,
                    _ => x,
                };
                (i * 10, Entry { hash, queue: QueueId((i % 3) as u32), offset: i })
            })
            .collect();
        let second = all.split_off(TAIL_BLOCK);
        vec![Rc::new(all), Rc::new(second)]
    }

    /// The (queue, offset) of every entry with `hash` in [from, to).
    fn expected(blocks: &[Rc<Block>], from: u64, to: u64, hash: u64) -> Vec<(QueueId, u64)> {
        let all = blocks.iter().flat_map(|b| b.iter());
        let mut out: Vec<_> =
            all.filter(|(p, e)| (from..to).contains(p) && e.hash == hash).map(|(_, e)| (e.queue, e.offset)).collect();
        out.sort_unstable();
        out
    }

    /// A chunk file of the first format (sorted by hash, sparse index).
    fn sorted_chunk(blocks: &[Rc<Block>], from: u64, to: u64) -> Vec<u8> {
        let mut entries: Vec<Entry> =
            blocks.iter().flat_map(|b| b.iter()).filter(|(p, _)| (from..to).contains(p)).map(|(_, e)| *e).collect();
        entries.sort_unstable();
        let mut bytes = MAGIC_SORTED.to_vec();
        bytes.extend_from_slice(&(entries.len() as u64).to_le_bytes());
        for e in &entries {
            e.encode(&mut bytes);
        }
        for e in entries.iter().step_by(BLOCK) {
            bytes.extend_from_slice(&e.hash.to_le_bytes());
        }
        bytes.extend_from_slice(&entries.last().map_or(0, |e| e.hash).to_le_bytes());
        bytes
    }

    /// A built chunk's file bytes, taken in pieces of an odd size (entries
    /// straddle pieces), and the number of build steps.
    fn build(blocks: Vec<Rc<Block>>, dir: &Path, from: u64, to: u64) -> (ChunkBuilder, Vec<u8>, usize) {
        let mut builder = ChunkBuilder::new(dir, from, to, blocks);
        let mut steps = 1;
        while !builder.step() {
            steps += 1;
        }
        let (mut bytes, mut piece) = (Vec::new(), [0u8; 1000]);
        loop {
            let n = builder.fill(&mut piece);
            bytes.extend_from_slice(&piece[..n]);
            if n < piece.len() {
                break;
            }
        }
        assert_eq!(builder.fill(&mut piece), 0, "nothing after the end");
        (builder, bytes, steps)
    }

    /// Writes `bytes` as a chunk file, loads it and looks up each hash.
    fn lookups(dir: &Path, bytes: Vec<u8>, hashes: Vec<u64>) -> Result<Vec<Vec<(QueueId, u64)>>> {
        let path = dir.join("00000000000000000000-00000000000000000001.lkp");
        std::fs::write(&path, bytes).unwrap();
        glommio::LocalExecutor::default().run(async move {
            let chunk = Chunk::load(path, 1).await?;
            let mut out = Vec::new();
            for hash in hashes {
                let mut found = Vec::new();
                if let Some(read) = chunk.block_read(hash) {
                    read.run(&mut found).await?;
                }
                found.sort_unstable();
                out.push(found);
            }
            Ok(out)
        })
    }

    #[test]
    fn a_stepwise_build_groups_every_entry_in_range_by_bucket() {
        let blocks = sample();
        let (from, to) = (50, 699_000);
        let (chunk, bytes, steps) = build(blocks.clone(), Path::new("/x"), from, to);
        assert!(steps >= 5, "70k entries, 16k a step: {steps} steps");
        assert_eq!(chunk.path, Path::new("/x/00000000000000000050-00000000000000699000.lkp"));
        let (bits, starts) = (&chunk.bits, &chunk.starts);
        assert_eq!(*bits, 9, "70k entries / 256 a bucket = 273 buckets, rounded up to a power of two");
        assert_eq!(bytes.len(), HEADER_BYTES + 69_895 * ENTRY_BYTES + starts.len() * 4);
        assert_eq!(*starts.last().unwrap(), 69_895, "the entries at positions [50, 699000)");
        let mut placed = Vec::new();
        for b in 0..starts.len() - 1 {
            for i in starts[b] as usize..starts[b + 1] as usize {
                let at = HEADER_BYTES + i * ENTRY_BYTES;
                let entry = Entry::decode(&bytes[at..at + ENTRY_BYTES]);
                assert_eq!(bucket_of(entry.hash, *bits), b, "entry {i} lies in its hash's bucket");
                placed.push(entry);
            }
        }
        placed.sort_unstable();
        let mut all: Vec<Entry> =
            blocks.iter().flat_map(|b| b.iter()).filter(|(p, _)| (from..to).contains(p)).map(|(_, e)| *e).collect();
        all.sort_unstable();
        assert_eq!(placed, all, "each entry in range placed once");
    }

    #[test]
    fn lookups_find_every_entry_of_a_hash_in_both_chunk_formats() {
        let dir = tempfile::tempdir().unwrap();
        let blocks = sample();
        let (from, to) = (50, 699_000);
        let probe = |blocks: &[Rc<Block>]| {
            let mut hashes = vec![42, u64::MAX, 0, 7];
            hashes.extend(blocks[1].iter().step_by(997).map(|(_, e)| e.hash));
            hashes
        };
        let want: Vec<_> = probe(&blocks).into_iter().map(|h| expected(&blocks, from, to, h)).collect();
        assert_eq!(want[0].len(), 6_989, "the repeated hash, in range");
        let (_, built, _) = build(blocks.clone(), dir.path(), from, to);
        assert_eq!(lookups(dir.path(), built, probe(&blocks)).unwrap(), want);
        assert_eq!(lookups(dir.path(), sorted_chunk(&blocks, from, to), probe(&blocks)).unwrap(), want);
        let (_, empty, _) = build(blocks.clone(), dir.path(), 800_000, 900_000);
        assert!(lookups(dir.path(), empty, vec![42]).unwrap()[0].is_empty());
    }

    #[test]
    fn a_damaged_chunk_gets_a_corruption_error() {
        let dir = tempfile::tempdir().unwrap();
        let (_, built, _) = build(sample(), dir.path(), 0, 1000);
        let mut swapped = built.clone();
        let footer = swapped.len() - 4 * 3;
        swapped[footer..footer + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        let mut magic = built;
        magic[0] = b'X';
        for bytes in [swapped, magic] {
            let err = lookups(dir.path(), bytes, vec![1]).unwrap_err();
            assert!(matches!(err, StorageError::Corruption { what: "lookup chunk", .. }), "{err}");
        }
    }
}
