//! Commit log segments: fixed-size files named by their 20-digit zero-padded
//! base log position, created preallocated and zero-filled so that appends
//! never extend a file and fdatasync never has to journal metadata.

use crate::error::{Result, StorageError};
use crate::fs;
use glommio::io::{DmaFile, OpenOptions};
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// Suffix of segment files.
pub const SEGMENT_SUFFIX: &str = ".log";
/// Bytes per zero-fill write when a segment is created.
const ZERO_FILL_BYTES: usize = 1 << 20;

/// One open segment of the commit log.
pub struct Segment {
    /// Log position of the segment's first byte.
    pub base: u64,
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
    /// Opens an existing segment.
    pub async fn open(dir: &Path, base: u64) -> Result<Rc<Segment>> {
        let path = dir.join(segment_name(base));
        let file = fs::open_rw(&path).await?;
        let dsync = open_dsync(&path).await?;
        Ok(Rc::new(Segment { base, file, dsync, path }))
    }

    /// Creates a segment of `bytes`: written under a temporary name, fallocate'd,
    /// zero-filled, synced, renamed into place and the directory synced, so a
    /// crash never leaves a half-made segment under a real name.
    pub async fn create(dir: &Path, base: u64, bytes: u64) -> Result<Rc<Segment>> {
        let path = dir.join(segment_name(base));
        let tmp = dir.join(format!("{}.tmp", segment_name(base)));
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .dma_open(&tmp)
            .await
            .map_err(|e| StorageError::io("creating segment", &tmp, e))?;
        file.pre_allocate(bytes, false).await.map_err(|e| StorageError::io("preallocating segment", &tmp, e))?;
        zero_fill(&file, &tmp, bytes).await?;
        file.fdatasync().await.map_err(|e| StorageError::io("syncing new segment", &tmp, e))?;
        file.rename(&path).await.map_err(|e| StorageError::io("renaming new segment", &tmp, e))?;
        fs::sync_dir(dir).await?;
        let dsync = open_dsync(&path).await?;
        Ok(Rc::new(Segment { base, file, dsync, path }))
    }

    /// Log position after the segment's last byte.
    pub fn end(&self, segment_bytes: u64) -> u64 {
        self.base + segment_bytes
    }
}

async fn open_dsync(path: &Path) -> Result<DmaFile> {
    OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_DSYNC)
        .dma_open(path)
        .await
        .map_err(|e| StorageError::io("opening (O_DSYNC)", path, e))
}

/// Overwrites `bytes` of `file` with zeros, one write at a time so the fill
/// never takes more than one request's worth of disk bandwidth from appends.
pub async fn zero_fill(file: &DmaFile, path: &Path, bytes: u64) -> Result<()> {
    let mut zeros = file.alloc_dma_buffer(ZERO_FILL_BYTES);
    zeros.as_bytes_mut().fill(0);
    let zeros = Rc::new(zeros);
    let mut pos = 0;
    while pos < bytes {
        let n = if bytes - pos >= ZERO_FILL_BYTES as u64 {
            file.write_rc_at(zeros.clone(), pos).await
        } else {
            let mut tail = file.alloc_dma_buffer((bytes - pos) as usize);
            tail.as_bytes_mut().fill(0);
            file.write_at(tail, pos).await
        };
        pos += n.map_err(|e| StorageError::io("zero-filling", path, e))? as u64;
    }
    Ok(())
}

/// Bases of the segments in `dir`, ascending; removes leftover temporary files.
pub fn list_segments(dir: &Path) -> Result<Vec<u64>> {
    let mut bases = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| StorageError::io("listing", dir, e))? {
        let entry = entry.map_err(|e| StorageError::io("listing", dir, e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with(".tmp") {
            std::fs::remove_file(entry.path()).map_err(|e| StorageError::io("removing leftover", entry.path(), e))?;
        } else if let Some(base) = parse_segment_name(&name) {
            bases.push(base);
        }
    }
    bases.sort_unstable();
    Ok(bases)
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
