//! DescribeConfigs: what the broker enforces, under the names Kafka's tools
//! ask for: a topic's configs with their source (the topic's own, set at
//! creation or by AlterConfigs, or the broker's default), or the broker's.

use super::{Api, At};
use crate::security::acl::Operation;
use crate::server::auth::authorizer::{self, Principal};
use crate::server::core::topic_configs::{
    self, TopicConfigs, CLEANUP_POLICY, DELETE_RETENTION_MS, DELETE_RETENTION_MS_DEFAULT, LOCAL_AS_TOTAL,
    LOCAL_RETENTION_BYTES, LOCAL_RETENTION_MS, MAX_COMPACTION_LAG_MS, MAX_MESSAGE_BYTES, MIN_CLEANABLE_DIRTY_RATIO,
    MIN_CLEANABLE_DIRTY_RATIO_DEFAULT, MIN_COMPACTION_LAG_MS, MIN_INSYNC_REPLICAS, REMOTE_STORAGE_ENABLE,
    RETENTION_BYTES, RETENTION_MS, TIMESTAMP_TYPE,
};
use crate::server::core::Core;
use crate::server::kafka::configs::{BROKER, TOPIC};
use crate::server::kafka::{text, Services};
use kafka_protocol::messages::describe_configs_response::{DescribeConfigsResourceResult, DescribeConfigsResult};
use kafka_protocol::messages::{ApiKey, DescribeConfigsRequest, DescribeConfigsResponse};
use kafka_protocol::ResponseError;

/// A config's source: the topic's own, the broker's start-up settings, the default.
const TOPIC_CONFIG: i8 = 1;
const STATIC_BROKER_CONFIG: i8 = 4;
const DEFAULT_CONFIG: i8 = 5;
/// Config types (v3+).
const BOOLEAN: i8 = 1;
const STRING: i8 = 2;
const INT: i8 = 3;
const LONG: i8 = 5;
const DOUBLE: i8 = 6;
const LIST: i8 = 7;

pub struct DescribeConfigs;

impl Api for DescribeConfigs {
    const KEY: ApiKey = ApiKey::DescribeConfigs;
    const VERSIONS: (i16, i16) = (1, 4);
    const NAME: &'static str = "kafka_DescribeConfigs";
    const NOTE: &'static str = "a topic's configs with their source (its own or the default), or the broker's";
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
            let metadata = core.metadata();
            let all = match r.resource_type {
                TOPIC => match metadata.topics.get(r.resource_name.as_str()) {
                    Some(topic) => configs(core, Some(&topic.configs)),
                    None => {
                        let m = format!("topic {:?} does not exist", r.resource_name.as_str());
                        return result
                            .with_error_code(ResponseError::UnknownTopicOrPartition.code())
                            .with_error_message(Some(text(m)));
                    }
                },
                BROKER => configs(core, None),
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
                .filter(|d| keys.is_none_or(|k| k.iter().any(|k| k.as_str() == d.name)))
                .map(|d| {
                    let settable = r.resource_type == TOPIC && topic_configs::NAMES.contains(&d.name);
                    DescribeConfigsResourceResult::default()
                        .with_name(text(d.name))
                        .with_value(Some(text(d.value)))
                        .with_read_only(!settable)
                        .with_config_source(d.source)
                        .with_config_type(d.kind)
                })
                .collect();
            result.with_configs(configs)
        })
        .collect();
    DescribeConfigsResponse::default().with_results(results)
}

/// A config as described: name, value, where it comes from, its type.
struct Described {
    name: &'static str,
    value: String,
    source: i8,
    kind: i8,
}

/// A topic's configs (each the topic's own where it set one) or, with no
/// topic, the broker's: what the broker enforces, in Kafka's terms.
fn configs(core: &Core, topic: Option<&TopicConfigs>) -> Vec<Described> {
    let c = core.config();
    let own = topic.map(TopicConfigs::entries).unwrap_or_default();
    let retention_ms = c.retention_age.map_or(-1, |a| a.as_millis() as i64);
    let insync = match &c.cluster {
        Some(role) => role.replication.insync_min,
        None => 1,
    };
    let from_flag = |set: bool| if set { STATIC_BROKER_CONFIG } else { DEFAULT_CONFIG };
    let defaults = [
        (CLEANUP_POLICY, "delete".to_string(), DEFAULT_CONFIG, LIST),
        (DELETE_RETENTION_MS, DELETE_RETENTION_MS_DEFAULT.to_string(), DEFAULT_CONFIG, LONG),
        (LOCAL_RETENTION_BYTES, LOCAL_AS_TOTAL.to_string(), DEFAULT_CONFIG, LONG),
        (LOCAL_RETENTION_MS, LOCAL_AS_TOTAL.to_string(), DEFAULT_CONFIG, LONG),
        (MAX_COMPACTION_LAG_MS, i64::MAX.to_string(), DEFAULT_CONFIG, LONG),
        (MAX_MESSAGE_BYTES, c.kafka_batch_bytes_max().to_string(), STATIC_BROKER_CONFIG, INT),
        (TIMESTAMP_TYPE, "CreateTime".into(), DEFAULT_CONFIG, STRING),
        (MIN_CLEANABLE_DIRTY_RATIO, MIN_CLEANABLE_DIRTY_RATIO_DEFAULT.to_string(), DEFAULT_CONFIG, DOUBLE),
        (MIN_COMPACTION_LAG_MS, "0".into(), DEFAULT_CONFIG, LONG),
        (MIN_INSYNC_REPLICAS, insync.to_string(), from_flag(c.cluster.is_some()), INT),
        (REMOTE_STORAGE_ENABLE, "false".into(), DEFAULT_CONFIG, BOOLEAN),
        // A shard's size bound is over all its queues, not one partition's.
        (RETENTION_BYTES, "-1".into(), DEFAULT_CONFIG, LONG),
        (RETENTION_MS, retention_ms.to_string(), from_flag(c.retention_age.is_some()), LONG),
    ];
    let mut all: Vec<Described> = defaults
        .into_iter()
        .map(|(name, value, source, kind)| match own.get(name) {
            Some(set) => Described { name, value: set.clone(), source: TOPIC_CONFIG, kind },
            None => Described { name, value, source, kind },
        })
        .collect();
    // Shard-wide: the same for every topic, not settable per topic.
    all.push(Described { name: "compression.type", value: "producer".into(), source: DEFAULT_CONFIG, kind: STRING });
    all.push(Described {
        name: "segment.bytes",
        value: c.segment_bytes.to_string(),
        source: STATIC_BROKER_CONFIG,
        kind: INT,
    });
    all
}
