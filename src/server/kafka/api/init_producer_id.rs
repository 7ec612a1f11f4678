//! InitProducerId: for an idempotent producer a new producer id (epoch 0),
//! or the next epoch of the one it names (KIP-360); for a transactional
//! producer its transactional id's producer with the epoch bumped, which
//! fences every older producer of the id (its open transaction aborted
//! first), from the id's coordinator.

use super::{Api, At};
use crate::security::acl::Operation;
use crate::server::kafka::txns::{coordinated, refused};
use crate::server::kafka::Services;
use kafka_protocol::messages::{ApiKey, InitProducerIdRequest, InitProducerIdResponse, ProducerId};

pub struct InitProducerId;

impl Api for InitProducerId {
    const KEY: ApiKey = ApiKey::InitProducerId;
    const VERSIONS: (i16, i16) = (0, 4);
    const NAME: &'static str = "kafka_InitProducerId";
    const NOTE: &'static str = "idempotent producers: a new id, or the next epoch of one (KIP-360); a \
                                transactional id's producer with its epoch bumped (older producers fenced, an \
                                open transaction aborted), at the id's coordinator";
    type Request = InitProducerIdRequest;
    type Response = InitProducerIdResponse;

    async fn serve(s: &Services, r: InitProducerIdRequest, at: &At) -> Option<InitProducerIdResponse> {
        let response = InitProducerIdResponse::default()
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1)
            .with_throttle_time_ms(at.throttle_ms());
        // The wall clock: ids stay unique across restarts.
        let new_id = || s.producers.new_id(s.core.clock().now_ms());
        let Some(id) = r.transactional_id.as_ref().filter(|id| !id.is_empty()) else {
            if r.producer_id.0 >= 0 && r.producer_epoch >= 0 && r.producer_epoch < i16::MAX {
                return Some(response.with_producer_id(r.producer_id).with_producer_epoch(r.producer_epoch + 1));
            }
            return Some(response.with_producer_id(ProducerId(new_id())).with_producer_epoch(0));
        };
        if let Err(code) = coordinated(s, &at.principal, Operation::Write, id) {
            return Some(response.with_error_code(code));
        }
        let given = (r.producer_id.0 >= 0).then_some((r.producer_id.0, r.producer_epoch));
        Some(match s.coordinator.init(id, r.transaction_timeout_ms, given, new_id).await {
            Ok((producer_id, epoch)) => response.with_producer_id(ProducerId(producer_id)).with_producer_epoch(epoch),
            Err(f) => response.with_error_code(refused(id, f)),
        })
    }
}
