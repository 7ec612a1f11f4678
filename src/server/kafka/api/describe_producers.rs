//! DescribeProducers: the producers a partition's owner knows (idempotent
//! producers' last sequences, remembered in memory for the last
//! `--idempotence-window` pairs) and where each one's open transaction
//! began (kafka-transactions.sh describe-producers, find-hanging).

use super::{Api, At};
use crate::protocol::messages::QueueRef;
use crate::security::acl::Operation;
use crate::server::auth::authorizer;
use crate::server::kafka::groups::TOPIC_REFUSED;
use crate::server::kafka::{owned, permitted, Services};
use kafka_protocol::messages::describe_producers_response::{PartitionResponse, ProducerState, TopicResponse};
use kafka_protocol::messages::{ApiKey, DescribeProducersRequest, DescribeProducersResponse, ProducerId};
use ringmq_shards::QueueId;
use std::collections::BTreeMap;

pub struct DescribeProducers;

impl Api for DescribeProducers {
    const KEY: ApiKey = ApiKey::DescribeProducers;
    const VERSIONS: (i16, i16) = (0, 0);
    const NAME: &'static str = "kafka_DescribeProducers";
    const NOTE: &'static str = "a partition's producers as its owner knows them: epoch, last sequence, and the \
                                first offset of an open transaction";
    type Request = DescribeProducersRequest;
    type Response = DescribeProducersResponse;

    async fn serve(s: &Services, r: DescribeProducersRequest, at: &At) -> Option<DescribeProducersResponse> {
        let topics = r
            .topics
            .iter()
            .map(|t| {
                let allowed =
                    permitted(&s.core, &at.principal, Operation::Read, authorizer::topic(&t.name), TOPIC_REFUSED);
                let partitions = t
                    .partition_indexes
                    .iter()
                    .map(|&index| {
                        let response = PartitionResponse::default().with_partition_index(index);
                        let queue = QueueRef { topic: t.name.to_string(), queue: index.max(0) as u32 };
                        match allowed.and_then(|()| owned(&s.core, &queue)) {
                            Ok(slot) => response.with_active_producers(producers(s, &queue, QueueId(slot.storage_id))),
                            Err(code) => response.with_error_code(code),
                        }
                    })
                    .collect();
                TopicResponse::default().with_name(t.name.clone()).with_partitions(partitions)
            })
            .collect();
        Some(DescribeProducersResponse::default().with_topics(topics).with_throttle_time_ms(at.throttle_ms()))
    }
}

/// Every producer known in the partition: sequences from the idempotence
/// state, open transactions from the transaction marks.
fn producers(s: &Services, queue: &QueueRef, id: QueueId) -> Vec<ProducerState> {
    let mut all: BTreeMap<i64, ProducerState> = BTreeMap::new();
    let blank = |producer: i64| {
        ProducerState::default()
            .with_producer_id(ProducerId(producer))
            .with_producer_epoch(-1)
            .with_last_sequence(-1)
            .with_last_timestamp(-1)
            .with_current_txn_start_offset(-1)
    };
    for (producer, epoch, last) in s.producers.on(&queue.topic, queue.queue) {
        let state = blank(producer).with_producer_epoch(i32::from(epoch)).with_last_sequence(last);
        all.insert(producer, state);
    }
    for (producer, first) in s.core.txn_marks().open_in(id) {
        let state = all.remove(&producer).unwrap_or_else(|| blank(producer));
        all.insert(producer, state.with_current_txn_start_offset(first as i64));
    }
    all.into_values().collect()
}
