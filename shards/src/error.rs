//! Typed errors of the storage engine, each with a message a user can act on.

use std::sync::Arc;

/// Everything the storage engine can refuse or fail with.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StorageError {
    #[error(transparent)]
    Format(#[from] ringmq_format::FormatError),
    #[error("unknown queue {0}; create it before appending or reading")]
    UnknownQueue(u32),
    #[error("queue {0} already exists")]
    QueueExists(u32),
    #[error("offset {offset} of queue {queue} is out of range: the queue holds offsets [{start}, {end})")]
    OffsetOutOfRange { queue: u32, offset: u64, start: u64, end: u64 },
    #[error(
        "queue {queue} takes a copied batch only at its next offset {next} (or, before its first, anywhere), \
         not at {offset}; copy the batches in order"
    )]
    NotNextOffset { queue: u32, offset: u64, next: u64 },
    #[error("queue {0} is frozen: it takes no appends while it moves; its new owner takes them after the switch")]
    QueueFrozen(u32),
    #[error(
        "the sealed batch at log position {position} does not open: {detail}; start with the data keys it was \
         sealed with (--encryption-keys)"
    )]
    Sealed { position: u64, detail: String },
    /// A read from tiered storage's bucket failed; it may be retried.
    #[error("tiered storage's bucket did not answer a read: {0}; the read may be retried")]
    Remote(String),
    #[error("corrupt {what} at log position {position}: {detail}")]
    Corruption { what: &'static str, position: u64, detail: String },
    #[error(
        "queue {queue}: the stored batch at log position {position} fails its check ({detail}); offsets \
         [{first_offset}, {next_offset}) are damaged: read on from {next_offset} to skip them"
    )]
    CorruptBatch { queue: u32, position: u64, first_offset: u64, next_offset: u64, detail: &'static str },
    #[error("I/O error while {op} {path}: {source}")]
    Io { op: &'static str, path: String, source: Arc<std::io::Error> },
    #[error(
        "the shard stopped accepting writes after an earlier failure ({0}); restart it to recover from the durable log"
    )]
    Failed(String),
    #[error(
        "no space left on the disk of {dir} ({detail}); reads go on, and appends resume by themselves once space \
         is freed (retention, or remove files)"
    )]
    Full { dir: String, detail: String },
    #[error("log position {position} is out of range: the log holds [{start}, {end})")]
    PositionOutOfRange { position: u64, start: u64, end: u64 },
    #[error(
        "the follower's log diverged from the leader's at position {position} ({detail}); cut it back to what the \
         leader holds and fetch again"
    )]
    Diverged { position: u64, detail: String },
    #[error("wrong role: {0}")]
    WrongRole(&'static str),
    #[error("invalid shard configuration: {0}")]
    Config(String),
    #[error("the shard is closed")]
    Closed,
    #[error("busy: {0}")]
    Busy(String),
}

impl StorageError {
    /// True if this is an I/O error of a full disk.
    pub fn is_no_space(&self) -> bool {
        matches!(self, StorageError::Io { source, .. } if crate::fs::is_no_space(source))
    }

    /// Wraps an I/O error with the operation and the file it happened on.
    pub fn io(op: &'static str, path: impl AsRef<std::path::Path>, err: impl Into<std::io::Error>) -> Self {
        StorageError::Io { op, path: path.as_ref().display().to_string(), source: Arc::new(err.into()) }
    }
}

/// Result type of the storage engine.
pub type Result<T> = std::result::Result<T, StorageError>;
