//! Kafka's consumer-group calls on ringmq's groups: FindCoordinator names the
//! shard that coordinates the group (the same one the native SDK uses), and
//! JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit and OffsetFetch
//! are served there by `Groups`, so a group's members and offsets are the
//! same group whichever protocol reads them. Kafka's assignment bytes pass
//! through as the leader sent them; the coordinator reads the partitions in
//! them to check commits.

use super::metadata::brokers;
use super::Services;
use super::{codes, permitted, text};
use crate::protocol::api::coordinator_of;
use crate::protocol::messages::{self as msg, Assignment, GroupOffset, Membership, QueueRef};
use crate::security::acl::Operation;
use crate::server::auth::authorizer::{self, Principal};
use crate::server::core::Failure;
use crate::server::groups::coordinator::JoinRequest;
use bytes::Bytes;
use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::offset_commit_response::{OffsetCommitResponsePartition, OffsetCommitResponseTopic};
use kafka_protocol::messages::offset_fetch_response::{OffsetFetchResponsePartition, OffsetFetchResponseTopic};
use kafka_protocol::messages::{
    BrokerId, ConsumerProtocolAssignment, FindCoordinatorRequest, FindCoordinatorResponse, HeartbeatRequest,
    HeartbeatResponse, JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest, LeaveGroupResponse, OffsetCommitRequest,
    OffsetCommitResponse, OffsetFetchRequest, OffsetFetchResponse, SyncGroupRequest, SyncGroupResponse, TopicName,
};
use kafka_protocol::protocol::{Decodable, StrBytes};
use kafka_protocol::ResponseError;
use std::time::Duration;

const GROUP_REFUSED: i16 = ResponseError::GroupAuthorizationFailed.code();
const TOPIC_REFUSED: i16 = ResponseError::TopicAuthorizationFailed.code();

/// The protocol type of Kafka's consumers, whose assignments this reads.
const CONSUMER: &str = "consumer";

/// FindCoordinator for a group (transactions are not served).
pub fn find_coordinator(s: &Services, p: &Principal, r: &FindCoordinatorRequest) -> FindCoordinatorResponse {
    let response = FindCoordinatorResponse::default().with_node_id(BrokerId(-1));
    if r.key_type == 0 {
        if let Err(code) = permitted(&s.core, p, Operation::Describe, authorizer::group(&r.key), GROUP_REFUSED) {
            return response.with_error_code(code);
        }
    }
    if r.key_type != 0 {
        // Until transactions are served: the one FindCoordinator error that
        // librdkafka, the Java client and aiokafka all treat as final (a
        // retriable or any other code leaves librdkafka asking every 500 ms
        // until its timeout); the message says what it really is.
        let m = "transactions are not served by this broker yet: only consumer groups have a coordinator";
        return response
            .with_error_code(ResponseError::TransactionalIdAuthorizationFailed.code())
            .with_error_message(Some(text(m)));
    }
    let brokers = brokers(&s.core);
    match brokers.get(coordinator_of(&r.key, brokers.len())) {
        Some(Some(at)) => response.with_node_id(at.node_id).with_host(at.host.clone()).with_port(at.port),
        _ => {
            let m = "the group's coordinator has no leader now; ask again";
            response.with_error_code(ResponseError::CoordinatorNotAvailable.code()).with_error_message(Some(text(m)))
        }
    }
}

/// Serves a group request only if the principal may do `operation` to the
/// group, and only on the group's coordinator shard; elsewhere the client is
/// told to find the coordinator again.
fn coordinated(s: &Services, p: &Principal, operation: Operation, group: &str) -> Result<(), i16> {
    permitted(&s.core, p, operation, authorizer::group(group), GROUP_REFUSED)?;
    match s.core.coordinator(group) {
        Ok(shard) if shard == s.core.id() => Ok(()),
        _ => Err(ResponseError::NotCoordinator.code()),
    }
}

