//! One process per data directory: the broker holds an exclusive lock on
//! `DATA_DIR/lock` while it runs, and offline tools (`ringmq user create
//! --data-dir`) take it too, so neither edits files the other holds.

use std::fs::File;
use std::path::Path;

/// The lock file under the data directory.
pub const FILE: &str = "lock";

/// Held while the process uses the directory; released when dropped (or the process dies).
#[derive(Debug)]
pub struct DataDirLock(#[allow(dead_code, reason = "held for its lock, never read")] File);

impl DataDirLock {
    /// Takes the lock without waiting; an error names who holds it.
    pub fn acquire(data_dir: &Path) -> Result<DataDirLock, String> {
        let path = data_dir.join(FILE);
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| format!("opening {}: {e}", path.display()))?;
        match rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => Ok(DataDirLock(file)),
            Err(rustix::io::Errno::WOULDBLOCK) => Err(format!(
                "another process (a running broker?) holds {}; stop it, or use another data directory",
                path.display()
            )),
            Err(e) => Err(format!("locking {}: {e}", path.display())),
        }
    }
}
