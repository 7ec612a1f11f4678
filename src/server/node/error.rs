//! Why a broker process cannot start: what its start-up tells the user.

use std::path::PathBuf;

/// `NodeError::Io` for `action` on `path`.
pub fn io<'p>(action: &'static str, path: &'p std::path::Path) -> impl FnOnce(std::io::Error) -> NodeError + 'p {
    move |source| NodeError::Io { action, path: path.to_path_buf(), source }
}

/// A start-up failure of the broker process, saying what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    #[error("{action} {path}: {source}")]
    Io { action: &'static str, path: PathBuf, source: std::io::Error },
    #[error("{path}: {why}")]
    Unreadable { path: PathBuf, why: String },
    #[error("--tiered-restore: {0}")]
    Restore(String),
    #[error("another process (a running broker?) holds {0}; stop it, or use another data directory")]
    Locked(PathBuf),
    #[error(
        "{dir} holds {had} shards but {given} cores were given: every queue lives on the shard that created it; \
         start with --cores naming {had} CPUs (or use a new --data-dir)"
    )]
    ShardCount { dir: PathBuf, had: usize, given: usize },
    #[error("{dir} was created with segments of {had} bytes, not {given}: start with --segment-mib {} (or use a new --data-dir)", had >> 20)]
    SegmentSize { dir: PathBuf, had: u64, given: u64 },
    #[error(
        "{dir} holds batches sealed with data keys {ids}: start with --encryption-keys FILE (or RINGMQ_ENCRYPTION_KEYS) naming them"
    )]
    DataKeysNotGiven { dir: PathBuf, ids: String },
    #[error(
        "{dir} holds batches sealed with data key {id}, which the keys given lack; keep every key a rotation added"
    )]
    DataKeyMissing { dir: PathBuf, id: u32 },
    #[error("data key {id} of the keys given is not the key {dir} was sealed with")]
    DataKeyChanged { dir: PathBuf, id: u32 },
    #[error("{what}: {source}")]
    Thread { what: &'static str, source: std::io::Error },
}
