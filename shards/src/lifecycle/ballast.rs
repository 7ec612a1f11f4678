//! A ballast file: space held back at open so that, once the disk is full,
//! the shard can still write what frees space or keeps it consistent
//! (checkpoints, index files, retention's own checkpoints). The first
//! ENOSPC releases it; it is made again once a new segment could be made.

use crate::error::Result;
use crate::fs;
use std::path::Path;

/// File name of the ballast inside a shard directory.
pub const BALLAST_FILE: &str = "ballast";

/// Makes the ballast of `bytes` unless it exists; false if the disk has no
/// room for it (the shard runs without one until space is freed).
pub async fn ensure(dir: &Path, bytes: u64) -> Result<bool> {
    if bytes == 0 {
        return Ok(true);
    }
    let path = dir.join(BALLAST_FILE);
    fs::blocking("making the ballast", &path, move |path| {
        if std::fs::metadata(path).is_ok_and(|m| m.len() >= bytes) {
            return Ok(true);
        }
        let file = std::fs::OpenOptions::new().write(true).create(true).truncate(true).open(path)?;
        let error = match rustix::fs::fallocate(&file, rustix::fs::FallocateFlags::empty(), 0, bytes) {
            Ok(()) => return file.sync_all().map(|_| true),
            Err(e) => std::io::Error::from(e),
        };
        drop(file);
        let _ = std::fs::remove_file(path);
        if fs::is_no_space(&error) {
            Ok(false)
        } else {
            Err(error)
        }
    })
    .await
}

/// Gives the ballast's space back to the disk; true if there was one.
pub async fn release(dir: &Path) -> Result<bool> {
    let path = dir.join(BALLAST_FILE);
    fs::blocking("releasing the ballast", &path, |path| match std::fs::remove_file(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    })
    .await
}

impl crate::shard::Inner {
    /// A write found the disk full: the ballast goes, so the writes that
    /// keep the shard consistent and free space (checkpoints, retention)
    /// still find room.
    pub(crate) async fn on_no_space(&self, error: &crate::error::StorageError) {
        match release(&self.config.dir).await {
            Ok(true) => {
                tracing::warn!(%error, bytes = self.config.ballast_bytes, "the disk is full: released the ballast")
            }
            Ok(false) => {}
            Err(e) => tracing::warn!(error = %e, "the disk is full and the ballast could not be released"),
        }
    }

    /// Whether a new segment may be tried while the disk is short of
    /// space: only once it has room for the segment and the ballast, so a
    /// retry never eats the space the ballast left for checkpoints.
    pub(crate) async fn room_for_segment(&self) -> bool {
        let wanted = self.config.segment_bytes + self.config.ballast_bytes;
        fs::free_bytes(&self.config.dir).await.is_ok_and(|free| free >= wanted)
    }
}
