//! Building a chunk file from the tail, in steps of bounded work.

use super::chunk::{bucket_of, Chunk, Layout};
use super::tail::Block;
use super::{Entry, BUCKET_ENTRIES, ENTRY_BYTES, MAGIC_BUCKETED};
use crate::error::Result;
use crate::fs;
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// Entries spread into buckets in one step of a chunk build (~0.2 ms).
const BUILD_STEP_ENTRIES: usize = 16 * 1024;
/// At most 1M buckets (4 MiB of bucket starts in memory).
pub(super) const BUCKET_BITS_MAX: u32 = 20;
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
    pub(super) fn new(dir: &Path, from: u64, to: u64, blocks: Vec<Rc<Block>>) -> ChunkBuilder {
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
    pub(super) from: u64,
    pub(super) chunk: Chunk,
}

#[cfg(test)]
mod tests {
    use super::super::chunk::{bucket_of, Chunk};
    use super::super::tail::TAIL_BLOCK;
    use super::super::{QueueId, BLOCK, HEADER_BYTES, MAGIC_SORTED};
    use super::*;
    use crate::error::StorageError;

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
