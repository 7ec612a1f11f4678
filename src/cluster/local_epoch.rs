//! The newest leader epoch whose data this node's log may hold, kept in
//! `DATA_DIR/cluster-epoch`: a node that rejoins its group as a follower
//! cuts its log back to where the first later epoch began. Written after
//! the node starts in a role, so it can only lag (a lagging value cuts more,
//! and the leader sends the rest again; it never cuts too little).

use std::path::{Path, PathBuf};

const FILE: &str = "cluster-epoch";

/// The recorded epoch, or 0 if the node never served in one.
pub fn load(data_dir: &Path) -> Result<u64, LocalEpochError> {
    let path = data_dir.join(FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => text.trim().parse().map_err(|source| LocalEpochError::Parse { path, source }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(0),
        Err(source) => Err(LocalEpochError::Io { action: "reading", path, source }),
    }
}

/// Records `epoch` durably (written new, synced, renamed over).
pub fn store(data_dir: &Path, epoch: u64) -> Result<(), LocalEpochError> {
    ringmq_shards::replace_durably(data_dir, FILE, format!("{epoch}\n").as_bytes())
        .map_err(|source| LocalEpochError::Io { action: "storing", path: data_dir.join(FILE), source })
}

/// The local epoch file cannot be read or written.
#[derive(Debug, thiserror::Error)]
pub enum LocalEpochError {
    #[error("{action} {path}: {source}")]
    Io { action: &'static str, path: PathBuf, source: std::io::Error },
    #[error("{path}: {source}")]
    Parse { path: PathBuf, source: std::num::ParseIntError },
}
