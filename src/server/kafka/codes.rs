//! The Kafka error a ringmq failure maps to, so a Kafka client retries,
//! refreshes metadata or rejoins as it would against Kafka. Kafka's codes
//! are the codec's `ResponseError`; success, which it has no variant for,
//! is `NONE`.

use crate::server::core::Reason;
use kafka_protocol::ResponseError as K;

pub const NONE: i16 = 0;

/// The Kafka code for a ringmq failure.
pub fn of(reason: Reason) -> i16 {
    error_of(reason).code()
}

fn error_of(reason: Reason) -> K {
    use Reason as R;
    match reason {
        R::UnknownTopic | R::UnknownQueue => K::UnknownTopicOrPartition,
        R::TopicExists => K::TopicAlreadyExists,
        R::InvalidTopic => K::InvalidTopicException,
        R::Malformed | R::CrcMismatch | R::InvalidBatch | R::CorruptData => K::CorruptMessage,
        R::BatchTooLarge => K::MessageTooLarge,
        R::OffsetOutOfRange => K::OffsetOutOfRange,
        R::StorageFailed | R::StorageFull | R::RemoteUnavailable => K::KafkaStorageError,
        // The client refreshes metadata and tries again (elsewhere, or later).
        R::NotLeader | R::ShuttingDown => K::NotLeaderOrFollower,
        R::NotEnoughReplicas => K::NotEnoughReplicasAfterAppend,
        R::ClusterUnavailable => K::RequestTimedOut,
        R::RebalanceInProgress => K::RebalanceInProgress,
        // A member that commits a partition it was not given holds a stale generation.
        R::IllegalGeneration | R::NotAssigned => K::IllegalGeneration,
        R::UnknownMember => K::UnknownMemberId,
        R::InconsistentGroupProtocol => K::InconsistentGroupProtocol,
        R::FencedInstance => K::FencedInstanceId,
        R::InvalidConfig => K::InvalidConfig,
        R::TooFewInSync => K::NotEnoughReplicas,
        R::FencedMemberEpoch => K::FencedMemberEpoch,
        R::StaleMemberEpoch => K::StaleMemberEpoch,
        R::UnreleasedInstance => K::UnreleasedInstanceId,
        R::ProducerFenced => K::ProducerFenced,
        R::InvalidProducerIdMapping => K::InvalidProducerIdMapping,
        R::ConcurrentTransactions => K::ConcurrentTransactions,
        R::InvalidTxnState => K::InvalidTxnState,
        R::InvalidTransactionTimeout => K::InvalidTransactionTimeout,
        // As Kafka's log validator refuses a keyless record on a compacted topic.
        R::KeyRequired => K::InvalidRecord,
        R::PolicyViolation => K::PolicyViolation,
        R::UnsupportedVersion => K::UnsupportedVersion,
        R::InvalidRequest => K::InvalidRequest,
        R::AuthenticationFailed => K::SaslAuthenticationFailed,
        R::UnsupportedSaslMechanism => K::UnsupportedSaslMechanism,
        // Where the resource is a group or the cluster the handler names its own code.
        R::NotAuthorized => K::TopicAuthorizationFailed,
        R::LogDiverged | R::Internal => K::UnknownServerError,
    }
}

/// Kafka's code for a failed topic change (a refused principal and an
/// invalid count of partitions have their own).
pub fn of_topic_change(reason: Reason) -> i16 {
    match reason {
        Reason::NotAuthorized => K::TopicAuthorizationFailed.code(),
        Reason::InvalidRequest => K::InvalidPartitions.code(),
        reason => of(reason),
    }
}
