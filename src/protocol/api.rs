//! API keys and error codes of the native protocol (docs/PROTOCOL.md).

/// Requests the broker understands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u16)]
pub enum ApiKey {
    ApiVersions = 0,
    Metadata = 1,
    CreateTopic = 2,
    DeleteTopic = 3,
    ListTopics = 4,
    Produce = 5,
    Fetch = 6,
    ListOffsets = 7,
    CommitOffset = 8,
    FetchOffset = 9,
}

impl ApiKey {
    /// Every public API, in key order.
    pub const ALL: [ApiKey; 10] = [
        ApiKey::ApiVersions,
        ApiKey::Metadata,
        ApiKey::CreateTopic,
        ApiKey::DeleteTopic,
        ApiKey::ListTopics,
        ApiKey::Produce,
        ApiKey::Fetch,
        ApiKey::ListOffsets,
        ApiKey::CommitOffset,
        ApiKey::FetchOffset,
    ];

    /// The key for a wire value.
    pub fn from_u16(v: u16) -> Option<ApiKey> {
        ApiKey::ALL.get(usize::from(v)).copied()
    }

    /// Versions this broker speaks: (min, max).
    pub fn versions(self) -> (u16, u16) {
        (0, 0)
    }
}

/// Typed errors on the wire; 0 is success.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u16)]
pub enum ErrorCode {
    None = 0,
    /// The frame or body does not parse (the connection is closed for framing errors).
    Malformed = 1,
    UnknownApi = 2,
    UnsupportedVersion = 3,
    UnknownTopic = 4,
    UnknownQueue = 5,
    TopicExists = 6,
    InvalidTopic = 7,
    CrcMismatch = 8,
    BatchTooLarge = 9,
    InvalidBatch = 10,
    OffsetOutOfRange = 11,
    StorageFailed = 12,
    ShuttingDown = 13,
    TooManyConnections = 14,
    FrameTooLarge = 15,
    InvalidRequest = 16,
    Internal = 17,
}

impl ErrorCode {
    /// The code for a wire value (unknown values read as Internal).
    pub fn from_u16(v: u16) -> ErrorCode {
        use ErrorCode::*;
        [
            None,
            Malformed,
            UnknownApi,
            UnsupportedVersion,
            UnknownTopic,
            UnknownQueue,
            TopicExists,
            InvalidTopic,
            CrcMismatch,
            BatchTooLarge,
            InvalidBatch,
            OffsetOutOfRange,
            StorageFailed,
            ShuttingDown,
            TooManyConnections,
            FrameTooLarge,
            InvalidRequest,
            Internal,
        ]
        .get(usize::from(v))
        .copied()
        .unwrap_or(Internal)
    }

    /// True if the same request may succeed when retried (after a metadata refresh or a pause).
    pub fn is_retriable(self) -> bool {
        matches!(self, ErrorCode::ShuttingDown | ErrorCode::UnknownTopic | ErrorCode::UnknownQueue)
    }
}
