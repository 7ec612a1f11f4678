//! The broker's typed error: a wire error code and a message a user can act
//! on. Every service call fails with one; the wire sends it as the response.

use crate::protocol::{DecodeError, ErrorCode};
use ringmq_shards::StorageError;

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

impl From<StorageError> for Failure {
    fn from(e: StorageError) -> Self {
        let code = match &e {
            StorageError::BatchTooShort { .. } | StorageError::LengthMismatch { .. } | StorageError::Malformed(_) => {
                ErrorCode::InvalidBatch
            }
            StorageError::BatchTooLarge { .. } => ErrorCode::BatchTooLarge,
            StorageError::CrcMismatch { .. } => ErrorCode::CrcMismatch,
            StorageError::UnknownQueue(_) => ErrorCode::UnknownQueue,
            StorageError::OffsetOutOfRange { .. } => ErrorCode::OffsetOutOfRange,
            StorageError::Closed => ErrorCode::ShuttingDown,
            StorageError::CorruptBatch { .. } => ErrorCode::CorruptData,
            StorageError::Full { .. } => ErrorCode::StorageFull,
            e if e.is_no_space() => ErrorCode::StorageFull,
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
