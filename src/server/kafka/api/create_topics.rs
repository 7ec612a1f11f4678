//! CreateTopics: each topic a ringmq topic of `num_partitions` queues (-1:
//! one), so a topic made either way is seen both ways, with the configs it
//! names (those with no per-topic meaning in ringmq, `SHARD_WIDE`, are left
//! out: Kafka Streams names `segment.bytes` for its internal topics).

use super::{Api, At};
use crate::security::acl::Operation;
use crate::server::auth::authorizer::{self, Principal};
use crate::server::core::topic_configs::{TopicConfigs, SHARD_WIDE};
use crate::server::core::topics::NewTopic;
use crate::server::core::{Core, Failure};
use crate::server::kafka::codes::of_topic_change;
use crate::server::kafka::{text, Services};
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::{ApiKey, CreateTopicsRequest, CreateTopicsResponse};
use ringmq_shards::FlushPolicy;
use std::rc::Rc;

pub struct CreateTopics;

impl Api for CreateTopics {
    const KEY: ApiKey = ApiKey::CreateTopics;
    const VERSIONS: (i16, i16) = (2, 4);
    const NAME: &'static str = "kafka_CreateTopics";
    const NOTE: &'static str = "ringmq topics, a partition per queue, with their topic configs (shard-wide ones \
                                such as segment.bytes left out); validate_only checks the principal and configs";
    type Request = CreateTopicsRequest;
    type Response = CreateTopicsResponse;

    async fn serve(s: &Services, r: CreateTopicsRequest, at: &At) -> Option<CreateTopicsResponse> {
        Some(create(&s.core, &at.principal, &r).await.with_throttle_time_ms(at.throttle_ms()))
    }
}

async fn create(core: &Rc<Core>, p: &Principal, request: &CreateTopicsRequest) -> CreateTopicsResponse {
    let mut topics = Vec::new();
    for t in &request.topics {
        let queues = if t.num_partitions < 0 { 1 } else { t.num_partitions as u32 };
        let result = CreatableTopicResult::default()
            .with_name(t.name.clone())
            .with_num_partitions(queues as i32)
            .with_replication_factor(1);
        let checked = may_create(core, p, &t.name).and_then(|()| topic_configs(core, t));
        let created = match checked {
            Err(f) => Err(f),
            Ok(_) if request.validate_only => Ok(()),
            Ok(configs) => {
                core.create_topic(NewTopic { name: t.name.to_string(), queues, flush: FlushPolicy::Sync, configs })
                    .await
            }
        };
        topics.push(match created {
            Ok(()) => result,
            Err(f) => result.with_error_code(of_topic_change(f.0)).with_error_message(Some(text(f.1))),
        });
    }
    CreateTopicsResponse::default().with_topics(topics)
}

/// The configs a new topic sets, checked.
fn topic_configs(core: &Core, t: &CreatableTopic) -> Result<TopicConfigs, Failure> {
    let named = t.configs.iter().filter_map(|c| Some((c.name.as_str(), c.value.as_deref()?)));
    let (skipped, kept): (Vec<_>, Vec<_>) = named.partition(|(name, _)| SHARD_WIDE.contains(name));
    if !skipped.is_empty() {
        tracing::debug!(topic = %t.name.as_str(), ?skipped, "topic configs with no per-topic meaning left out");
    }
    let configs = TopicConfigs::from_entries(kept)?;
    core.check_topic_configs(&configs)?;
    Ok(configs)
}

/// Whether the principal may create the topic: Create on it, or on the cluster.
pub fn may_create(core: &Core, p: &Principal, name: &str) -> Result<(), Failure> {
    let allowed = p.check(core, Operation::Create, authorizer::topic(name));
    allowed.or_else(|_| p.check(core, Operation::Create, authorizer::cluster()))
}
