//! CreatePartitions: a topic given more queues (Alter on the topic), placed
//! by the broker as a topic of that many would be (a replica assignment is
//! refused: ringmq places queues itself). A key's partition is its hash
//! modulo the count, so adding partitions moves keys, as in Kafka.

use super::{Api, At};
use crate::security::acl::Operation;
use crate::server::auth::authorizer;
use crate::server::core::topics::check_more_queues;
use crate::server::core::Failure;
use crate::server::kafka::codes::of_topic_change;
use crate::server::kafka::{text, Services};
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::{ApiKey, CreatePartitionsRequest, CreatePartitionsResponse};
use kafka_protocol::ResponseError;

pub struct CreatePartitions;

impl Api for CreatePartitions {
    const KEY: ApiKey = ApiKey::CreatePartitions;
    const VERSIONS: (i16, i16) = (0, 3);
    const NAME: &'static str = "kafka_CreatePartitions";
    const NOTE: &'static str = "a topic given more queues (Alter on the topic), placed by the broker; keys move \
                                to hash modulo the new count, as in Kafka";
    type Request = CreatePartitionsRequest;
    type Response = CreatePartitionsResponse;

    async fn serve(s: &Services, r: CreatePartitionsRequest, at: &At) -> Option<CreatePartitionsResponse> {
        let mut results = Vec::new();
        for t in &r.topics {
            let queues = t.count.max(0) as u32;
            let outcome = match at.principal.check(&s.core, Operation::Alter, authorizer::topic(&t.name)) {
                Err(f) => Err((ResponseError::TopicAuthorizationFailed.code(), f.1)),
                Ok(()) if t.assignments.is_some() => Err((
                    ResponseError::InvalidReplicaAssignment.code(),
                    "ringmq places a topic's queues itself: send no assignment".to_string(),
                )),
                Ok(()) if r.validate_only => {
                    let now = s.core.metadata().topics.get(t.name.as_str()).map(|t| t.queues.len());
                    check_more_queues(&t.name, now, queues).map_err(refused)
                }
                Ok(()) => s.core.add_queues(&t.name, queues).await.map_err(refused),
            };
            let result = CreatePartitionsTopicResult::default().with_name(t.name.clone());
            results.push(match outcome {
                Ok(()) => result,
                Err((code, message)) => result.with_error_code(code).with_error_message(Some(text(message))),
            });
        }
        Some(CreatePartitionsResponse::default().with_results(results).with_throttle_time_ms(at.throttle_ms()))
    }
}

fn refused(f: Failure) -> (i16, String) {
    (of_topic_change(f.0), f.1)
}