pub async fn join(s: &Services, p: &Principal, client_id: &str, r: &JoinGroupRequest) -> JoinGroupResponse {
    let failed = |code: i16| JoinGroupResponse::default().with_error_code(code).with_generation_id(-1);
    if let Err(code) = coordinated(s, p, Operation::Read, &r.group_id) {
        return failed(code);
    }
    // v0 has no rebalance timeout: Kafka uses the session's. A client's
    // max.poll.interval (librdkafka: 5 minutes) is held to max_group_wait.
    let rebalance = if r.rebalance_timeout_ms > 0 { r.rebalance_timeout_ms } else { r.session_timeout_ms };
    let most = s.core.config().max_group_wait.as_millis().min(u128::from(u32::MAX)) as u32;
    let req = JoinRequest {
        member: r.member_id.to_string(),
        client_id: client_id.to_string(),
        session_timeout_ms: r.session_timeout_ms.max(0) as u32,
        rebalance_timeout_ms: (rebalance.max(0) as u32).min(most),
        protocol_type: r.protocol_type.to_string(),
        protocols: r.protocols.iter().map(|p| (p.name.to_string(), p.metadata.to_vec())).collect(),
    };
    match s.groups.join(&r.group_id, req).await {
        Ok(f) => {
            let members = f
                .members
                .into_iter()
                .map(|(id, metadata)| {
                    JoinGroupResponseMember::default().with_member_id(text(id)).with_metadata(Bytes::from(metadata))
                })
                .collect();
            JoinGroupResponse::default()
                .with_generation_id(f.generation as i32)
                .with_protocol_type(Some(r.protocol_type.clone()))
                .with_protocol_name(Some(text(f.protocol)))
                .with_leader(text(f.leader))
                .with_member_id(text(f.member))
                .with_members(members)
        }
        Err(f) => {
            tracing::debug!(group = %r.group_id.0, code = ?f.0, message = %f.1, "kafka join refused");
            failed(codes::of(f.0))
        }
    }
}

pub async fn sync(s: &Services, p: &Principal, r: &SyncGroupRequest) -> SyncGroupResponse {
    if let Err(code) = coordinated(s, p, Operation::Read, &r.group_id) {
        return SyncGroupResponse::default().with_error_code(code);
    }
    let who = membership(&r.group_id, r.generation_id, &r.member_id);
    let assignments: Vec<(String, Vec<u8>)> =
        r.assignments.iter().map(|a| (a.member_id.to_string(), a.assignment.to_vec())).collect();
    let consumer = r.protocol_type.as_deref().is_none_or(|t| t == CONSUMER);
    let parse = |bytes: &[u8]| if consumer { consumer_assignment(bytes) } else { Ok(Assignment::default()) };
    match s.groups.sync(&who, &assignments, parse).await {
        Ok(share) => SyncGroupResponse::default()
            .with_protocol_type(r.protocol_type.clone())
            .with_protocol_name(r.protocol_name.clone())
            .with_assignment(Bytes::from(share.bytes)),
        Err(f) => SyncGroupResponse::default().with_error_code(refused(&who, f)),
    }
}

/// Answers at once: Kafka's members poll their heartbeat for a rebalance.
pub async fn heartbeat(s: &Services, p: &Principal, r: &HeartbeatRequest) -> HeartbeatResponse {
    if let Err(code) = coordinated(s, p, Operation::Read, &r.group_id) {
        return HeartbeatResponse::default().with_error_code(code);
    }
    let who = membership(&r.group_id, r.generation_id, &r.member_id);
    match s.groups.heartbeat(&who, Duration::ZERO).await {
        Ok(()) => HeartbeatResponse::default(),
        Err(f) => HeartbeatResponse::default().with_error_code(refused(&who, f)),
    }
}

/// v0-v2 name one member; v3+ a list of them, each answered.
pub fn leave(s: &Services, p: &Principal, r: &LeaveGroupRequest, version: i16) -> LeaveGroupResponse {
    if let Err(code) = coordinated(s, p, Operation::Read, &r.group_id) {
        return LeaveGroupResponse::default().with_error_code(code);
    }
    let leave_one = |member: &StrBytes| {
        // Leaving needs no generation: any the member holds.
        let who = membership(&r.group_id, -1, member);
        s.groups.leave(&who).map_or_else(|f| codes::of(f.0), |()| codes::NONE)
    };
    if version < 3 {
        return LeaveGroupResponse::default().with_error_code(leave_one(&r.member_id));
    }
    let members = r
        .members
        .iter()
        .map(|m| {
            MemberResponse::default()
                .with_member_id(m.member_id.clone())
                .with_group_instance_id(m.group_instance_id.clone())
                .with_error_code(leave_one(&m.member_id))
        })
        .collect();
    LeaveGroupResponse::default().with_members(members)
}

