//! EndTxn: commits or aborts the producer's transaction at its
//! coordinator: the decision stored, a marker written into every partition
//! it touched and its offsets ended at each group's coordinator, the
//! outcome stored, then the answer. The same end again is answered as done
//! (a retry); the other end of an ended transaction is INVALID_TXN_STATE.

use super::{Api, At};
use crate::security::acl::Operation;
use crate::server::kafka::txns::{coordinated, refused};
use crate::server::kafka::{codes, Services};
use kafka_protocol::messages::{ApiKey, EndTxnRequest, EndTxnResponse};

pub struct EndTxn;

impl Api for EndTxn {
    const KEY: ApiKey = ApiKey::EndTxn;
    const VERSIONS: (i16, i16) = (0, 4);
    const NAME: &'static str = "kafka_EndTxn";
    const NOTE: &'static str = "commit or abort: the decision stored, a marker (control batch) written into every \
                                partition of the transaction and its offsets ended, then the outcome stored";
    type Request = EndTxnRequest;
    type Response = EndTxnResponse;

    async fn serve(s: &Services, r: EndTxnRequest, at: &At) -> Option<EndTxnResponse> {
        let id = r.transactional_id.as_str();
        let response = EndTxnResponse::default().with_throttle_time_ms(at.throttle_ms());
        if let Err(code) = coordinated(s, &at.principal, Operation::Write, id) {
            return Some(response.with_error_code(code));
        }
        let code = match s.coordinator.end(id, r.producer_id.0, r.producer_epoch, r.committed).await {
            Ok(()) => codes::NONE,
            Err(f) => refused(id, f),
        };
        Some(response.with_error_code(code))
    }
}
