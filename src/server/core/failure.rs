//! The broker's typed error: why a request failed, in the broker's own
//! terms, and a message a user can act on. Every service call fails with
//! one; each protocol's edge names the reason in its own codes (the native
//! wire's `ErrorCode`, Kafka's error codes) and sends the message.

use crate::protocol::DecodeError;
use crate::security::AccountsError;
use ringmq_shards::{FormatError, StorageError};

/// Why a request failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// The request (or a stored record it names) does not parse.
    Malformed,
    /// The API version is not one the broker serves.
    UnsupportedVersion,
    UnknownTopic,
    UnknownQueue,
    TopicExists,
    /// A topic name of characters or a length the broker refuses.
    InvalidTopic,
    /// A batch whose CRC does not match its bytes: nothing of it is stored.
    CrcMismatch,
    BatchTooLarge,
    /// A batch whose records do not add up.
    InvalidBatch,
    OffsetOutOfRange,
    /// The shard could not store or read its log (an I/O error).
    StorageFailed,
    /// The shard is stopping.
    ShuttingDown,
    /// A field out of its range or a request the broker's limits refuse.
    InvalidRequest,
    /// A state the broker did not expect: a bug to report.
    Internal,
    /// The consumer group is rebalancing: rejoin.
    RebalanceInProgress,
    /// The member's generation is not the group's: it was fenced.
    IllegalGeneration,
    /// The group does not know the member.
    UnknownMember,
    /// The member commits a queue not assigned to it.
    NotAssigned,
    /// A stored batch fails its check: the offsets it covers are damaged.
    CorruptData,
    /// The shard's disk is full: nothing was stored.
    StorageFull,
    /// This node does not lead the queue's broker group (or the epoch).
    NotLeader,
    /// A follower's log does not continue the leader's.
    LogDiverged,
    /// Sync replication: too few replicas hold the batch durably in time.
    NotEnoughReplicas,
    /// Cluster mode: the coordination service did not take a change.
    ClusterUnavailable,
    /// The member's client kind or protocols do not match the group's.
    InconsistentGroupProtocol,
    /// Wrong user or password (or certificate).
    AuthenticationFailed,
    /// A SASL mechanism the broker does not offer.
    UnsupportedSaslMechanism,
    /// The principal may not do this to this resource.
    NotAuthorized,
    /// A static group member's instance joined again as another member.
    FencedInstance,
    /// A config name or value the broker does not take.
    InvalidConfig,
    /// Fewer replicas in sync than the topic's `min.insync.replicas`: nothing was stored.
    TooFewInSync,
    /// Tiered storage's bucket did not answer a read below the local start.
    RemoteUnavailable,
    /// A consumer-protocol member's heartbeat names an epoch that is not its own: rejoin.
    FencedMemberEpoch,
    /// A consumer-protocol member's commit names an epoch that is not its own.
    StaleMemberEpoch,
    /// A static consumer-protocol member joins with an instance id that a
    /// member which has not left still holds.
    UnreleasedInstance,
    /// A Kafka transactional producer's epoch is older than its
    /// transactional id's: another producer with the id took over.
    ProducerFenced,
    /// A Kafka producer id that is not its transactional id's.
    InvalidProducerIdMapping,
    /// A Kafka transaction is ending (its markers being written): retry.
    ConcurrentTransactions,
    /// A Kafka transaction call its transaction's state does not allow.
    InvalidTxnState,
    /// A Kafka transaction timeout outside the broker's bounds.
    InvalidTransactionTimeout,
    /// A record without a key for a compacted topic: nothing was stored.
    KeyRequired,
    /// The topic's `cleanup.policy` does not allow it (DeleteRecords on a
    /// topic that only compacts).
    PolicyViolation,
}

/// A failed request: why, and a message a user can act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure(pub Reason, pub String);

impl Failure {
    /// An append to a queue frozen for its move to another broker group.
    pub fn moving() -> Failure {
        let m = "the queue is moving to another broker group and takes no appends until it has; refresh metadata \
                 and retry";
        Failure(Reason::NotLeader, m.into())
    }

    pub fn invalid(message: impl Into<String>) -> Failure {
        Failure(Reason::InvalidRequest, message.into())
    }

    pub fn unknown_topic(name: &str) -> Failure {
        Failure(Reason::UnknownTopic, format!("unknown topic {name:?}; create it first"))
    }

    pub fn cluster_unavailable(why: impl std::fmt::Display) -> Failure {
        Failure(Reason::ClusterUnavailable, format!("the cluster's etcd did not take the change: {why}; retry"))
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}: {}", self.0, self.1)
    }
}

impl From<DecodeError> for Failure {
    fn from(e: DecodeError) -> Self {
        Failure(Reason::Malformed, e.to_string())
    }
}

impl From<AccountsError> for Failure {
    fn from(e: AccountsError) -> Self {
        Failure::invalid(e.to_string())
    }
}

impl From<FormatError> for Failure {
    fn from(e: FormatError) -> Self {
        let reason = match &e {
            FormatError::BatchTooShort { .. }
            | FormatError::LengthMismatch { .. }
            | FormatError::Malformed(_)
            | FormatError::Inflate(_) => Reason::InvalidBatch,
            FormatError::BatchTooLarge { .. } | FormatError::InflatesTooLarge { .. } => Reason::BatchTooLarge,
            FormatError::CrcMismatch { .. } => Reason::CrcMismatch,
        };
        Failure(reason, e.to_string())
    }
}

impl From<StorageError> for Failure {
    fn from(e: StorageError) -> Self {
        let reason = match e {
            StorageError::Format(format) => return format.into(),
            StorageError::UnknownQueue(_) => Reason::UnknownQueue,
            StorageError::OffsetOutOfRange { .. } => Reason::OffsetOutOfRange,
            StorageError::Closed => Reason::ShuttingDown,
            StorageError::CorruptBatch { .. } => Reason::CorruptData,
            StorageError::Full { .. } => Reason::StorageFull,
            ref e if e.is_no_space() => Reason::StorageFull,
            StorageError::Failed(_)
            | StorageError::Io { .. }
            | StorageError::Corruption { .. }
            | StorageError::Sealed { .. } => Reason::StorageFailed,
            StorageError::Remote(_) => Reason::RemoteUnavailable,
            StorageError::PositionOutOfRange { .. }
            | StorageError::Diverged { .. }
            | StorageError::NotNextOffset { .. } => Reason::LogDiverged,
            StorageError::QueueFrozen(_) => return Failure::moving(),
            StorageError::WrongRole(_) => Reason::NotLeader,
            StorageError::QueueExists(_) | StorageError::Config(_) | StorageError::Busy(_) => Reason::Internal,
        };
        Failure(reason, e.to_string())
    }
}
