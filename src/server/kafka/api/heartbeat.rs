//! Heartbeat: answered at once; Kafka's members poll their heartbeat for a
//! rebalance (native heartbeats park instead).

use super::{Api, At};
use crate::security::acl::Operation;
use crate::server::auth::authorizer::Principal;
use crate::server::kafka::groups::{coordinated, membership, refused};
use crate::server::kafka::Services;
use kafka_protocol::messages::{ApiKey, HeartbeatRequest, HeartbeatResponse};
use std::time::Duration;

pub struct Heartbeat;

impl Api for Heartbeat {
    const KEY: ApiKey = ApiKey::Heartbeat;
    const VERSIONS: (i16, i16) = (0, 4);
    const NAME: &'static str = "kafka_Heartbeat";
    const NOTE: &'static str = "answered at once (Kafka members poll it for a rebalance)";
    type Request = HeartbeatRequest;
    type Response = HeartbeatResponse;

    async fn serve(s: &Services, r: HeartbeatRequest, at: &At) -> Option<HeartbeatResponse> {
        Some(heartbeat(s, &at.principal, &r).await.with_throttle_time_ms(at.throttle_ms()))
    }
}

async fn heartbeat(s: &Services, p: &Principal, r: &HeartbeatRequest) -> HeartbeatResponse {
    if let Err(code) = coordinated(s, p, Operation::Read, &r.group_id) {
        return HeartbeatResponse::default().with_error_code(code);
    }
    let who = membership(&r.group_id, r.generation_id, &r.member_id);
    let fenced = s.groups.check_instance(&who.group, r.group_instance_id.as_deref(), &who.member);
    match async {
        fenced?;
        s.groups.heartbeat(&who, Duration::ZERO).await
    }
    .await
    {
        Ok(()) => HeartbeatResponse::default(),
        Err(f) => HeartbeatResponse::default().with_error_code(refused(&who, f)),
    }
}
