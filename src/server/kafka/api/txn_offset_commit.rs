//! TxnOffsetCommit, at the group's coordinator: offsets a transaction
//! commits for the group, stored pending under the producer's id until its
//! transaction ends (its commit makes them the group's, an abort drops
//! them). Metadata past `offset_metadata_bytes_max` is refused
//! (OFFSET_METADATA_TOO_LARGE), as is an offset of a partition that does
//! not exist; a refused partition's offset is not stored. From v3 a
//! consumer's group metadata comes along (KIP-447) and fences a zombie: a
//! member the group no longer has (UNKNOWN_MEMBER_ID), or at an older
//! generation or epoch than the partition's assignment (ILLEGAL_GENERATION,
//! as Kafka answers for transactional commits).

use super::{Api, At};
use crate::protocol::messages::{Membership, QueueRef};
use crate::security::acl::Operation;
use crate::server::auth::authorizer;
use crate::server::core::offsets::Committed;
use crate::server::core::Reason;
use crate::server::kafka::groups::{self, TOPIC_REFUSED};
use crate::server::kafka::txns::TXN_REFUSED;
use crate::server::kafka::{codes, permitted, Services};
use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{ApiKey, TxnOffsetCommitRequest, TxnOffsetCommitResponse};
use kafka_protocol::ResponseError;

pub struct TxnOffsetCommit;

impl Api for TxnOffsetCommit {
    const KEY: ApiKey = ApiKey::TxnOffsetCommit;
    const VERSIONS: (i16, i16) = (0, 4);
    const NAME: &'static str = "kafka_TxnOffsetCommit";
    const NOTE: &'static str = "a transaction's offsets for a group, stored pending at the group's coordinator \
                                until the transaction ends (the group's on commit, dropped on abort)";
    type Request = TxnOffsetCommitRequest;
    type Response = TxnOffsetCommitResponse;

    async fn serve(s: &Services, r: TxnOffsetCommitRequest, at: &At) -> Option<TxnOffsetCommitResponse> {
        let p = &at.principal;
        let allowed =
            permitted(&s.core, p, Operation::Write, authorizer::transactional(&r.transactional_id), TXN_REFUSED)
                .and_then(|()| groups::coordinated(s, p, Operation::Read, &r.group_id));
        let mut codes_by_topic = Vec::new();
        let mut offsets = Vec::new();
        for t in &r.topics {
            let topic = permitted(&s.core, p, Operation::Read, authorizer::topic(&t.name), TOPIC_REFUSED);
            let mut each = Vec::new();
            for part in &t.partitions {
                let queue = QueueRef { topic: t.name.to_string(), queue: part.partition_index.max(0) as u32 };
                let metadata = part.committed_metadata.as_deref().unwrap_or_default();
                let member = allowed.and(topic).and_then(|()| of_the_group(s, &r, &queue));
                let code = match member.map(|()| s.core.home(&queue)) {
                    Err(code) => code,
                    Ok(Err(f)) => codes::of(f.0),
                    Ok(Ok(_)) if part.partition_index < 0 => ResponseError::UnknownTopicOrPartition.code(),
                    Ok(Ok(_)) if part.committed_offset < 0 => ResponseError::OffsetOutOfRange.code(),
                    Ok(Ok(_)) if metadata.len() > s.core.config().offset_metadata_bytes_max => {
                        ResponseError::OffsetMetadataTooLarge.code()
                    }
                    Ok(Ok(_)) => {
                        let committed = Committed { offset: part.committed_offset as u64, metadata: metadata.into() };
                        offsets.push((queue.topic, queue.queue, committed));
                        codes::NONE
                    }
                };
                each.push((part.partition_index, code));
            }
            codes_by_topic.push(each);
        }
        if let Err(f) = s.core.commit_txn_offsets(&r.group_id, r.producer_id.0, &offsets).await {
            tracing::debug!(group = %r.group_id.as_str(), code = ?f.0, message = %f.1, "transactional offsets not stored");
            let code = codes::of(f.0);
            for (_, c) in codes_by_topic.iter_mut().flatten().filter(|(_, c)| *c == codes::NONE) {
                *c = code;
            }
        }
        let topics = r
            .topics
            .iter()
            .zip(codes_by_topic)
            .map(|(t, each)| {
                let partitions = each
                    .into_iter()
                    .map(|(index, code)| {
                        TxnOffsetCommitResponsePartition::default().with_partition_index(index).with_error_code(code)
                    })
                    .collect();
                TxnOffsetCommitResponseTopic::default().with_name(t.name.clone()).with_partitions(partitions)
            })
            .collect();
        Some(TxnOffsetCommitResponse::default().with_topics(topics).with_throttle_time_ms(at.throttle_ms()))
    }
}

/// Whether the consumer whose group metadata came with `r` may commit
/// `queue` (a request without a member id, as before v3, is not checked).
fn of_the_group(s: &Services, r: &TxnOffsetCommitRequest, queue: &QueueRef) -> Result<(), i16> {
    if r.member_id.is_empty() {
        return Ok(());
    }
    let member = Membership {
        group: r.group_id.to_string(),
        generation: r.generation_id as u32,
        member: r.member_id.to_string(),
    };
    s.groups.may_commit(&member, queue).map_err(|f| match f.0 {
        Reason::StaleMemberEpoch => ResponseError::IllegalGeneration.code(),
        reason => codes::of(reason),
    })
}
