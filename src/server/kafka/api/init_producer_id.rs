//! InitProducerId: a new producer id (epoch 0), or the next epoch of the
//! one a producer names (KIP-360); transactional producers are not served.

use super::{Api, At};
use crate::security::acl::Operation;
use crate::server::auth::authorizer;
use crate::server::kafka::{permitted, Services};
use kafka_protocol::messages::{ApiKey, InitProducerIdRequest, InitProducerIdResponse, ProducerId};
use kafka_protocol::ResponseError;

pub struct InitProducerId;

impl Api for InitProducerId {
    const KEY: ApiKey = ApiKey::InitProducerId;
    const VERSIONS: (i16, i16) = (0, 4);
    const NAME: &'static str = "kafka_InitProducerId";
    const NOTE: &'static str = "idempotent producers: a new id, or the next epoch of one (KIP-360); \
                                a transactional id is refused";
    type Request = InitProducerIdRequest;
    type Response = InitProducerIdResponse;

    async fn serve(s: &Services, r: InitProducerIdRequest, at: &At) -> Option<InitProducerIdResponse> {
        let response = InitProducerIdResponse::default()
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1)
            .with_throttle_time_ms(at.throttle_ms());
        if let Some(id) = r.transactional_id.as_ref().filter(|id| !id.is_empty()) {
            let refused = ResponseError::TransactionalIdAuthorizationFailed.code();
            let code = permitted(&s.core, &at.principal, Operation::Write, authorizer::transactional(id), refused);
            return Some(response.with_error_code(code.err().unwrap_or(ResponseError::InvalidRequest.code())));
        }
        if r.producer_id.0 >= 0 && r.producer_epoch >= 0 && r.producer_epoch < i16::MAX {
            return Some(response.with_producer_id(r.producer_id).with_producer_epoch(r.producer_epoch + 1));
        }
        let id = s.producers.new_id(s.core.now_ms());
        Some(response.with_producer_id(ProducerId(id)).with_producer_epoch(0))
    }
}
