//! Retired segment files kept for recycling: retention renames a segment it
//! retires into the pool instead of deleting it, and the preallocator makes
//! the next segment from a pooled file (see `Segment::recycle`), so a log
//! whose retention is active never zero-fills a new segment. The pool holds
//! at most `ShardConfig::segment_pool_max` files; retention deletes the rest.

use crate::batch::Generation;
use crate::error::Result;
use crate::fs;
use crate::log::segment::{parse_pooled_name, pooled_name, Segment};
use crate::position::LogPos;
use std::collections::VecDeque;
use std::path::{Path, PathBuf};

/// A retired segment file in the pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Pooled {
    pub path: PathBuf,
    /// The life it was retired from: its batches are of this generation or older.
    pub generation: Generation,
}

impl Pooled {
    /// Where the segment based at `base` in its life `generation` goes when retired.
    pub fn retired(dir: &Path, base: LogPos, generation: Generation) -> Pooled {
        Pooled { path: dir.join(pooled_name(base.0, generation)), generation }
    }
}

/// Renames a retired segment's file to its pooled name (the life it is
/// retired from); the caller puts it into the pool and syncs the directory.
pub(crate) async fn rename_retired(dir: &Path, segment: &Segment) -> Result<Pooled> {
    let pooled = Pooled::retired(dir, segment.base, segment.generation);
    let (from, to) = (segment.path.clone(), pooled.path.clone());
    fs::blocking("pooling a retired segment", &segment.path, move |_| std::fs::rename(&from, &to)).await?;
    Ok(pooled)
}

/// The pooled files, oldest retired first.
#[derive(Debug)]
pub(crate) struct SegmentPool {
    max: usize,
    files: VecDeque<Pooled>,
}

impl SegmentPool {
    pub fn new(max: usize) -> SegmentPool {
        SegmentPool { max, files: VecDeque::new() }
    }

    /// How many more files the pool takes.
    pub fn room(&self) -> usize {
        self.max - self.files.len()
    }

    /// Adds a retired file; gives it back when the pool is full.
    pub fn put(&mut self, pooled: Pooled) -> std::result::Result<(), Pooled> {
        if self.room() == 0 {
            return Err(pooled);
        }
        self.files.push_back(pooled);
        Ok(())
    }

    /// Takes a file to recycle.
    pub fn take(&mut self) -> Option<Pooled> {
        self.files.pop_front()
    }

    /// Files in the pool.
    pub fn len(&self) -> usize {
        self.files.len()
    }
}

/// The pool found in `dir` at recovery: the pooled files of `segment_bytes`,
/// up to `max`; files of another size (made under another configuration)
/// and files past the bound are deleted.
pub(crate) async fn load(dir: &Path, max: usize, segment_bytes: u64) -> Result<SegmentPool> {
    let mut pool = SegmentPool::new(max);
    let mut doomed = Vec::new();
    for (base, generation) in fs::list_numbered(dir, parse_pooled_name).await? {
        let pooled = Pooled::retired(dir, LogPos(base), generation);
        let path = pooled.path.clone();
        let len = fs::blocking("sizing a pooled segment", &path, |p| Ok(std::fs::metadata(p)?.len())).await?;
        if len != segment_bytes {
            doomed.push(pooled.path);
        } else if let Err(extra) = pool.put(pooled) {
            doomed.push(extra.path);
        }
    }
    if !doomed.is_empty() {
        tracing::info!(files = doomed.len(), "deleting pooled segments past the pool's bound or of another size");
        fs::remove_big_files("deleting a pooled segment", doomed).await?;
        fs::sync_dir(dir).await?;
    }
    Ok(pool)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pool_holds_up_to_its_bound_oldest_first() {
        let dir = Path::new("/shard");
        let mut pool = SegmentPool::new(2);
        let a = Pooled::retired(dir, LogPos(0), Generation(0));
        let b = Pooled::retired(dir, LogPos(1 << 20), Generation(3));
        let c = Pooled::retired(dir, LogPos(2 << 20), Generation(1));
        assert_eq!(a.path, Path::new("/shard/00000000000000000000.free"));
        pool.put(a.clone()).unwrap();
        pool.put(b.clone()).unwrap();
        assert_eq!(pool.room(), 0);
        assert_eq!(pool.put(c.clone()), Err(c));
        assert_eq!(pool.take(), Some(a));
        assert_eq!((pool.len(), pool.room()), (1, 1));
        assert_eq!(pool.take(), Some(b));
        assert_eq!(pool.take(), None);
    }
}
