//! A lookup chunk file: `<from>-<to>.lkp`, the entries of log positions
//! [from, to) grouped by hash bucket, and how one hash is found in it.

use super::build::BUCKET_BITS_MAX;
use super::{Entry, BLOCK, ENTRY_BYTES, HEADER_BYTES, MAGIC_BUCKETED, MAGIC_SORTED, SORTED_HEADER_BYTES};
use crate::error::{Result, StorageError};
use crate::position::QueueId;
use glommio::io::DmaFile;
use std::path::{Path, PathBuf};

/// A written chunk: its range and how to find a hash in it.
pub(super) struct Chunk {
    pub(super) path: PathBuf,
    /// Log positions [from, to) it covers.
    pub(super) to: u64,
    pub(super) layout: Layout,
}

/// Where a chunk's entries of one hash may be.
pub(super) enum Layout {
    /// Entries grouped by the top `bits` bits of their hash; bucket `b`
    /// holds entries [starts[b], starts[b + 1]).
    Bucketed { bits: u32, starts: Vec<u32> },
    /// Entries sorted by hash (the first format): the first hash of every
    /// block, and the last hash.
    Sorted { count: usize, block_first: Vec<u64>, last_hash: u64 },
}

/// The bucket of `hash` among `1 << bits`.
pub(super) fn bucket_of(hash: u64, bits: u32) -> usize {
    if bits == 0 {
        0
    } else {
        (hash >> (64 - bits)) as usize
    }
}

impl Chunk {
    /// Opens a chunk by reading its header and its footer.
    pub(super) async fn load(path: PathBuf, to: u64) -> Result<Chunk> {
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
    pub(super) fn block_read(&self, hash: u64) -> Option<BlockRead> {
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

pub(super) fn parse_name(name: &str) -> Option<(u64, u64)> {
    let (from, to) = name.strip_suffix(".lkp")?.split_once('-')?;
    (from.len() == 20 && to.len() == 20).then_some(())?;
    Some((from.parse().ok()?, to.parse().ok()?))
}

/// Lookup files live here, under the shard directory.
pub(crate) fn dir_of(shard_dir: &Path) -> PathBuf {
    shard_dir.join("lookup")
}
