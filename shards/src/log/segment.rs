//! Commit log segments: fixed-size files named by their 20-digit zero-padded
//! base log position (and the generation of a recycled file's life), created
//! preallocated and zero-filled, or recycled whole, so that appends never
//! extend a file and fdatasync never has to journal metadata.

use crate::batch::Generation;
use crate::error::{Result, StorageError};
use crate::fs;
use crate::position::LogPos;
use glommio::io::{DmaFile, OpenOptions};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// Suffix of segment files.
pub const SEGMENT_SUFFIX: &str = ".log";

/// One open segment of the commit log.
pub struct Segment {
    /// Log position of the segment's first byte.
    pub base: LogPos,
    /// Opened read-write with O_DIRECT.
    pub file: DmaFile,
    /// The same file opened O_DIRECT | O_DSYNC: a write on it returns once
    /// durable, so a round with nothing else unsynced costs one I/O, not a
    /// write and then an fdatasync.
    pub dsync: DmaFile,
    pub path: PathBuf,
    /// The life of the file: seeds the header CRC of every batch in it.
    pub generation: Generation,
}

impl std::fmt::Debug for Segment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Segment({})", self.path.display())
    }
}

/// Suffix of the retired segment files kept for recycling.
pub const POOLED_SUFFIX: &str = ".free";

/// File name of the segment starting at `base` in life `generation`:
/// `{base}.log` in a file's first life, `{base}.{generation}.log` after.
pub fn segment_name(base: u64, generation: Generation) -> String {
    numbered_name(base, generation, SEGMENT_SUFFIX)
}

/// Base position and generation from a segment file name.
pub fn parse_segment_name(name: &str) -> Option<(u64, Generation)> {
    parse_numbered_name(name, SEGMENT_SUFFIX)
}

/// File name of a retired segment (last based at `base`) kept for recycling.
pub fn pooled_name(base: u64, generation: Generation) -> String {
    numbered_name(base, generation, POOLED_SUFFIX)
}

/// Last base and generation from a pooled file name.
pub fn parse_pooled_name(name: &str) -> Option<(u64, Generation)> {
    parse_numbered_name(name, POOLED_SUFFIX)
}

fn numbered_name(base: u64, generation: Generation, suffix: &str) -> String {
    match generation {
        Generation::WIRE => format!("{base:020}{suffix}"),
        Generation(g) => format!("{base:020}.{g}{suffix}"),
    }
}

fn parse_numbered_name(name: &str, suffix: &str) -> Option<(u64, Generation)> {
    let stem = name.strip_suffix(suffix)?;
    let (digits, generation) = match stem.split_once('.') {
        Some((digits, g)) if !g.starts_with('0') => (digits, Generation(g.parse().ok()?)),
        Some(_) => return None,
        None => (stem, Generation::WIRE),
    };
    let base = (digits.len() == 20 && digits.bytes().all(|b| b.is_ascii_digit())).then(|| digits.parse().ok())??;
    Some((base, generation))
}

impl Segment {
    /// Opens an existing segment of `bytes`. A file cut shorter than that
    /// (by anything but the broker, which never shrinks one) gets its length
    /// back, zero-filled past the cut, so recovery reads the cut as a torn
    /// tail and keeps every batch before it.
    pub async fn open(dir: &Path, base: LogPos, generation: Generation, bytes: u64) -> Result<Rc<Segment>> {
        let path = dir.join(segment_name(base.0, generation));
        let file = fs::open_rw(&path).await?;
        let size = file.file_size().await.map_err(|e| StorageError::io("sizing", &path, e))?;
        if size < bytes {
            tracing::warn!(
                segment = %path.display(),
                size,
                bytes,
                "segment is shorter than its preallocated size; recovering what is before the cut"
            );
            fs::extend_zero_filled(&file, &path, size, bytes).await?;
        }
        let dsync = open_dsync(&path).await?;
        Ok(Rc::new(Segment { base, file, dsync, path, generation }))
    }

