//! Kafka's error codes, and the one a ringmq failure maps to, so a Kafka
//! client retries, refreshes metadata or rejoins as it would against Kafka.

use crate::protocol::ErrorCode;

pub const NONE: i16 = 0;
pub const OFFSET_OUT_OF_RANGE: i16 = 1;
pub const CORRUPT_MESSAGE: i16 = 2;
pub const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
pub const NOT_LEADER_OR_FOLLOWER: i16 = 6;
pub const REQUEST_TIMED_OUT: i16 = 7;
pub const MESSAGE_TOO_LARGE: i16 = 10;
pub const COORDINATOR_NOT_AVAILABLE: i16 = 15;
pub const NOT_COORDINATOR: i16 = 16;
pub const INVALID_TOPIC_EXCEPTION: i16 = 17;
pub const NOT_ENOUGH_REPLICAS_AFTER_APPEND: i16 = 20;
pub const ILLEGAL_GENERATION: i16 = 22;
pub const INCONSISTENT_GROUP_PROTOCOL: i16 = 23;
pub const UNKNOWN_MEMBER_ID: i16 = 25;
pub const REBALANCE_IN_PROGRESS: i16 = 27;
pub const TOPIC_AUTHORIZATION_FAILED: i16 = 29;
pub const GROUP_AUTHORIZATION_FAILED: i16 = 30;
pub const CLUSTER_AUTHORIZATION_FAILED: i16 = 31;
pub const UNSUPPORTED_SASL_MECHANISM: i16 = 33;
pub const ILLEGAL_SASL_STATE: i16 = 34;
pub const UNSUPPORTED_VERSION: i16 = 35;
pub const TOPIC_ALREADY_EXISTS: i16 = 36;
pub const INVALID_PARTITIONS: i16 = 37;
pub const INVALID_REQUEST: i16 = 42;
pub const KAFKA_STORAGE_ERROR: i16 = 56;
pub const SASL_AUTHENTICATION_FAILED: i16 = 58;
pub const TRANSACTIONAL_ID_AUTHORIZATION_FAILED: i16 = 53;
pub const UNKNOWN_SERVER_ERROR: i16 = -1;

/// The Kafka code for a ringmq failure.
pub fn of(code: ErrorCode) -> i16 {
    use ErrorCode as E;
    match code {
        E::None => NONE,
        E::UnknownTopic | E::UnknownQueue => UNKNOWN_TOPIC_OR_PARTITION,
        E::TopicExists => TOPIC_ALREADY_EXISTS,
        E::InvalidTopic => INVALID_TOPIC_EXCEPTION,
        E::Malformed | E::CrcMismatch | E::InvalidBatch | E::CorruptData => CORRUPT_MESSAGE,
        E::BatchTooLarge | E::FrameTooLarge => MESSAGE_TOO_LARGE,
        E::OffsetOutOfRange => OFFSET_OUT_OF_RANGE,
        E::StorageFailed | E::StorageFull => KAFKA_STORAGE_ERROR,
        // The client refreshes metadata and tries again (elsewhere, or later).
        E::NotLeader | E::ShuttingDown => NOT_LEADER_OR_FOLLOWER,
        E::NotEnoughReplicas => NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        E::ClusterUnavailable => REQUEST_TIMED_OUT,
        E::RebalanceInProgress => REBALANCE_IN_PROGRESS,
        // A member that commits a partition it was not given holds a stale generation.
        E::IllegalGeneration | E::NotAssigned => ILLEGAL_GENERATION,
        E::UnknownMember => UNKNOWN_MEMBER_ID,
        E::InconsistentGroupProtocol => INCONSISTENT_GROUP_PROTOCOL,
        E::UnknownApi | E::UnsupportedVersion => UNSUPPORTED_VERSION,
        E::InvalidRequest => INVALID_REQUEST,
        E::AuthenticationRequired => ILLEGAL_SASL_STATE,
        E::AuthenticationFailed => SASL_AUTHENTICATION_FAILED,
        E::UnsupportedSaslMechanism => UNSUPPORTED_SASL_MECHANISM,
        // Where the resource is a group or the cluster the handler names its own code.
        E::NotAuthorized => TOPIC_AUTHORIZATION_FAILED,
        E::TooManyConnections | E::LogDiverged | E::Internal => UNKNOWN_SERVER_ERROR,
    }
}
