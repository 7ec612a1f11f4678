//! What Kafka's transaction APIs share: the check that the principal may
//! use a transactional id and that this shard coordinates it, and a
//! coordinator refusal's code. The APIs are in `api/` (InitProducerId with
//! a transactional id, AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit,
//! EndTxn, DescribeTransactions, ListTransactions), served by the
//! transaction coordinator (`tx/coordinator.rs`).

use super::{codes, permitted, Services};
use crate::security::acl::Operation;
use crate::server::auth::authorizer::{self, Principal};
use crate::server::core::Failure;
use kafka_protocol::ResponseError;

pub const TXN_REFUSED: i16 = ResponseError::TransactionalIdAuthorizationFailed.code();

/// Serves a transaction request only if the principal may `operation` the
/// transactional id, and only on the id's coordinator shard; elsewhere the
/// client is told to find the coordinator again.
pub fn coordinated(s: &Services, p: &Principal, operation: Operation, id: &str) -> Result<(), i16> {
    permitted(&s.core, p, operation, authorizer::transactional(id), TXN_REFUSED)?;
    match s.core.coordinator(id) {
        Ok(shard) if shard == s.core.id() => Ok(()),
        _ => Err(ResponseError::NotCoordinator.code()),
    }
}

/// A coordinator's refusal as Kafka's code (logged at debug).
pub fn refused(id: &str, f: Failure) -> i16 {
    tracing::debug!(id, code = ?f.0, message = %f.1, "kafka transaction call refused");
    codes::of(f.0)
}
