//! Typed errors of the client SDK.

use ringmq_protocol::ErrorCode;

/// Everything a client call can fail with.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ClientError {
    #[error("cannot connect to {addr}: {reason}")]
    Connect { addr: String, reason: String },
    #[error("connection to {addr} closed: {reason}")]
    ConnectionClosed { addr: String, reason: String },
    #[error("{addr} did not let this client in ({code:?}): {reason}")]
    Authentication { addr: String, code: ErrorCode, reason: String },
    #[error("no response from {addr} within {timeout_ms} ms")]
    Timeout { addr: String, timeout_ms: u64 },
    #[error("broker refused the request ({code:?}): {message}")]
    Broker { code: ErrorCode, message: String },
    #[error("unknown topic {0:?}; create it with `ringmq topic create`")]
    UnknownTopic(String),
    #[error("topic {topic:?} has {queues} queues; queue {queue} does not exist")]
    UnknownQueue { topic: String, queue: u32, queues: u32 },
    #[error("broker sent a response that does not parse: {0}")]
    Protocol(String),
    #[error("invalid argument: {0}")]
    Invalid(String),
    #[error("the producer stopped before the message's outcome was known")]
    ProducerStopped,
}

impl ClientError {
    /// True if retrying the same call may succeed (after a metadata refresh or a pause).
    pub fn is_retriable(&self) -> bool {
        match self {
            ClientError::Connect { .. } | ClientError::ConnectionClosed { .. } | ClientError::Timeout { .. } => true,
            ClientError::Broker { code, .. } => code.is_retriable(),
            _ => false,
        }
    }
}

impl From<ringmq_protocol::DecodeError> for ClientError {
    fn from(e: ringmq_protocol::DecodeError) -> Self {
        ClientError::Protocol(e.to_string())
    }
}
