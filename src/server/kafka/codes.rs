//! The Kafka error a ringmq failure maps to, so a Kafka client retries,
//! refreshes metadata or rejoins as it would against Kafka. Kafka's codes
//! are the codec's `ResponseError`; success, which it has no variant for,
//! is `NONE`.

use crate::protocol::ErrorCode;
use kafka_protocol::ResponseError as K;

pub const NONE: i16 = 0;

/// The Kafka code for a ringmq failure.
pub fn of(code: ErrorCode) -> i16 {
    error_of(code).map_or(NONE, |e| e.code())
}

fn error_of(code: ErrorCode) -> Option<K> {
    use ErrorCode as E;
    Some(match code {
        E::None => return None,
        E::UnknownTopic | E::UnknownQueue => K::UnknownTopicOrPartition,
        E::TopicExists => K::TopicAlreadyExists,
        E::InvalidTopic => K::InvalidTopicException,
        E::Malformed | E::CrcMismatch | E::InvalidBatch | E::CorruptData => K::CorruptMessage,
        E::BatchTooLarge | E::FrameTooLarge => K::MessageTooLarge,
        E::OffsetOutOfRange => K::OffsetOutOfRange,
        E::StorageFailed | E::StorageFull => K::KafkaStorageError,
        // The client refreshes metadata and tries again (elsewhere, or later).
        E::NotLeader | E::ShuttingDown => K::NotLeaderOrFollower,
        E::NotEnoughReplicas => K::NotEnoughReplicasAfterAppend,
        E::ClusterUnavailable => K::RequestTimedOut,
        E::RebalanceInProgress => K::RebalanceInProgress,
        // A member that commits a partition it was not given holds a stale generation.
        E::IllegalGeneration | E::NotAssigned => K::IllegalGeneration,
        E::UnknownMember => K::UnknownMemberId,
        E::InconsistentGroupProtocol => K::InconsistentGroupProtocol,
        E::UnknownApi | E::UnsupportedVersion => K::UnsupportedVersion,
        E::InvalidRequest => K::InvalidRequest,
        E::AuthenticationRequired => K::IllegalSaslState,
        E::AuthenticationFailed => K::SaslAuthenticationFailed,
        E::UnsupportedSaslMechanism => K::UnsupportedSaslMechanism,
        // Where the resource is a group or the cluster the handler names its own code.
        E::NotAuthorized => K::TopicAuthorizationFailed,
        E::TooManyConnections | E::LogDiverged | E::Internal => K::UnknownServerError,
    })
}

/// Kafka's code for a failed topic change (a refused principal and an
/// invalid count of partitions have their own).
pub fn of_topic_change(code: ErrorCode) -> i16 {
    match code {
        ErrorCode::NotAuthorized => K::TopicAuthorizationFailed.code(),
        ErrorCode::InvalidRequest => K::InvalidPartitions.code(),
        code => of(code),
    }
}
