//! AddOffsetsToTxn: a consumer group joins the producer's transaction at
//! its coordinator (its offsets, committed by TxnOffsetCommit, become the
//! group's when the transaction commits).

use super::{Api, At};
use crate::security::acl::Operation;
use crate::server::auth::authorizer;
use crate::server::kafka::groups::GROUP_REFUSED;
use crate::server::kafka::txns::{coordinated, refused};
use crate::server::kafka::{codes, permitted, Services};
use crate::server::tx::coordinator::Addition;
use kafka_protocol::messages::{AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, ApiKey};

pub struct AddOffsetsToTxn;

impl Api for AddOffsetsToTxn {
    const KEY: ApiKey = ApiKey::AddOffsetsToTxn;
    const VERSIONS: (i16, i16) = (0, 4);
    const NAME: &'static str = "kafka_AddOffsetsToTxn";
    const NOTE: &'static str = "a consumer group joins the producer's transaction (stored and replicated before \
                                the answer)";
    type Request = AddOffsetsToTxnRequest;
    type Response = AddOffsetsToTxnResponse;

    async fn serve(s: &Services, r: AddOffsetsToTxnRequest, at: &At) -> Option<AddOffsetsToTxnResponse> {
        let id = r.transactional_id.as_str();
        let response = AddOffsetsToTxnResponse::default().with_throttle_time_ms(at.throttle_ms());
        let allowed = coordinated(s, &at.principal, Operation::Write, id).and_then(|()| {
            permitted(&s.core, &at.principal, Operation::Read, authorizer::group(&r.group_id), GROUP_REFUSED)
        });
        if let Err(code) = allowed {
            return Some(response.with_error_code(code));
        }
        let added = Addition::Group(r.group_id.to_string());
        let code = match s.coordinator.add(id, r.producer_id.0, r.producer_epoch, added).await {
            Ok(()) => codes::NONE,
            Err(f) => refused(id, f),
        };
        Some(response.with_error_code(code))
    }
}
