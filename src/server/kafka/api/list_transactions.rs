//! ListTransactions: the transactional ids this shard (a Kafka broker)
//! coordinates that the principal may describe, filtered by state, producer
//! id, how long their transaction has been open (v1) and a regex of whole
//! ids (v2); an unknown state name is listed back, as Kafka does.

use super::{Api, At};
use crate::security::acl::Operation;
use crate::server::auth::authorizer;
use crate::server::kafka::{text, Services};
use crate::server::tx::coordinator::TxnState;
use kafka_protocol::messages::list_transactions_response::TransactionState;
use kafka_protocol::messages::{ApiKey, ListTransactionsRequest, ListTransactionsResponse, ProducerId};
use kafka_protocol::ResponseError;

pub struct ListTransactions;

const STATES: [TxnState; 6] = [
    TxnState::Empty,
    TxnState::Ongoing,
    TxnState::PrepareCommit,
    TxnState::PrepareAbort,
    TxnState::CompleteCommit,
    TxnState::CompleteAbort,
];

impl Api for ListTransactions {
    const KEY: ApiKey = ApiKey::ListTransactions;
    const VERSIONS: (i16, i16) = (0, 2);
    const NAME: &'static str = "kafka_ListTransactions";
    const NOTE: &'static str = "the transactional ids this shard coordinates, by state, producer id, time open \
                                (v1) and id regex (v2)";
    type Request = ListTransactionsRequest;
    type Response = ListTransactionsResponse;

    async fn serve(s: &Services, r: ListTransactionsRequest, at: &At) -> Option<ListTransactionsResponse> {
        let response = ListTransactionsResponse::default().with_throttle_time_ms(at.throttle_ms());
        let pattern = match r.transactional_id_pattern.as_deref().filter(|p| !p.is_empty()) {
            None => None,
            Some(p) => match regex::Regex::new(&format!("^(?:{p})$")) {
                Ok(re) => Some(re),
                Err(_) => return Some(response.with_error_code(ResponseError::InvalidRegularExpression.code())),
            },
        };
        let unknown: Vec<_> =
            r.state_filters.iter().filter(|f| !STATES.iter().any(|s| s.name() == f.as_str())).cloned().collect();
        let now = s.core.clock().now_ms() as i64;
        let listed = s
            .coordinator
            .list()
            .into_iter()
            .filter(|(_, t)| r.state_filters.is_empty() || r.state_filters.iter().any(|f| f.as_str() == t.state.name()))
            .filter(|(_, t)| {
                r.producer_id_filters.is_empty() || r.producer_id_filters.contains(&ProducerId(t.producer_id))
            })
            .filter(|(_, t)| r.duration_filter < 0 || now - started(t.started_ms) > r.duration_filter)
            .filter(|(id, _)| pattern.as_ref().is_none_or(|re| re.is_match(id)))
            .filter(|(id, _)| at.principal.check(&s.core, Operation::Describe, authorizer::transactional(id)).is_ok())
            .map(|(id, t)| {
                TransactionState::default()
                    .with_transactional_id(text(id).into())
                    .with_producer_id(ProducerId(t.producer_id))
                    .with_transaction_state(text(t.state.name()))
            })
            .collect();
        Some(response.with_unknown_state_filters(unknown).with_transaction_states(listed))
    }
}

/// When a transaction began, as Kafka gives it (-1: none yet).
fn started(ms: u64) -> i64 {
    if ms == 0 {
        -1
    } else {
        ms as i64
    }
}
