//! DeleteTopics: the ringmq topics, whichever protocol made them.

use super::{Api, At};
use crate::security::acl::Operation;
use crate::server::auth::authorizer::{self, Principal};
use crate::server::core::Core;
use crate::server::kafka::codes::of_topic_change;
use crate::server::kafka::{text, Services};
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{ApiKey, DeleteTopicsRequest, DeleteTopicsResponse};
use std::rc::Rc;

pub struct DeleteTopics;

impl Api for DeleteTopics {
    const KEY: ApiKey = ApiKey::DeleteTopics;
    const VERSIONS: (i16, i16) = (1, 3);
    const NAME: &'static str = "kafka_DeleteTopics";
    const NOTE: &'static str = "ringmq topics, by name";
    type Request = DeleteTopicsRequest;
    type Response = DeleteTopicsResponse;

    async fn serve(s: &Services, r: DeleteTopicsRequest, at: &At) -> Option<DeleteTopicsResponse> {
        Some(delete(&s.core, &at.principal, &r).await.with_throttle_time_ms(at.throttle_ms()))
    }
}

async fn delete(core: &Rc<Core>, p: &Principal, request: &DeleteTopicsRequest) -> DeleteTopicsResponse {
    let mut responses = Vec::new();
    for name in &request.topic_names {
        let result = DeletableTopicResult::default().with_name(Some(name.clone()));
        let deleted = match p.check(core, Operation::Delete, authorizer::topic(name)) {
            Ok(()) => core.delete_topic(name).await,
            Err(f) => Err(f),
        };
        responses.push(match deleted {
            Ok(()) => result,
            Err(f) => result.with_error_code(of_topic_change(f.0)).with_error_message(Some(text(f.1))),
        });
    }
    DeleteTopicsResponse::default().with_responses(responses)
}
