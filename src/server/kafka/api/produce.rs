//! Produce. Each partition's record set (one Kafka batch) is kept as it
//! came inside a ringmq batch and appended through the core; the shard
//! checks it whole (a set that does not decode, or inflates past the
//! broker's limit, is refused and nothing of it is stored) and
//! answers once it is durable (and replicated as the broker group's mode
//! asks). An idempotent producer's batch is checked against its sequence on
//! the partition's owner, which must be this shard. Every partition of a
//! request is stored at once (their appends share the shards' flush
//! rounds) and answered in the request's order; acks=0 gets no response.

use super::{Api, At};
use crate::protocol::messages::QueueRef;
use crate::security::acl::Operation;
use crate::server::auth::authorizer;
use crate::server::core::mesh::Call;
use crate::server::core::service::Stored;
use crate::server::core::traffic::{Direction, Tally};
use crate::server::core::{Failure, Reason};
use crate::server::kafka::codes;
use crate::server::kafka::producers::{Check, Sequence};
use crate::server::kafka::records::to_ringmq;
use crate::server::kafka::{owned, Services};
use bytes::Bytes;
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{ApiKey, ProduceRequest, ProduceResponse};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use ringmq_shards::QueueId;

pub struct Produce;

impl Api for Produce {
    const KEY: ApiKey = ApiKey::Produce;
    const VERSIONS: (i16, i16) = (3, 9);
    // librdkafka before 2.8 compresses only for a broker that advertises
    // Produce v0 (librdkafka #4956); as Kafka 4.0 does (KAFKA-18659), v0-2
    // are advertised and refused when used.
    const ADVERTISED_MIN: i16 = 0;
    const NAME: &'static str = "kafka_Produce";
    const NOTE: &'static str = "a partition's record batch is stored as the producer sent it (compression \
                                kept), its records checked and indexed; idempotent producers' sequences checked; \
                                v0-2 advertised (librdkafka's compression check) and refused";
    type Request = ProduceRequest;
    type Response = ProduceResponse;

    fn produced_bytes(request: &ProduceRequest) -> u64 {
        record_bytes(request)
    }

    async fn serve(s: &Services, request: ProduceRequest, at: &At) -> Option<ProduceResponse> {
        // A transactional producer needs Write on its transactional id too (Kafka refuses every partition).
        let transactional = match request.transactional_id.as_deref() {
            Some(id) => at.principal.check(&s.core, Operation::Write, authorizer::transactional(id)),
            None => Ok(()),
        };
        let transactional = transactional.map_err(|f| (ResponseError::TransactionalIdAuthorizationFailed.code(), f.1));
        let transactional_id = request.transactional_id.as_ref().map(|t| t.as_str());
        let mut stores = Vec::new();
        for topic in &request.topic_data {
            let allowed = at.principal.check(&s.core, Operation::Write, authorizer::topic(&topic.name));
            let allowed = allowed.map_err(|f| (ResponseError::TopicAuthorizationFailed.code(), f.1));
            let allowed = transactional.clone().and(allowed);
            for partition in &topic.partition_data {
                let queue = QueueRef { topic: topic.name.to_string(), queue: partition.index.max(0) as u32 };
                let allowed = allowed.clone();
                stores.push(async move {
                    allowed?;
                    store(s, &queue, partition.records.as_ref(), transactional_id).await
                });
            }
        }
        let mut stored = futures_util::future::join_all(stores).await.into_iter();
        let mut responses = Vec::new();
        for topic in &request.topic_data {
            let mut partitions = Vec::new();
            for p in &topic.partition_data {
                let outcome = stored.next().unwrap_or_else(|| Err(missing()));
                partitions.push(answer(s, &topic.name, p.index, p.records.as_ref(), outcome));
            }
            let topic = TopicProduceResponse::default().with_name(topic.name.clone());
            responses.push(topic.with_partition_responses(partitions));
        }
        if request.acks == 0 {
            return None;
        }
        Some(ProduceResponse::default().with_responses(responses).with_throttle_time_ms(at.throttle_ms()))
    }
}

/// A refused partition: Kafka's code and a message.
type Refusal = (i16, String);

/// The record-set bytes of a produce (what a produce quota meters).
pub fn record_bytes(request: &ProduceRequest) -> u64 {
    let sets = request.topic_data.iter().flat_map(|t| &t.partition_data);
    sets.map(|p| p.records.as_ref().map_or(0, |r| r.len() as u64)).sum()
}

