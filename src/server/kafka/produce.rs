//! Produce and InitProducerId. Each partition's record set is checked and
//! translated whole (a set that does not decode, or inflates past the batch
//! limit, is refused and nothing of it is stored), then appended through the
//! core, which answers once it is durable (and replicated as the broker
//! group's mode asks). An idempotent producer's batch is checked against its
//! sequence on the partition's owner, which must be this shard.

use super::codes;
use super::producers::{Check, Sequence};
use super::records::{to_ringmq, Refused};
use super::{owned, permitted, Services};
use crate::protocol::messages::QueueRef;
use crate::security::acl::Operation;
use crate::server::auth::authorizer::{self, Principal};
use crate::server::core::traffic::{Direction, Tally};
use bytes::Bytes;
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{
    InitProducerIdRequest, InitProducerIdResponse, ProduceRequest, ProduceResponse, ProducerId,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

const OUT_OF_ORDER_SEQUENCE_NUMBER: i16 = ResponseError::OutOfOrderSequenceNumber.code();
const TRANSACTIONAL_REFUSED: i16 = ResponseError::TransactionalIdAuthorizationFailed.code();
const INVALID_PRODUCER_EPOCH: i16 = ResponseError::InvalidProducerEpoch.code();

/// A refused partition: Kafka's code and a message.
type Refusal = (i16, String);

/// Every partition of the request is stored at once (their appends share
/// the shards' flush rounds), and answered in the request's order.
pub async fn produce(s: &Services, p: &Principal, request: &ProduceRequest) -> ProduceResponse {
    let mut stores = Vec::new();
    for topic in &request.topic_data {
        let allowed = p.check(&s.core, Operation::Write, authorizer::topic(&topic.name));
        let allowed = allowed.map_err(|f| (ResponseError::TopicAuthorizationFailed.code(), f.1));
        for partition in &topic.partition_data {
            let queue = QueueRef { topic: topic.name.to_string(), queue: partition.index.max(0) as u32 };
            let allowed = allowed.clone();
            stores.push(async move {
                allowed?;
                store(s, &queue, partition.records.as_ref()).await
            });
        }
    }
    let mut stored = futures_util::future::join_all(stores).await.into_iter();
    let mut responses = Vec::new();
    for topic in &request.topic_data {
        let mut partitions = Vec::new();
        for p in &topic.partition_data {
            let response = PartitionProduceResponse::default().with_index(p.index);
            let outcome = stored.next().expect("one result per partition");
            let bytes = p.records.as_ref().map_or(0, |r| r.len() as u64);
            let messages = outcome.as_ref().map_or(0, |(_, count)| u64::from(*count));
            let tally = Tally { messages, bytes, failed: outcome.is_err() };
            s.core.count_traffic(Direction::Produce, "kafka_Produce", &topic.name, tally);
            partitions.push(match outcome {
                Ok((base, _)) => response.with_base_offset(base as i64).with_log_append_time_ms(-1),
                Err((code, message)) => {
                    tracing::debug!(code, %message, "kafka produce refused");
                    response
                        .with_base_offset(-1)
                        .with_error_code(code)
                        .with_error_message(Some(StrBytes::from_string(message)))
                }
            });
        }
        responses
            .push(TopicProduceResponse::default().with_name(topic.name.clone()).with_partition_responses(partitions));
    }
    ProduceResponse::default().with_responses(responses)
}

/// The record-set bytes of a produce (what a produce quota meters).
pub fn record_bytes(request: &ProduceRequest) -> u64 {
    let sets = request.topic_data.iter().flat_map(|t| &t.partition_data);
    sets.map(|p| p.records.as_ref().map_or(0, |r| r.len() as u64)).sum()
}

/// Stores one partition's records; the offset of the first, and how many
/// were stored (none for a retry of a batch stored before).
async fn store(s: &Services, queue: &QueueRef, records: Option<&Bytes>) -> Result<(u64, u32), Refusal> {
    let records =
        records.ok_or((ResponseError::CorruptMessage.code(), "the partition's records are missing".to_string()))?;
    let translated = to_ringmq(records, queue.queue, s.core.config().max_batch_bytes).map_err(|r| match r {
        Refused::Corrupt(m) => (ResponseError::CorruptMessage.code(), m),
        Refused::TooLarge(m) => (ResponseError::MessageTooLarge.code(), m),
    })?;
    let refused = |f: crate::server::core::Failure| (codes::of(f.0), f.1);
    let Some(sequence) = translated.sequence else {
        return s.core.append(queue, &translated.batch).await.map_err(refused);
    };
    let slot = owned(&s.core, queue).map_err(|code| (code, format!("{queue:?} is not led by this broker")))?;
    match s.producers.check(&queue.topic, queue.queue, sequence) {
        Check::Store => match s.core.append_here(slot, &translated.batch).await {
            Ok((base, count)) => {
                s.producers.stored(&queue.topic, queue.queue, sequence, base);
                Ok((base, count))
            }
            Err(f) => {
                s.producers.failed(&queue.topic, queue.queue, sequence);
                Err(refused(f))
            }
        },
        Check::Duplicate(base) => Ok((base, 0)),
        Check::Pending => Err((ResponseError::RequestTimedOut.code(), "the same batch is being stored; retry".into())),
        Check::OutOfOrder { expected } => Err(out_of_order(sequence, expected)),
        Check::Fenced { current } => Err((
            INVALID_PRODUCER_EPOCH,
            format!("producer {} epoch {} is fenced by epoch {current}", sequence.producer_id, sequence.epoch),
        )),
    }
}

fn out_of_order(s: Sequence, expected: i32) -> Refusal {
    let m = format!("producer {} sent sequence {} where {expected} comes next", s.producer_id, s.first);
    (OUT_OF_ORDER_SEQUENCE_NUMBER, m)
}

/// A new producer id (epoch 0), or the next epoch of the one a producer
/// names (KIP-360); transactional producers are not served.
pub fn init_producer_id(s: &Services, p: &Principal, r: &InitProducerIdRequest) -> InitProducerIdResponse {
    let response = InitProducerIdResponse::default().with_producer_id(ProducerId(-1)).with_producer_epoch(-1);
    if let Some(id) = r.transactional_id.as_ref().filter(|id| !id.is_empty()) {
        let code = permitted(&s.core, p, Operation::Write, authorizer::transactional(id), TRANSACTIONAL_REFUSED);
        return response.with_error_code(code.err().unwrap_or(ResponseError::InvalidRequest.code()));
    }
    if r.producer_id.0 >= 0 && r.producer_epoch >= 0 && r.producer_epoch < i16::MAX {
        return response.with_producer_id(r.producer_id).with_producer_epoch(r.producer_epoch + 1);
    }
    response.with_producer_id(ProducerId(s.producers.new_id(s.core.now_ms()))).with_producer_epoch(0)
}
