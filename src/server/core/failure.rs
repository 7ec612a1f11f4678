//! The broker's typed error: a wire error code and a message a user can act
//! on. Every service call fails with one; the wire sends it as the response.

use crate::protocol::{DecodeError, ErrorCode};
use crate::security::AccountsError;
use ringmq_shards::{FormatError, StorageError};

/// A failed request: the code and a message a user can act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure(pub ErrorCode, pub String);

impl Failure {
    pub fn invalid(message: impl Into<String>) -> Failure {
        Failure(ErrorCode::InvalidRequest, message.into())
    }

    pub fn unknown_topic(name: &str) -> Failure {
        Failure(ErrorCode::UnknownTopic, format!("unknown topic {name:?}; create it first"))
    }

    pub fn cluster_unavailable(why: impl std::fmt::Display) -> Failure {
        Failure(ErrorCode::ClusterUnavailable, format!("the cluster's etcd did not take the change: {why}; retry"))
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}: {}", self.0, self.1)
    }
}

impl From<DecodeError> for Failure {
    fn from(e: DecodeError) -> Self {
        Failure(ErrorCode::Malformed, e.to_string())
    }
}

impl From<AccountsError> for Failure {
    fn from(e: AccountsError) -> Self {
        Failure::invalid(e.to_string())
    }
}

impl From<FormatError> for Failure {
    fn from(e: FormatError) -> Self {
        let code = match &e {
            FormatError::BatchTooShort { .. } | FormatError::LengthMismatch { .. } | FormatError::Malformed(_) => {
                ErrorCode::InvalidBatch
            }
            FormatError::BatchTooLarge { .. } => ErrorCode::BatchTooLarge,
            FormatError::CrcMismatch { .. } => ErrorCode::CrcMismatch,
        };
        Failure(code, e.to_string())
    }
}

impl From<StorageError> for Failure {
    fn from(e: StorageError) -> Self {
        let code = match e {
            StorageError::Format(format) => return format.into(),
            StorageError::UnknownQueue(_) => ErrorCode::UnknownQueue,
            StorageError::OffsetOutOfRange { .. } => ErrorCode::OffsetOutOfRange,
            StorageError::Closed => ErrorCode::ShuttingDown,
            StorageError::CorruptBatch { .. } => ErrorCode::CorruptData,
            StorageError::Full { .. } => ErrorCode::StorageFull,
            ref e if e.is_no_space() => ErrorCode::StorageFull,
            StorageError::Failed(_)
            | StorageError::Io { .. }
            | StorageError::Corruption { .. }
            | StorageError::Sealed { .. } => ErrorCode::StorageFailed,
            StorageError::PositionOutOfRange { .. } | StorageError::Diverged { .. } => ErrorCode::LogDiverged,
            StorageError::WrongRole(_) => ErrorCode::NotLeader,
            StorageError::QueueExists(_) | StorageError::Config(_) => ErrorCode::Internal,
        };
        Failure(code, e.to_string())
    }
}
