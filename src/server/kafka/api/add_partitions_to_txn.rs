//! AddPartitionsToTxn: partitions join the producer's transaction at its
//! coordinator, stored before the answer; every partition must exist in
//! this broker group (else that one is UNKNOWN_TOPIC_OR_PARTITION, the
//! others OPERATION_NOT_ATTEMPTED, and nothing is added). v4+, the form
//! brokers use, carries several transactions and may only verify.

use super::{Api, At};
use crate::protocol::messages::QueueRef;
use crate::security::acl::Operation;
use crate::server::auth::authorizer;
use crate::server::kafka::txns::{coordinated, refused};
use crate::server::kafka::{codes, permitted, Services};
use crate::server::tx::coordinator::Addition;
use kafka_protocol::messages::add_partitions_to_txn_request::{AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction};
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::{AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, ApiKey};
use kafka_protocol::ResponseError;

pub struct AddPartitionsToTxn;

/// The first version with several transactions per request.
const BATCHED: i16 = 4;

impl Api for AddPartitionsToTxn {
    const KEY: ApiKey = ApiKey::AddPartitionsToTxn;
    const VERSIONS: (i16, i16) = (0, 5);
    const NAME: &'static str = "kafka_AddPartitionsToTxn";
    const NOTE: &'static str = "partitions join the producer's transaction (stored and replicated before the \
                                answer); each must exist in this broker group; v4+: several transactions, verify-only";
    type Request = AddPartitionsToTxnRequest;
    type Response = AddPartitionsToTxnResponse;

    async fn serve(s: &Services, r: AddPartitionsToTxnRequest, at: &At) -> Option<AddPartitionsToTxnResponse> {
        let response = AddPartitionsToTxnResponse::default().with_throttle_time_ms(at.throttle_ms());
        if at.version < BATCHED {
            let t = AddPartitionsToTxnTransaction::default()
                .with_transactional_id(r.v3_and_below_transactional_id)
                .with_producer_id(r.v3_and_below_producer_id)
                .with_producer_epoch(r.v3_and_below_producer_epoch)
                .with_topics(r.v3_and_below_topics);
            return Some(response.with_results_by_topic_v3_and_below(add(s, at, &t).await));
        }
        let mut results = Vec::new();
        for t in &r.transactions {
            let topics = add(s, at, t).await;
            results.push(
                AddPartitionsToTxnResult::default()
                    .with_transactional_id(t.transactional_id.clone())
                    .with_topic_results(topics),
            );
        }
        Some(response.with_results_by_transaction(results))
    }
}

/// One transaction's partitions: added (or verified) whole, or refused.
async fn add(s: &Services, at: &At, t: &AddPartitionsToTxnTransaction) -> Vec<AddPartitionsToTxnTopicResult> {
    let id = t.transactional_id.as_str();
    let mut codes: Vec<Vec<i16>> = Vec::new();
    let mut partitions = Vec::new();
    let coordinated = coordinated(s, &at.principal, Operation::Write, id);
    for topic in &t.topics {
        let refused_topic = ResponseError::TopicAuthorizationFailed.code();
        let allowed =
            permitted(&s.core, &at.principal, Operation::Write, authorizer::topic(&topic.name), refused_topic);
        codes.push(
            topic
                .partitions
                .iter()
                .map(|&p| {
                    let queue = QueueRef { topic: topic.name.to_string(), queue: p.max(0) as u32 };
                    let code = match coordinated.and(allowed).map(|()| s.core.locate(&queue)) {
                        Err(code) => code,
                        Ok(Err(f)) => codes::of(f.0),
                        Ok(Ok(_)) if p < 0 => ResponseError::UnknownTopicOrPartition.code(),
                        Ok(Ok(_)) => codes::NONE,
                    };
                    partitions.push((queue.topic, queue.queue));
                    code
                })
                .collect(),
        );
    }
    let failed = codes.iter().flatten().any(|&c| c != codes::NONE);
    let outcome = if failed {
        None
    } else if t.verify_only {
        let (producer_id, epoch) = (t.producer_id.0, t.producer_epoch);
        let held = partitions.iter().map(|p| s.coordinator.holds(id, producer_id, epoch, p)).collect::<Result<_, _>>();
        Some(held.map(|held: Vec<bool>| {
            let code = |h: bool| if h { codes::NONE } else { ResponseError::TransactionAbortable.code() };
            held.into_iter().map(code).collect::<Vec<_>>()
        }))
    } else {
        let added = Addition::Partitions(partitions.clone());
        Some(
            s.coordinator
                .add(id, t.producer_id.0, t.producer_epoch, added)
                .await
                .map(|()| vec![codes::NONE; partitions.len()]),
        )
    };
    let flat: Vec<i16> = match outcome {
        // A refused partition: the others were not attempted.
        None => codes
            .iter()
            .flatten()
            .map(|&c| if c == codes::NONE { ResponseError::OperationNotAttempted.code() } else { c })
            .collect(),
        Some(Ok(each)) => each,
        Some(Err(f)) => vec![refused(id, f); partitions.len()],
    };
    results(&t.topics, flat)
}

/// Each partition's code, in the request's order.
fn results(topics: &[AddPartitionsToTxnTopic], codes: Vec<i16>) -> Vec<AddPartitionsToTxnTopicResult> {
    let mut codes = codes.into_iter();
    topics
        .iter()
        .map(|topic| {
            let partitions = topic
                .partitions
                .iter()
                .map(|&p| {
                    AddPartitionsToTxnPartitionResult::default()
                        .with_partition_index(p)
                        .with_partition_error_code(codes.next().unwrap_or(codes::NONE))
                })
                .collect();
            AddPartitionsToTxnTopicResult::default().with_name(topic.name.clone()).with_results_by_partition(partitions)
        })
        .collect()
}
