//! Metadata: every shard of the cluster as a Kafka broker, and each topic's
//! partitions, a partition's leader being the broker of the shard that owns
//! the queue. A topic the principal may not describe is left out of a
//! listing, and refused when named, whether or not it exists.

use super::{Api, At};
use crate::security::acl::Operation;
use crate::server::auth::authorizer;
use crate::server::kafka::brokers::{brokers, topic_name};
use crate::server::kafka::Services;
use kafka_protocol::messages::metadata_response::{MetadataResponsePartition, MetadataResponseTopic};
use kafka_protocol::messages::{ApiKey, BrokerId, MetadataRequest, MetadataResponse};
use kafka_protocol::ResponseError;

/// LEADER_NOT_AVAILABLE: the queue's broker group has no leader yet.
const LEADER_NOT_AVAILABLE: i16 = ResponseError::LeaderNotAvailable.code();

pub struct Metadata;

impl Api for Metadata {
    const KEY: ApiKey = ApiKey::Metadata;
    const VERSIONS: (i16, i16) = (0, 12);
    const NAME: &'static str = "kafka_Metadata";
    const NOTE: &'static str = "a broker per shard (node id = cluster-wide shard index), partition leader = \
                                the owning shard";
    type Request = MetadataRequest;
    type Response = MetadataResponse;

    async fn serve(s: &Services, request: MetadataRequest, at: &At) -> Option<MetadataResponse> {
        let (core, principal) = (&s.core, &at.principal);
        let names: Vec<String> =
            request.topics.iter().flatten().filter_map(|t| t.name.as_ref().map(|n| n.to_string())).collect();
        let mut described = core.describe(&names);
        // A topic the principal may not describe is left out of a listing, and
        // refused when named, whether or not it exists (existence is not told).
        let visible = |name: &str| principal.allows(core, Operation::Describe, authorizer::topic(name));
        // A named one is checked (and its refusal logged) once.
        let mut refused: Vec<String> = names
            .iter()
            .filter(|n| principal.check(core, Operation::Describe, authorizer::topic(n)).is_err())
            .cloned()
            .collect();
        described.topics.retain(|t| !refused.contains(&t.name) && visible(&t.name));
        let brokers = brokers(core);
        let known = |shard: u32| brokers.get(shard as usize).is_some_and(Option::is_some);
        let mut topics: Vec<MetadataResponseTopic> = described
            .topics
            .iter()
            .map(|t| {
                let partitions = t
                    .queue_shards
                    .iter()
                    .enumerate()
                    .map(|(q, &shard)| {
                        let p = MetadataResponsePartition::default().with_partition_index(q as i32);
                        if !known(shard) {
                            return p.with_error_code(LEADER_NOT_AVAILABLE).with_leader_id(BrokerId(-1));
                        }
                        let broker = BrokerId(shard as i32);
                        p.with_leader_id(broker).with_replica_nodes(vec![broker]).with_isr_nodes(vec![broker])
                    })
                    .collect();
                MetadataResponseTopic::default().with_name(Some(topic_name(&t.name))).with_partitions(partitions)
            })
            .collect();
        for name in refused.drain(..) {
            topics.push(
                MetadataResponseTopic::default()
                    .with_name(Some(topic_name(&name)))
                    .with_error_code(ResponseError::TopicAuthorizationFailed.code()),
            );
        }
        let answered: Vec<String> = topics.iter().filter_map(|t| t.name.as_ref().map(|n| n.to_string())).collect();
        for missing in names.iter().filter(|n| !answered.contains(n)) {
            topics.push(
                MetadataResponseTopic::default()
                    .with_name(Some(topic_name(missing)))
                    .with_error_code(ResponseError::UnknownTopicOrPartition.code()),
            );
        }
        let controller = brokers.iter().flatten().next().map_or(BrokerId(-1), |b| b.node_id);
        let response = MetadataResponse::default()
            .with_brokers(brokers.into_iter().flatten().collect())
            .with_controller_id(controller)
            .with_topics(topics);
        Some(response.with_throttle_time_ms(at.throttle_ms()))
    }
}
