//! DescribeConfigs, read-only: what the broker enforces, under the names
//! Kafka's tools ask for, for a topic or the broker.

use super::{Api, At};
use crate::security::acl::Operation;
use crate::server::auth::authorizer::{self, Principal};
use crate::server::core::Core;
use crate::server::kafka::{text, Services};
use kafka_protocol::messages::describe_configs_response::{DescribeConfigsResourceResult, DescribeConfigsResult};
use kafka_protocol::messages::{ApiKey, DescribeConfigsRequest, DescribeConfigsResponse};
use kafka_protocol::ResponseError;
use ringmq_shards::batch;

/// DescribeConfigs' resource types.
const TOPIC: i8 = 2;
const BROKER: i8 = 4;
/// A config's source: the broker's static configuration.
const STATIC_BROKER_CONFIG: i8 = 4;

pub struct DescribeConfigs;

impl Api for DescribeConfigs {
    const KEY: ApiKey = ApiKey::DescribeConfigs;
    const VERSIONS: (i16, i16) = (1, 4);
    const NAME: &'static str = "kafka_DescribeConfigs";
    const NOTE: &'static str = "read-only: what the broker enforces, under Kafka's names (topics and brokers)";
    type Request = DescribeConfigsRequest;
    type Response = DescribeConfigsResponse;

    async fn serve(s: &Services, r: DescribeConfigsRequest, at: &At) -> Option<DescribeConfigsResponse> {
        Some(describe_configs(&s.core, &at.principal, &r).with_throttle_time_ms(at.throttle_ms()))
    }
}

fn describe_configs(core: &Core, p: &Principal, request: &DescribeConfigsRequest) -> DescribeConfigsResponse {
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
        // A producer's batch is kept as it came.
        ("compression.type", "producer".into()),
        // The largest Kafka batch a ringmq batch holds within the broker's limit.
        ("max.message.bytes", c.batch_bytes_max.saturating_sub(batch::KAFKA_WRAPPER_BYTES).to_string()),
        ("message.timestamp.type", "CreateTime".into()),
        ("min.insync.replicas", "1".into()),
        ("retention.bytes", retention_bytes.to_string()),
        ("retention.ms", retention_ms.to_string()),
        ("segment.bytes", c.segment_bytes.to_string()),
    ]
}