/// Each partition's offset through `Groups::commit`: durable, and checked
/// against the member's generation and assignment as native commits are.
pub async fn commit(s: &Services, principal: &Principal, r: &OffsetCommitRequest) -> OffsetCommitResponse {
    let coordinated = coordinated(s, principal, Operation::Read, &r.group_id);
    let member = membership(&r.group_id, r.generation_id_or_member_epoch, &r.member_id);
    let mut topics = Vec::new();
    for t in &r.topics {
        let topic = permitted(&s.core, principal, Operation::Read, authorizer::topic(&t.name), TOPIC_REFUSED);
        let mut partitions = Vec::new();
        for p in &t.partitions {
            let code = match coordinated.and(topic) {
                Err(code) => code,
                Ok(()) if p.committed_offset < 0 => ResponseError::OffsetOutOfRange.code(),
                Ok(()) => {
                    let queue = QueueRef { topic: t.name.to_string(), queue: p.partition_index.max(0) as u32 };
                    let c = GroupOffset { member: member.clone(), queue, offset: p.committed_offset as u64 };
                    s.groups.commit(&c).await.map_or_else(|f| refused(&member, f), |()| codes::NONE)
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

/// The group's committed offsets (-1: none) of the partitions asked for, or
/// (no topics named) of every partition it has committed.
pub fn committed(s: &Services, principal: &Principal, r: &OffsetFetchRequest) -> OffsetFetchResponse {
    if let Err(code) = coordinated(s, principal, Operation::Describe, &r.group_id) {
        return OffsetFetchResponse::default().with_error_code(code);
    }
    let asked: Vec<(String, Vec<i32>)> = match &r.topics {
        Some(topics) => topics.iter().map(|t| (t.name.to_string(), t.partition_indexes.clone())).collect(),
        None => s
            .core
            .describe(&[])
            .topics
            .into_iter()
            .map(|t| {
                let queues = (0..t.queue_shards.len() as i32).collect();
                (t.name, queues)
            })
            .collect(),
    };
    let listed = r.topics.is_some();
    let describable = |topic: &str| principal.allows(&s.core, Operation::Describe, authorizer::topic(topic));
    // Of every committed partition, only the topics the principal may describe.
    let asked: Vec<(String, Vec<i32>)> = asked.into_iter().filter(|(t, _)| listed || describable(t)).collect();
    let topics = asked
        .into_iter()
        .map(|(topic, queues)| {
            let partitions: Vec<OffsetFetchResponsePartition> = queues
                .into_iter()
                .filter_map(|q| {
                    let queue = QueueRef { topic: topic.clone(), queue: q.max(0) as u32 };
                    let offset = s.groups.committed(&r.group_id, &queue);
                    let offset = if offset == msg::NO_OFFSET { -1 } else { offset as i64 };
                    (listed || offset >= 0).then(|| {
                        OffsetFetchResponsePartition::default()
                            .with_partition_index(q)
                            .with_committed_offset(offset)
                            .with_metadata(Some(StrBytes::default()))
                    })
                })
                .collect();
            let response = OffsetFetchResponseTopic::default().with_name(TopicName(text(topic.clone())));
            if listed && !describable(&topic) {
                let refused =
                    |p: OffsetFetchResponsePartition| p.with_error_code(TOPIC_REFUSED).with_committed_offset(-1);
                return response.with_partitions(partitions.into_iter().map(refused).collect());
            }
            response.with_partitions(partitions)
        })
        .collect();
    OffsetFetchResponse::default().with_topics(topics)
}

/// The partitions named by a Kafka consumer's assignment (empty bytes: none).
/// A newer version than the codec knows is read as the newest it knows, as
/// Kafka's consumers do.
fn consumer_assignment(bytes: &[u8]) -> Result<Assignment, String> {
    if bytes.is_empty() {
        return Ok(Assignment::default());
    }
    let mut buf = Bytes::copy_from_slice(bytes);
    let version =
        bytes::Buf::try_get_i16(&mut buf).map_err(|_| "a consumer assignment starts with a 2-byte version")?;
    let a = ConsumerProtocolAssignment::decode(&mut buf, version.clamp(0, 3)).map_err(|e| e.to_string())?;
    let topics = a
        .assigned_partitions
        .iter()
        .map(|tp| (tp.topic.to_string(), tp.partitions.iter().map(|p| (*p).max(0) as u32).collect()))
        .collect();
    Ok(Assignment { topics })
}

/// Kafka's generation -1 (a consumer outside any generation) is ringmq's 0.
fn membership(group: &StrBytes, generation: i32, member: &StrBytes) -> Membership {
    Membership { group: group.to_string(), generation: generation.max(0) as u32, member: member.to_string() }
}

fn refused(who: &Membership, f: Failure) -> i16 {
    tracing::debug!(group = %who.group, member = %who.member, code = ?f.0, message = %f.1, "kafka group call refused");
    codes::of(f.0)
}
