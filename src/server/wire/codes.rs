//! The native protocol's error codes for the broker's failure reasons: the
//! wire sends a failure as its code and message.

use crate::protocol::messages::FetchFailed as WireFetchFailed;
use crate::protocol::ErrorCode;
use crate::server::core::{Failure, Reason};
use crate::server::data::fetch::FetchFailed;
use ringmq_shards::FlushPolicy;

/// A flush policy on the wire: 0 sync, 1 async.
pub fn flush_code(policy: FlushPolicy) -> u8 {
    match policy {
        FlushPolicy::Sync => 0,
        FlushPolicy::Async => 1,
    }
}

/// The flush policy of a wire code, if it names one.
pub fn flush_policy(code: u8) -> Option<FlushPolicy> {
    match code {
        0 => Some(FlushPolicy::Sync),
        1 => Some(FlushPolicy::Async),
        _ => None,
    }
}

/// The wire's code for a reason.
pub fn code(reason: Reason) -> ErrorCode {
    use Reason as R;
    match reason {
        R::Malformed => ErrorCode::Malformed,
        R::UnsupportedVersion => ErrorCode::UnsupportedVersion,
        R::UnknownTopic => ErrorCode::UnknownTopic,
        R::UnknownQueue => ErrorCode::UnknownQueue,
        R::TopicExists => ErrorCode::TopicExists,
        R::InvalidTopic => ErrorCode::InvalidTopic,
        R::CrcMismatch => ErrorCode::CrcMismatch,
        R::KeyRequired => ErrorCode::InvalidBatch,
        // The message says which config refuses it.
        R::PolicyViolation => ErrorCode::InvalidConfig,
        R::BatchTooLarge => ErrorCode::BatchTooLarge,
        R::InvalidBatch => ErrorCode::InvalidBatch,
        R::OffsetOutOfRange => ErrorCode::OffsetOutOfRange,
        R::StorageFailed => ErrorCode::StorageFailed,
        R::ShuttingDown => ErrorCode::ShuttingDown,
        R::InvalidRequest => ErrorCode::InvalidRequest,
        R::Internal => ErrorCode::Internal,
        R::RebalanceInProgress => ErrorCode::RebalanceInProgress,
        R::IllegalGeneration => ErrorCode::IllegalGeneration,
        R::UnknownMember => ErrorCode::UnknownMember,
        R::NotAssigned => ErrorCode::NotAssigned,
        R::CorruptData => ErrorCode::CorruptData,
        R::StorageFull => ErrorCode::StorageFull,
        R::NotLeader => ErrorCode::NotLeader,
        R::LogDiverged => ErrorCode::LogDiverged,
        R::NotEnoughReplicas => ErrorCode::NotEnoughReplicas,
        R::ClusterUnavailable => ErrorCode::ClusterUnavailable,
        R::InconsistentGroupProtocol => ErrorCode::InconsistentGroupProtocol,
        R::FencedInstance => ErrorCode::FencedInstance,
        R::InvalidConfig => ErrorCode::InvalidConfig,
        R::TooFewInSync => ErrorCode::TooFewInSync,
        R::RemoteUnavailable => ErrorCode::RemoteUnavailable,
        // Kafka's consumer protocol only: the native protocol has generations.
        R::FencedMemberEpoch | R::StaleMemberEpoch => ErrorCode::IllegalGeneration,
        R::UnreleasedInstance => ErrorCode::FencedInstance,
        // Kafka's transactions only: no native request meets them.
        R::ProducerFenced
        | R::InvalidProducerIdMapping
        | R::ConcurrentTransactions
        | R::InvalidTxnState
        | R::InvalidTransactionTimeout => ErrorCode::InvalidRequest,
        R::AuthenticationFailed => ErrorCode::AuthenticationFailed,
        R::UnsupportedSaslMechanism => ErrorCode::UnsupportedSaslMechanism,
        R::NotAuthorized => ErrorCode::NotAuthorized,
    }
}

/// A failure as the wire sends it: its code and message.
pub fn failed(Failure(reason, message): Failure) -> (ErrorCode, String) {
    (code(reason), message)
}

/// A fetch's failure as a FetchMany entry carries it.
pub fn fetch_failed(f: FetchFailed) -> WireFetchFailed {
    let (code, message) = failed(f.failure);
    WireFetchFailed { code, message, damaged: f.damaged }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flush_codes_round_trip_and_others_name_none() {
        for policy in [FlushPolicy::Sync, FlushPolicy::Async] {
            assert_eq!(flush_policy(flush_code(policy)), Some(policy));
        }
        assert_eq!(flush_policy(2), None);
    }

    #[test]
    fn every_reason_has_its_own_code() {
        use Reason as R;
        let all = [
            R::Malformed,
            R::UnsupportedVersion,
            R::UnknownTopic,
            R::UnknownQueue,
            R::TopicExists,
            R::InvalidTopic,
            R::CrcMismatch,
            R::BatchTooLarge,
            R::InvalidBatch,
            R::OffsetOutOfRange,
            R::StorageFailed,
            R::ShuttingDown,
            R::InvalidRequest,
            R::Internal,
            R::RebalanceInProgress,
            R::IllegalGeneration,
            R::UnknownMember,
            R::NotAssigned,
            R::CorruptData,
            R::StorageFull,
            R::NotLeader,
            R::LogDiverged,
            R::NotEnoughReplicas,
            R::ClusterUnavailable,
            R::InconsistentGroupProtocol,
            R::AuthenticationFailed,
            R::UnsupportedSaslMechanism,
            R::NotAuthorized,
            R::FencedInstance,
            R::InvalidConfig,
            R::TooFewInSync,
            R::RemoteUnavailable,
        ];
        let codes: std::collections::HashSet<ErrorCode> = all.iter().map(|r| code(*r)).collect();
        assert_eq!(codes.len(), all.len());
        assert!(!codes.contains(&ErrorCode::None));
    }
}
