//! FindCoordinator: a consumer group's coordinator is the shard that
//! coordinates it for native clients too, so a group is one group whichever
//! protocol joins it. Key type 1 (a transaction's coordinator) is refused
//! until transactions are served.

use super::{Api, At};
use crate::protocol::api::coordinator_of;
use crate::security::acl::Operation;
use crate::server::auth::authorizer::{self, Principal};
use crate::server::kafka::brokers::brokers;
use crate::server::kafka::groups::GROUP_REFUSED;
use crate::server::kafka::{permitted, text, Services};
use kafka_protocol::messages::BrokerId;
use kafka_protocol::messages::{ApiKey, FindCoordinatorRequest, FindCoordinatorResponse};
use kafka_protocol::ResponseError;

pub struct FindCoordinator;

impl Api for FindCoordinator {
    const KEY: ApiKey = ApiKey::FindCoordinator;
    const VERSIONS: (i16, i16) = (0, 3);
    const NAME: &'static str = "kafka_FindCoordinator";
    const NOTE: &'static str =
        "the shard that coordinates the group (the one the native SDK uses); key type 1 (transactions) refused";
    type Request = FindCoordinatorRequest;
    type Response = FindCoordinatorResponse;

    async fn serve(s: &Services, r: FindCoordinatorRequest, at: &At) -> Option<FindCoordinatorResponse> {
        Some(find_coordinator(s, &at.principal, &r).with_throttle_time_ms(at.throttle_ms()))
    }
}

fn find_coordinator(s: &Services, p: &Principal, r: &FindCoordinatorRequest) -> FindCoordinatorResponse {
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
