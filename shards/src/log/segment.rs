//! Commit log segments: fixed-size files named by their 20-digit zero-padded
//! base log position, created preallocated and zero-filled so that appends
//! never extend a file and fdatasync never has to journal metadata.

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
}

impl std::fmt::Debug for Segment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Segment({})", self.path.display())
    }
}

/// File name of the segment starting at `base`.
pub fn segment_name(base: u64) -> String {
    format!("{base:020}{SEGMENT_SUFFIX}")
}

/// Base position from a segment file name.
pub fn parse_segment_name(name: &str) -> Option<u64> {
    let digits = name.strip_suffix(SEGMENT_SUFFIX)?;
    (digits.len() == 20).then(|| digits.parse().ok())?
}

impl Segment {
    /// Opens an existing segment of `bytes`. A file cut shorter than that
    /// (by anything but the broker, which never shrinks one) gets its length
    /// back, zero-filled past the cut, so recovery reads the cut as a torn
    /// tail and keeps every batch before it.
    pub async fn open(dir: &Path, base: LogPos, bytes: u64) -> Result<Rc<Segment>> {
        let path = dir.join(segment_name(base.0));
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
        Ok(Rc::new(Segment { base, file, dsync, path }))
    }

    /// Creates a segment of `bytes`: written under a temporary name, fallocate'd,
    /// zero-filled (`depth` writes in flight), synced, renamed into place and
    /// the directory synced, so a crash never leaves a half-made segment under
    /// a real name.
    pub async fn create(dir: &Path, base: LogPos, bytes: u64, depth: fs::FillDepth<'_>) -> Result<Rc<Segment>> {
        let path = dir.join(segment_name(base.0));
        let file = fs::create_zero_filled(&path, bytes, depth).await?;
        let dsync = open_dsync(&path).await?;
        Ok(Rc::new(Segment { base, file, dsync, path }))
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

/// Bases of the segments in `dir`, ascending; removes leftover temporary files.
pub async fn list_segments(dir: &Path) -> Result<Vec<LogPos>> {
    Ok(fs::list_numbered(dir, parse_segment_name).await?.into_iter().map(LogPos).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_twenty_digit_base_positions() {
        assert_eq!(segment_name(1 << 30), "00000000001073741824.log");
        assert_eq!(parse_segment_name("00000000001073741824.log"), Some(1 << 30));
        assert_eq!(parse_segment_name("1073741824.log"), None);
        assert_eq!(parse_segment_name("00000000001073741824.log.tmp"), None);
    }
}
