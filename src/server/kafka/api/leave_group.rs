//! LeaveGroup: v0-v2 name one member; v3+ a list of them, each answered.

use super::{Api, At};
use crate::security::acl::Operation;
use crate::server::auth::authorizer::Principal;
use crate::server::kafka::groups::{coordinated, membership};
use crate::server::kafka::{codes, Services};
use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::{ApiKey, LeaveGroupRequest, LeaveGroupResponse};
use kafka_protocol::protocol::StrBytes;

pub struct LeaveGroup;

impl Api for LeaveGroup {
    const KEY: ApiKey = ApiKey::LeaveGroup;
    const VERSIONS: (i16, i16) = (0, 4);
    const NAME: &'static str = "kafka_LeaveGroup";
    const NOTE: &'static str = "one member (v0-v2) or a list, each answered";
    type Request = LeaveGroupRequest;
    type Response = LeaveGroupResponse;

    async fn serve(s: &Services, r: LeaveGroupRequest, at: &At) -> Option<LeaveGroupResponse> {
        Some(leave(s, &at.principal, &r, at.version).with_throttle_time_ms(at.throttle_ms()))
    }
}

fn leave(s: &Services, p: &Principal, r: &LeaveGroupRequest, version: i16) -> LeaveGroupResponse {
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
