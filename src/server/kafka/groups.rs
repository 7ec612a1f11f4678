//! What Kafka's group APIs share: the coordinator check, a Kafka
//! consumer's assignment read for its partitions, Kafka's generation as
//! ringmq's, and a refusal's code. The APIs are in `api/` (FindCoordinator,
//! JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch),
//! served by `Groups` on the group's coordinator shard, so a group's members
//! and offsets are the same group whichever protocol reads them.

use super::{codes, permitted, Services};
use crate::protocol::messages::{Assignment, Membership};
use crate::security::acl::Operation;
use crate::server::auth::authorizer::{self, Principal};
use crate::server::core::{Core, Failure};
use crate::server::groups::coordinator::ParseError;
use crate::server::groups::member_epochs::Partition;
use bytes::Bytes;
use kafka_protocol::messages::ConsumerProtocolAssignment;
use kafka_protocol::protocol::{Decodable, StrBytes};
use kafka_protocol::ResponseError;
use std::collections::BTreeMap;

pub const GROUP_REFUSED: i16 = ResponseError::GroupAuthorizationFailed.code();
pub const TOPIC_REFUSED: i16 = ResponseError::TopicAuthorizationFailed.code();

/// The protocol type of Kafka's consumers, whose assignments this reads.
pub const CONSUMER: &str = "consumer";

/// Serves a group request only if the principal may do `operation` to the
/// group, and only on the group's coordinator shard; elsewhere the client is
/// told to find the coordinator again.
pub fn coordinated(s: &Services, p: &Principal, operation: Operation, group: &str) -> Result<(), i16> {
    permitted(&s.core, p, operation, authorizer::group(group), GROUP_REFUSED)?;
    match s.core.coordinator(group) {
        Ok(shard) if shard == s.core.id() => Ok(()),
        _ => Err(ResponseError::NotCoordinator.code()),
    }
}

/// The partitions named by a Kafka consumer's assignment (empty bytes: none).
/// A newer version than the codec knows is read as the newest it knows, as
/// Kafka's consumers do.
pub fn consumer_assignment(bytes: &[u8]) -> Result<Assignment, ParseError> {
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
pub fn membership(group: &StrBytes, generation: i32, member: &StrBytes) -> Membership {
    Membership { group: group.to_string(), generation: generation.max(0) as u32, member: member.to_string() }
}

pub fn refused(who: &Membership, f: Failure) -> i16 {
    tracing::debug!(group = %who.group, member = %who.member, code = ?f.0, message = %f.1, "kafka group call refused");
    codes::of(f.0)
}

/// A consumer-protocol member's partitions by topic, each with its topic id
/// (None: the topic is gone), as KIP-848's messages carry them.
pub fn by_topic_id(core: &Core, partitions: &[Partition]) -> Vec<(Option<uuid::Uuid>, String, Vec<i32>)> {
    let metadata = core.metadata();
    let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for (topic, p) in partitions {
        by_topic.entry(topic).or_default().push(*p as i32);
    }
    by_topic
        .into_iter()
        .map(|(topic, ps)| {
            (metadata.topics.get(topic).map(|t| uuid::Uuid::from_bytes(t.id(topic))), topic.to_string(), ps)
        })
        .collect()
}