/// A partition's answer, counted in the topic's traffic.
fn answer(
    s: &Services,
    topic: &str,
    index: i32,
    records: Option<&Bytes>,
    outcome: Result<Stored, Refusal>,
) -> PartitionProduceResponse {
    let bytes = records.map_or(0, |r| r.len() as u64);
    let messages = outcome.as_ref().map_or(0, |s| u64::from(s.count));
    let tally = Tally { messages, bytes, failed: outcome.is_err() };
    s.core.count_traffic(Direction::Produce, Produce::NAME, topic, tally);
    let response = PartitionProduceResponse::default().with_index(index);
    match outcome {
        Ok(stored) => {
            let time = stored.log_append_time.unwrap_or(-1);
            response.with_base_offset(stored.base as i64).with_log_append_time_ms(time)
        }
        Err((code, message)) => {
            tracing::debug!(code, %message, "kafka produce refused");
            response.with_base_offset(-1).with_error_code(code).with_error_message(Some(StrBytes::from_string(message)))
        }
    }
}

/// Stores one partition's records: where (none stored for a retry of a
/// batch stored before).
async fn store(
    s: &Services,
    queue: &QueueRef,
    records: Option<&Bytes>,
    transactional_id: Option<&str>,
) -> Result<Stored, Refusal> {
    let records =
        records.ok_or((ResponseError::CorruptMessage.code(), "the partition's records are missing".to_string()))?;
    let translated = to_ringmq(records, queue.queue)?;
    let refused = |f: Failure| (codes::of(f.0), f.1);
    let Some(sequence) = translated.sequence else {
        return s.core.append(queue, &translated.batch).await.map_err(refused);
    };
    let slot = owned(&s.core, queue).map_err(|code| (code, format!("{queue:?} is not led by this broker")))?;
    if let Some(current) = s.core.txn_marks().fenced_below(sequence.producer_id).filter(|e| *e > sequence.epoch) {
        // A transaction of a newer epoch ended here: this producer was fenced.
        return Err(fenced(sequence, current));
    }
    if translated.transactional && !s.core.txn_marks().is_open(QueueId(slot.storage_id), sequence.producer_id) {
        let Some(id) = transactional_id else {
            let m = "transactional records need the request's transactional id";
            return Err((ResponseError::InvalidRecord.code(), m.into()));
        };
        verify(s, id, sequence, queue).await?;
    }
    let append = async {
        match translated.transactional {
            true => s.core.append_transactional(slot, &translated.batch, sequence.producer_id).await,
            false => s.core.append_here(slot, &translated.batch).await,
        }
    };
    match s.producers.check(&queue.topic, queue.queue, sequence) {
        Check::Store => match append.await {
            Ok(stored) => {
                s.producers.stored(&queue.topic, queue.queue, sequence, stored);
                Ok(stored)
            }
            Err(f) => {
                s.producers.failed(&queue.topic, queue.queue, sequence);
                Err(refused(f))
            }
        },
        Check::Duplicate(stored) => Ok(stored),
        Check::Pending => Err((ResponseError::RequestTimedOut.code(), "the same batch is being stored; retry".into())),
        Check::OutOfOrder { expected } => Err(out_of_order(sequence, expected)),
        Check::Fenced { current } => Err(fenced(sequence, current)),
    }
}

/// Before a transaction's first batch in a partition, its coordinator is
/// asked whether the producer's open transaction holds the partition
/// (KIP-890's verification): a fenced or ended producer's batch would open a
/// transaction no marker ever ends, holding read_committed readers forever.
/// A transactional id coordinated by another broker group is not asked.
async fn verify(s: &Services, id: &str, sequence: Sequence, queue: &QueueRef) -> Result<(), Refusal> {
    let partition = (queue.topic.clone(), queue.queue);
    let (producer_id, epoch) = (sequence.producer_id, sequence.epoch);
    let held = match s.core.coordinator(id) {
        Ok(shard) if shard == s.core.id() => s.coordinator.holds(id, producer_id, epoch, &partition),
        Ok(shard) => {
            let call = Call::VerifyTxn { id: id.to_string(), producer_id, epoch, partition };
            s.core.mesh().verify_txn(shard, call).await
        }
        Err(_) => return Ok(()),
    };
    match held {
        Ok(true) => Ok(()),
        Ok(false) => {
            let m = format!("{queue:?} is not in producer {producer_id}'s open transaction: AddPartitionsToTxn first");
            Err((ResponseError::InvalidTxnState.code(), m))
        }
        Err(Failure(Reason::ProducerFenced, m)) => Err((ResponseError::InvalidProducerEpoch.code(), m)),
        Err(f) => Err((codes::of(f.0), f.1)),
    }
}

fn fenced(s: Sequence, current: i16) -> Refusal {
    let m = format!("producer {} epoch {} is fenced by epoch {current}", s.producer_id, s.epoch);
    (ResponseError::InvalidProducerEpoch.code(), m)
}

fn out_of_order(s: Sequence, expected: i32) -> Refusal {
    let m = format!("producer {} sent sequence {} where {expected} comes next", s.producer_id, s.first);
    (ResponseError::OutOfOrderSequenceNumber.code(), m)
}

/// One result per partition is stored; a missing one would be a bug, told
/// to the client as a server error rather than a panic.
fn missing() -> Refusal {
    (ResponseError::UnknownServerError.code(), "the partition's outcome was lost".into())
}
