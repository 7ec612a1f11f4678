//! Metadata: each shard is a Kafka broker (node id = the shard's index in
//! the whole cluster), and a partition's leader is the broker of the shard
//! that owns the queue. This node's shard k listens on the `--kafka-listen`
//! port plus k; another node's shard on its native port plus the distance
//! between this node's Kafka and native ports (every node of a cluster
//! keeps the same distance).

use crate::security::acl::Operation;
use crate::server::auth::authorizer::{self, Principal};
use crate::server::core::Core;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use std::net::SocketAddr;

/// LEADER_NOT_AVAILABLE: the queue's broker group has no leader yet.
const LEADER_NOT_AVAILABLE: i16 = ResponseError::LeaderNotAvailable.code();

/// Every shard of the cluster as a Kafka broker, by shard index (None: its
/// broker group has no leader now).
pub fn brokers(core: &Core) -> Vec<Option<MetadataResponseBroker>> {
    let Some(kafka) = core.config().kafka_listen else { return Vec::new() };
    let mine = core.addrs();
    let native_base = mine.first().and_then(|a| a.parse::<SocketAddr>().ok()).map_or(0, |a| a.port());
    let distance = i32::from(kafka.port()) - i32::from(native_base);
    core.describe(&[])
        .shards
        .iter()
        .map(|s| {
            let native: SocketAddr = s.addr.parse().ok()?;
            let (host, port) = match mine.iter().position(|a| *a == s.addr) {
                Some(k) => (kafka.ip(), i32::from(kafka.port()) + k as i32),
                None => (native.ip(), i32::from(native.port()) + distance),
            };
            let broker = MetadataResponseBroker::default().with_node_id(BrokerId(s.shard as i32));
            Some(broker.with_host(StrBytes::from_string(host.to_string())).with_port(port))
        })
        .collect()
}

pub fn metadata(core: &Core, principal: &Principal, request: &MetadataRequest) -> MetadataResponse {
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
    MetadataResponse::default()
        .with_brokers(brokers.into_iter().flatten().collect())
        .with_controller_id(controller)
        .with_topics(topics)
}

pub fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_string()))
}
