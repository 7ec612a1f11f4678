//! JoinGroup on ringmq's groups, served by the group's coordinator: the
//! coordinator keeps the group's protocol type and picks the assignment
//! protocol every member speaks. From v4 a first join without a member id
//! is answered MEMBER_ID_REQUIRED with the id to join with (KIP-394); from
//! v5 a `group.instance.id` makes a static member (KIP-345), which comes
//! back from a restart within its session to its old assignment.

use super::{Api, At};
use crate::security::acl::Operation;
use crate::server::auth::authorizer::Principal;
use crate::server::groups::coordinator::JoinRequest;
use crate::server::groups::JoinAnswer;
use crate::server::kafka::groups::coordinated;
use crate::server::kafka::{codes, text, Services};
use bytes::Bytes;
use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::{ApiKey, JoinGroupRequest, JoinGroupResponse};
use kafka_protocol::ResponseError;

pub struct JoinGroup;

impl Api for JoinGroup {
    const KEY: ApiKey = ApiKey::JoinGroup;
    const VERSIONS: (i16, i16) = (0, 7);
    const NAME: &'static str = "kafka_JoinGroup";
    const NOTE: &'static str = "on ringmq's groups: the coordinator keeps the protocol type and picks the assignment protocol every member speaks; MEMBER_ID_REQUIRED (v4+), static members (v5+)";
    type Request = JoinGroupRequest;
    type Response = JoinGroupResponse;

    async fn serve(s: &Services, r: JoinGroupRequest, at: &At) -> Option<JoinGroupResponse> {
        Some(join(s, &at.principal, &at.client_id, &r, at.version).await.with_throttle_time_ms(at.throttle_ms()))
    }
}

async fn join(s: &Services, p: &Principal, client_id: &str, r: &JoinGroupRequest, version: i16) -> JoinGroupResponse {
    let failed = |code: i16| JoinGroupResponse::default().with_error_code(code).with_generation_id(-1);
    if let Err(code) = coordinated(s, p, Operation::Read, &r.group_id) {
        return failed(code);
    }
    // v0 has no rebalance timeout: Kafka uses the session's. A client's
    // max.poll.interval (librdkafka: 5 minutes) is held to group_wait_max.
    let rebalance = if r.rebalance_timeout_ms > 0 { r.rebalance_timeout_ms } else { r.session_timeout_ms };
    let most = s.core.config().group_wait_max.as_millis().min(u128::from(u32::MAX)) as u32;
    let req = JoinRequest {
        member: r.member_id.to_string(),
        client_id: client_id.to_string(),
        session_timeout_ms: r.session_timeout_ms.max(0) as u32,
        rebalance_timeout_ms: (rebalance.max(0) as u32).min(most),
        protocol_type: r.protocol_type.to_string(),
        protocols: r.protocols.iter().map(|p| (p.name.to_string(), p.metadata.to_vec())).collect(),
        instance: r.group_instance_id.as_ref().map(|i| i.to_string()),
        // KIP-394: from v4 a first dynamic join is answered with an id to come back with.
        id_first: version >= 4,
    };
    match s.groups.join(&r.group_id, req).await {
        Ok(JoinAnswer::IdRequired(id)) => failed(ResponseError::MemberIdRequired.code()).with_member_id(text(id)),
        Ok(JoinAnswer::Formed(f)) => {
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
