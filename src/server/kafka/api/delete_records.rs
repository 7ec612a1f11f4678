//! DeleteRecords: a partition's records below an offset removed (its start,
//! Kafka's log start offset, moved there; -1: everything it holds), durably
//! before the answer, on the partition's leader (this shard). The space
//! comes back once no queue of the shard reads the segments below it.

use super::{Api, At};
use crate::protocol::messages::QueueRef;
use crate::security::acl::Operation;
use crate::server::auth::authorizer;
use crate::server::data::retention;
use crate::server::kafka::{codes, owned, permitted, Services};
use kafka_protocol::messages::delete_records_response::{DeleteRecordsPartitionResult, DeleteRecordsTopicResult};
use kafka_protocol::messages::{ApiKey, DeleteRecordsRequest, DeleteRecordsResponse};
use kafka_protocol::ResponseError;

pub struct DeleteRecords;

impl Api for DeleteRecords {
    const KEY: ApiKey = ApiKey::DeleteRecords;
    const VERSIONS: (i16, i16) = (0, 2);
    const NAME: &'static str = "kafka_DeleteRecords";
    const NOTE: &'static str = "a queue's start moved (Delete on the topic), recorded in the replicated log \
                                before the answer, so it holds over a fail-over";
    type Request = DeleteRecordsRequest;
    type Response = DeleteRecordsResponse;

    async fn serve(s: &Services, r: DeleteRecordsRequest, at: &At) -> Option<DeleteRecordsResponse> {
        let mut topics = Vec::new();
        for t in &r.topics {
            let refused = ResponseError::TopicAuthorizationFailed.code();
            let allowed = permitted(&s.core, &at.principal, Operation::Delete, authorizer::topic(&t.name), refused);
            let mut partitions = Vec::new();
            for p in &t.partitions {
                let queue = QueueRef { topic: t.name.to_string(), queue: p.partition_index.max(0) as u32 };
                let offset = (p.offset >= 0).then_some(p.offset as u64);
                let outcome = match allowed.and_then(|()| owned(&s.core, &queue)) {
                    Err(code) => Err(code),
                    Ok(slot) => retention::delete_records(&s.core, slot, offset).await.map_err(|f| codes::of(f.0)),
                };
                let result = DeleteRecordsPartitionResult::default().with_partition_index(p.partition_index);
                partitions.push(match outcome {
                    Ok(start) => result.with_low_watermark(start as i64),
                    Err(code) => result.with_low_watermark(-1).with_error_code(code),
                });
            }
            topics.push(DeleteRecordsTopicResult::default().with_name(t.name.clone()).with_partitions(partitions));
        }
        Some(DeleteRecordsResponse::default().with_topics(topics).with_throttle_time_ms(at.throttle_ms()))
    }
}
