//! What a batch that breaks the format is refused with.

/// A batch or record that does not follow the format.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FormatError {
    #[error("batch of {len} bytes is shorter than its {min}-byte header")]
    BatchTooShort { len: usize, min: usize },
    #[error("batch length field says {declared} bytes but {actual} bytes were given")]
    LengthMismatch { declared: usize, actual: usize },
    #[error("batch of {len} bytes exceeds the limit of {max} bytes (raise batch_bytes_max or send smaller batches)")]
    BatchTooLarge { len: usize, max: usize },
    #[error(
        "batch CRC mismatch: stored {stored:#010x}, computed {computed:#010x}; the batch was damaged or built wrongly"
    )]
    CrcMismatch { stored: u32, computed: u32 },
    #[error("malformed batch: {0}")]
    Malformed(&'static str),
    #[error("the batch's compressed records do not inflate: {0}")]
    Inflate(String),
    #[error("the batch's compressed records inflate past the limit of {max} bytes (raise inflated_bytes_max or send smaller batches)")]
    InflatesTooLarge { max: usize },
}

/// Result type of the format's checks.
pub type Result<T> = std::result::Result<T, FormatError>;