    /// Creates a segment of `bytes`: written under a temporary name, fallocate'd,
    /// zero-filled (`depth` writes in flight), synced, renamed into place and
    /// the directory synced, so a crash never leaves a half-made segment under
    /// a real name.
    pub async fn create(dir: &Path, base: LogPos, bytes: u64, depth: fs::FillDepth<'_>) -> Result<Rc<Segment>> {
        let path = dir.join(segment_name(base.0, Generation::WIRE));
        let file = fs::create_zero_filled(&path, bytes, depth).await?;
        let dsync = open_dsync(&path).await?;
        Ok(Rc::new(Segment { base, file, dsync, path, generation: Generation::WIRE }))
    }

    /// Makes the pooled file `pooled` (of `bytes`, in its life `generation`)
    /// the segment at `base` in its next life: renamed and the directory
    /// synced, so the name is durable before any batch in the file is.
    /// Nothing is written: the batches of its earlier lives stay until
    /// overwritten, and fail their header check under the new generation.
    pub async fn recycle(
        dir: &Path,
        pooled: &Path,
        generation: Generation,
        base: LogPos,
        bytes: u64,
    ) -> Result<Rc<Segment>> {
        let generation = generation.next();
        let path = dir.join(segment_name(base.0, generation));
        let (from, to) = (pooled.to_path_buf(), path.clone());
        fs::blocking("renaming a pooled segment", pooled, move |_| std::fs::rename(&from, &to)).await?;
        fs::sync_dir(dir).await?;
        Segment::open(dir, base, generation, bytes).await
    }

    /// Log position after the segment's last byte.
    pub fn end(&self, segment_bytes: u64) -> LogPos {
        self.base + segment_bytes
    }
}

async fn open_dsync(path: &Path) -> Result<DmaFile> {
    OpenOptions::new()
        .write(true)
        .custom_flags(rustix::fs::OFlags::DSYNC.bits() as i32)
        .dma_open(path)
        .await
        .map_err(|e| StorageError::io("opening (O_DSYNC)", path, e))
}

/// The segment with the highest base at or below log position `pos`.
pub(crate) fn at_or_before(segments: &BTreeMap<LogPos, Rc<Segment>>, pos: LogPos) -> Option<Rc<Segment>> {
    segments.range(..=pos).next_back().map(|(_, s)| s.clone())
}

/// Bases and generations of the segments in `dir`, ascending; removes
/// leftover temporary files. Two files of one base are corruption.
pub async fn list_segments(dir: &Path) -> Result<Vec<(LogPos, Generation)>> {
    let found = fs::list_numbered(dir, |name| parse_segment_name(name).map(|(base, g)| (LogPos(base), g))).await?;
    if let Some(pair) = found.windows(2).find(|pair| pair[0].0 == pair[1].0) {
        let detail = format!(
            "two segment files start here: {} and {}",
            segment_name(pair[0].0 .0, pair[0].1),
            segment_name(pair[1].0 .0, pair[1].1)
        );
        return Err(StorageError::Corruption { what: "segment files", position: pair[0].0 .0, detail });
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_twenty_digit_base_positions_and_a_recycled_life() {
        let first = (1 << 30, Generation::WIRE);
        assert_eq!(segment_name(first.0, first.1), "00000000001073741824.log");
        assert_eq!(parse_segment_name("00000000001073741824.log"), Some(first));
        assert_eq!(segment_name(1 << 30, Generation(7)), "00000000001073741824.7.log");
        assert_eq!(parse_segment_name("00000000001073741824.7.log"), Some((1 << 30, Generation(7))));
        assert_eq!(pooled_name(0, Generation(2)), "00000000000000000000.2.free");
        assert_eq!(parse_pooled_name("00000000000000000000.2.free"), Some((0, Generation(2))));
        assert_eq!(parse_segment_name("00000000000000000000.2.free"), None);
        for bad in [
            "1073741824.log",
            "00000000001073741824.log.tmp",
            "00000000001073741824.07.log",
            "00000000001073741824..log",
            "0000000000107374182x.log",
            "+0000000001073741824.log",
        ] {
            assert_eq!(parse_segment_name(bad), None, "{bad}");
        }
    }
}
