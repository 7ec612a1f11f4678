//! SyncGroup: the leader's assignment bytes are handed out as it gave them;
//! a Kafka consumer's are read for the partitions, to check commits.

use super::{Api, At};
use crate::protocol::messages::Assignment;
use crate::security::acl::Operation;
use crate::server::auth::authorizer::Principal;
use crate::server::kafka::groups::{consumer_assignment, coordinated, membership, refused, CONSUMER};
use crate::server::kafka::Services;
use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, SyncGroupRequest, SyncGroupResponse};

pub struct SyncGroup;

impl Api for SyncGroup {
    const KEY: ApiKey = ApiKey::SyncGroup;
    const VERSIONS: (i16, i16) = (0, 5);
    const NAME: &'static str = "kafka_SyncGroup";
    const NOTE: &'static str =
        "the leader's assignment bytes handed out as given; a consumer's partitions read for commit checks";
    type Request = SyncGroupRequest;
    type Response = SyncGroupResponse;

    async fn serve(s: &Services, r: SyncGroupRequest, at: &At) -> Option<SyncGroupResponse> {
        Some(sync(s, &at.principal, &r).await.with_throttle_time_ms(at.throttle_ms()))
    }
}

async fn sync(s: &Services, p: &Principal, r: &SyncGroupRequest) -> SyncGroupResponse {
    if let Err(code) = coordinated(s, p, Operation::Read, &r.group_id) {
        return SyncGroupResponse::default().with_error_code(code);
    }
    let who = membership(&r.group_id, r.generation_id, &r.member_id);
    let assignments: Vec<(String, Vec<u8>)> =
        r.assignments.iter().map(|a| (a.member_id.to_string(), a.assignment.to_vec())).collect();
    let consumer = r.protocol_type.as_deref().is_none_or(|t| t == CONSUMER);
    let parse = |bytes: &[u8]| if consumer { consumer_assignment(bytes) } else { Ok(Assignment::default()) };
    let fenced = s.groups.check_instance(&who.group, r.group_instance_id.as_deref(), &who.member);
    match async {
        fenced?;
        s.groups.sync(&who, &assignments, parse).await
    }
    .await
    {
        Ok(share) => SyncGroupResponse::default()
            .with_protocol_type(r.protocol_type.clone())
            .with_protocol_name(r.protocol_name.clone())
            .with_assignment(Bytes::from(share.bytes)),
        Err(f) => SyncGroupResponse::default().with_error_code(refused(&who, f)),
    }
}
