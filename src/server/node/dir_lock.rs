//! One process per data directory: the broker holds an exclusive lock on
//! `DATA_DIR/lock` while it runs, and offline tools (`ringmq user create
//! --data-dir`) take it too, so neither edits files the other holds.

use std::fs::File;
use std::path::Path;

use super::error::io;
use super::NodeError;

/// The lock file under the data directory.
pub const FILE: &str = "lock";

/// Held while the process uses the directory; released when dropped (or the process dies).
#[derive(Debug)]
pub struct DataDirLock(#[allow(dead_code, reason = "held for its lock, never read")] File);

impl DataDirLock {
    /// Takes the lock without waiting; an error names who holds it.
    pub fn acquire(data_dir: &Path) -> Result<DataDirLock, NodeError> {
        let path = data_dir.join(FILE);
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(io("opening", &path))?;
        match rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => Ok(DataDirLock(file)),
            Err(rustix::io::Errno::WOULDBLOCK) => Err(NodeError::Locked(path)),
            Err(e) => Err(io("locking", &path)(e.into())),
        }
    }
}
