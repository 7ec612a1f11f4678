//! CreateTopics, DeleteTopics and DescribeConfigs on ringmq topics: a Kafka
//! topic is a ringmq topic and its partitions are the topic's queues, so a
//! topic made either way is seen both ways. Configs are read-only: what the
//! broker enforces, under the names Kafka's tools ask for.

use super::{codes, text};
use crate::protocol::messages::CreateTopic;
use crate::protocol::ErrorCode;
use crate::security::acl::Operation;
use crate::server::auth::authorizer::{self, Principal};
use crate::server::core::Core;
use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::describe_configs_response::{DescribeConfigsResourceResult, DescribeConfigsResult};
use kafka_protocol::messages::{
    CreateTopicsRequest, CreateTopicsResponse, DeleteTopicsRequest, DeleteTopicsResponse, DescribeConfigsRequest,
    DescribeConfigsResponse,
};
use kafka_protocol::ResponseError;
use std::rc::Rc;

/// DescribeConfigs' resource types.
const TOPIC: i8 = 2;
const BROKER: i8 = 4;
/// A config's source: the broker's static configuration.
const STATIC_BROKER_CONFIG: i8 = 4;

/// Kafka's code for a failed topic change (an invalid count of partitions
/// has its own).
fn topic_error(code: ErrorCode) -> i16 {
    if code == ErrorCode::NotAuthorized {
        return ResponseError::TopicAuthorizationFailed.code();
    }
    if code == ErrorCode::InvalidRequest {
        return ResponseError::InvalidPartitions.code();
    }
    codes::of(code)
}

/// Each topic as a ringmq topic of `num_partitions` queues (-1: one).
pub async fn create(core: &Rc<Core>, p: &Principal, request: &CreateTopicsRequest) -> CreateTopicsResponse {
    let mut topics = Vec::new();
    for t in &request.topics {
        let queues = if t.num_partitions < 0 { 1 } else { t.num_partitions as u32 };
        let ask = CreateTopic { name: t.name.to_string(), queues, flush: 0 };
        let result = CreatableTopicResult::default()
            .with_name(t.name.clone())
            .with_num_partitions(queues as i32)
            .with_replication_factor(1);
        let allowed = p.check(core, Operation::Create, authorizer::topic(&t.name));
        let allowed = allowed.or_else(|_| p.check(core, Operation::Create, authorizer::cluster()));
        let created = match allowed {
            Err(f) => Err(f),
            Ok(()) if request.validate_only => Ok(()),
            Ok(()) => core.create_topic(ask).await,
        };
        topics.push(match created {
            Ok(()) => result,
            Err(f) => result.with_error_code(topic_error(f.0)).with_error_message(Some(text(f.1))),
        });
    }
    CreateTopicsResponse::default().with_topics(topics)
}

pub async fn delete(core: &Rc<Core>, p: &Principal, request: &DeleteTopicsRequest) -> DeleteTopicsResponse {
    let mut responses = Vec::new();
    for name in &request.topic_names {
        let result = DeletableTopicResult::default().with_name(Some(name.clone()));
        let deleted = match p.check(core, Operation::Delete, authorizer::topic(name)) {
            Ok(()) => core.delete_topic(name).await,
            Err(f) => Err(f),
        };
        responses.push(match deleted {
            Ok(()) => result,
            Err(f) => result.with_error_code(topic_error(f.0)).with_error_message(Some(text(f.1))),
        });
    }
    DeleteTopicsResponse::default().with_responses(responses)
}

pub fn describe_configs(core: &Core, p: &Principal, request: &DescribeConfigsRequest) -> DescribeConfigsResponse {
    let results = request
        .resources
        .iter()
        .map(|r| {
            let result = DescribeConfigsResult::default()
                .with_resource_type(r.resource_type)
                .with_resource_name(r.resource_name.clone());
            let resource = match r.resource_type {
                TOPIC => authorizer::topic(&r.resource_name),
                _ => authorizer::cluster(),
            };
            if let Err(f) = p.check(core, Operation::Describe, resource) {
                let code = if r.resource_type == TOPIC {
                    ResponseError::TopicAuthorizationFailed.code()
                } else {
                    ResponseError::ClusterAuthorizationFailed.code()
                };
                return result.with_error_code(code).with_error_message(Some(text(f.1)));
            }
            let all = match r.resource_type {
                TOPIC if core.describe(&[r.resource_name.to_string()]).topics.is_empty() => {
                    let m = format!("topic {:?} does not exist", r.resource_name.as_str());
                    return result
                        .with_error_code(ResponseError::UnknownTopicOrPartition.code())
                        .with_error_message(Some(text(m)));
                }
                TOPIC | BROKER => configs(core),
                other => {
                    let m = format!("resource type {other} has no configs here (topics: 2, brokers: 4)");
                    return result
                        .with_error_code(ResponseError::InvalidRequest.code())
                        .with_error_message(Some(text(m)));
                }
            };
            let keys = r.configuration_keys.as_ref();
            let configs = all
                .into_iter()
                .filter(|(name, _)| keys.is_none_or(|k| k.iter().any(|k| k.as_str() == *name)))
                .map(|(name, value)| {
                    DescribeConfigsResourceResult::default()
                        .with_name(text(name))
                        .with_value(Some(text(value)))
                        .with_read_only(true)
                        .with_config_source(STATIC_BROKER_CONFIG)
                })
                .collect();
            result.with_configs(configs)
        })
        .collect();
    DescribeConfigsResponse::default().with_results(results)
}

/// What the broker enforces, in Kafka's terms.
fn configs(core: &Core) -> Vec<(&'static str, String)> {
    let c = core.config();
    let retention_ms = c.retention_age.map_or(-1, |a| a.as_millis() as i64);
    let retention_bytes = c.retention_bytes.map_or(-1, |b| b as i64);
    vec![
        ("cleanup.policy", "delete".into()),
        ("compression.type", "uncompressed".into()),
        ("max.message.bytes", c.max_batch_bytes.to_string()),
        ("message.timestamp.type", "CreateTime".into()),
        ("min.insync.replicas", "1".into()),
        ("retention.bytes", retention_bytes.to_string()),
        ("retention.ms", retention_ms.to_string()),
        ("segment.bytes", c.segment_bytes.to_string()),
    ]
}
