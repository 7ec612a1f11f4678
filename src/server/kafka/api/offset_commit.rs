//! OffsetCommit: each partition's offset and metadata through
//! `Groups::commit`: durable, and checked against the member's generation
//! and assignment as native commits are; metadata past
//! `offset_metadata_bytes_max` is refused (OFFSET_METADATA_TOO_LARGE) and
//! that partition's commit not stored.

use super::{Api, At};
use crate::protocol::messages::{GroupOffset, QueueRef};
use crate::security::acl::Operation;
use crate::server::auth::authorizer::{self, Principal};
use crate::server::kafka::groups::{coordinated, membership, refused, TOPIC_REFUSED};
use crate::server::kafka::{codes, permitted, Services};
use kafka_protocol::messages::offset_commit_request::OffsetCommitRequestPartition;
use kafka_protocol::messages::offset_commit_response::{OffsetCommitResponsePartition, OffsetCommitResponseTopic};
use kafka_protocol::messages::{ApiKey, OffsetCommitRequest, OffsetCommitResponse};
use kafka_protocol::ResponseError;

pub struct OffsetCommit;

impl Api for OffsetCommit {
    const KEY: ApiKey = ApiKey::OffsetCommit;
    const VERSIONS: (i16, i16) = (2, 9);
    const NAME: &'static str = "kafka_OffsetCommit";
    const NOTE: &'static str = "durable with its metadata, fenced by generation (v9: a consumer-protocol member's \
                                epoch) and assignment as native commits are";
    type Request = OffsetCommitRequest;
    type Response = OffsetCommitResponse;

    async fn serve(s: &Services, r: OffsetCommitRequest, at: &At) -> Option<OffsetCommitResponse> {
        Some(commit(s, &at.principal, &r).await.with_throttle_time_ms(at.throttle_ms()))
    }
}

async fn commit(s: &Services, principal: &Principal, r: &OffsetCommitRequest) -> OffsetCommitResponse {
    let coordinated = coordinated(s, principal, Operation::Read, &r.group_id);
    let member = membership(&r.group_id, r.generation_id_or_member_epoch, &r.member_id);
    let fenced = s.groups.check_instance(&member.group, r.group_instance_id.as_deref(), &member.member);
    let mut topics = Vec::new();
    for t in &r.topics {
        let topic = permitted(&s.core, principal, Operation::Read, authorizer::topic(&t.name), TOPIC_REFUSED);
        let mut partitions = Vec::new();
        for p in &t.partitions {
            let code = match coordinated.and(topic) {
                Err(code) => code,
                Ok(()) if fenced.is_err() => refused(&member, fenced.clone().expect_err("checked")),
                Ok(()) if p.committed_offset < 0 => ResponseError::OffsetOutOfRange.code(),
                Ok(()) if metadata(p).len() > s.core.config().offset_metadata_bytes_max => {
                    ResponseError::OffsetMetadataTooLarge.code()
                }
                Ok(()) => {
                    let queue = QueueRef { topic: t.name.to_string(), queue: p.partition_index.max(0) as u32 };
                    let c = GroupOffset { member: member.clone(), queue, offset: p.committed_offset as u64 };
                    s.groups.commit(&c, metadata(p)).await.map_or_else(|f| refused(&member, f), |()| codes::NONE)
                }
            };
            partitions.push(
                OffsetCommitResponsePartition::default().with_partition_index(p.partition_index).with_error_code(code),
            );
        }
        topics.push(OffsetCommitResponseTopic::default().with_name(t.name.clone()).with_partitions(partitions));
    }
    OffsetCommitResponse::default().with_topics(topics)
}

/// A partition's commit metadata (null is Kafka's "no metadata": "").
fn metadata(p: &OffsetCommitRequestPartition) -> &str {
    p.committed_metadata.as_deref().unwrap_or_default()
}
