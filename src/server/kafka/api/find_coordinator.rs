//! FindCoordinator: a consumer group's coordinator is the shard that
//! coordinates it for native clients too, so a group is one group whichever
//! protocol joins it; a transactional id's (key type 1) is found the same
//! way, by the hash of its name over every shard of the cluster.

use super::{Api, At};
use crate::protocol::api::coordinator_of;
use crate::security::acl::Operation;
use crate::server::auth::authorizer::{self, Principal};
use crate::server::kafka::brokers::brokers;
use crate::server::kafka::groups::GROUP_REFUSED;
use crate::server::kafka::txns::TXN_REFUSED;
use crate::server::kafka::{permitted, text, Services};
use kafka_protocol::messages::BrokerId;
use kafka_protocol::messages::{ApiKey, FindCoordinatorRequest, FindCoordinatorResponse};
use kafka_protocol::ResponseError;

pub struct FindCoordinator;

/// Key types.
const GROUP: i8 = 0;
const TRANSACTION: i8 = 1;

impl Api for FindCoordinator {
    const KEY: ApiKey = ApiKey::FindCoordinator;
    const VERSIONS: (i16, i16) = (0, 3);
    const NAME: &'static str = "kafka_FindCoordinator";
    const NOTE: &'static str =
        "the shard that coordinates the group (the one the native SDK uses) or the transactional id (key type 1)";
    type Request = FindCoordinatorRequest;
    type Response = FindCoordinatorResponse;

    async fn serve(s: &Services, r: FindCoordinatorRequest, at: &At) -> Option<FindCoordinatorResponse> {
        Some(find_coordinator(s, &at.principal, &r).with_throttle_time_ms(at.throttle_ms()))
    }
}

fn find_coordinator(s: &Services, p: &Principal, r: &FindCoordinatorRequest) -> FindCoordinatorResponse {
    let response = FindCoordinatorResponse::default().with_node_id(BrokerId(-1));
    let allowed = match r.key_type {
        GROUP => permitted(&s.core, p, Operation::Describe, authorizer::group(&r.key), GROUP_REFUSED),
        TRANSACTION => permitted(&s.core, p, Operation::Describe, authorizer::transactional(&r.key), TXN_REFUSED),
        other => {
            let m = format!("coordinator key type {other} is not one Kafka defines (0: group, 1: transaction)");
            return response.with_error_code(ResponseError::InvalidRequest.code()).with_error_message(Some(text(m)));
        }
    };
    if let Err(code) = allowed {
        return response.with_error_code(code);
    }
    let brokers = brokers(&s.core);
    match brokers.get(coordinator_of(&r.key, brokers.len())) {
        Some(Some(at)) => response.with_node_id(at.node_id).with_host(at.host.clone()).with_port(at.port),
        _ => {
            let m = "the coordinator has no leader now; ask again";
            response.with_error_code(ResponseError::CoordinatorNotAvailable.code()).with_error_message(Some(text(m)))
        }
    }
}
