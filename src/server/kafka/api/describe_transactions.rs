//! DescribeTransactions: each transactional id's state, producer, timeout,
//! start and partitions, from its coordinator (kafka-transactions.sh describe).

use super::{Api, At};
use crate::security::acl::Operation;
use crate::server::kafka::txns::coordinated;
use crate::server::kafka::{text, Services};
use kafka_protocol::messages::describe_transactions_response::{TopicData, TransactionState};
use kafka_protocol::messages::{ApiKey, DescribeTransactionsRequest, DescribeTransactionsResponse, ProducerId};
use kafka_protocol::ResponseError;
use std::collections::BTreeMap;

pub struct DescribeTransactions;

impl Api for DescribeTransactions {
    const KEY: ApiKey = ApiKey::DescribeTransactions;
    const VERSIONS: (i16, i16) = (0, 0);
    const NAME: &'static str = "kafka_DescribeTransactions";
    const NOTE: &'static str =
        "a transactional id's state, producer, timeout, start and partitions, at its coordinator";
    type Request = DescribeTransactionsRequest;
    type Response = DescribeTransactionsResponse;

    async fn serve(s: &Services, r: DescribeTransactionsRequest, at: &At) -> Option<DescribeTransactionsResponse> {
        let states = r
            .transactional_ids
            .iter()
            .map(|id| {
                let state =
                    TransactionState::default().with_transactional_id(id.clone()).with_producer_id(ProducerId(-1));
                if let Err(code) = coordinated(s, &at.principal, Operation::Describe, id) {
                    return state.with_error_code(code);
                }
                let Some(t) = s.coordinator.describe(id) else {
                    return state.with_error_code(ResponseError::TransactionalIdNotFound.code());
                };
                let mut topics: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
                for (topic, p) in &t.partitions {
                    topics.entry(topic).or_default().push(*p as i32);
                }
                let topics = topics
                    .into_iter()
                    .map(|(topic, ps)| TopicData::default().with_topic(text(topic).into()).with_partitions(ps))
                    .collect();
                state
                    .with_transaction_state(text(t.state.name()))
                    .with_transaction_timeout_ms(t.timeout_ms.min(i32::MAX as u64) as i32)
                    .with_transaction_start_time_ms(if t.started_ms == 0 { -1 } else { t.started_ms as i64 })
                    .with_producer_id(ProducerId(t.producer_id))
                    .with_producer_epoch(t.epoch)
                    .with_topics(topics)
            })
            .collect();
        Some(
            DescribeTransactionsResponse::default()
                .with_transaction_states(states)
                .with_throttle_time_ms(at.throttle_ms()),
        )
    }
}
