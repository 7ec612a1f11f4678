//! Metadata: every shard of the cluster as a Kafka broker, and each topic's
//! partitions, a partition's leader being the broker of the shard that owns
//! the queue. A topic the principal may not describe is left out of a
//! listing, and refused when named, whether or not it exists. A named topic
//! that does not exist is created first (`auto_create_topics`, as Kafka's
//! auto.create.topics.enable; `auto_create_queues` queues) when the request
//! allows it (v4+ says; before, always) and the principal may create it.
//! A topic may be asked for by its id instead (v10+); an unknown id is
//! UNKNOWN_TOPIC_ID. The cluster's id comes with it (v2+), and the
//! principal's authorized operations on the cluster and on each topic when
//! the request asks (v8+).

use super::create_topics::may_create;
use super::{Api, At};
use crate::security::acl::Operation;
use crate::server::auth::authorizer;
use crate::server::core::topics::NewTopic;
use crate::server::core::{Core, Reason};
use crate::server::kafka::acls::authorized_operations;
use crate::server::kafka::brokers::{brokers, controller, topic_name};
use crate::server::kafka::codes::of_topic_change;
use crate::server::kafka::Services;
use kafka_protocol::messages::metadata_response::{MetadataResponsePartition, MetadataResponseTopic};
use kafka_protocol::messages::{ApiKey, BrokerId, MetadataRequest, MetadataResponse};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

/// LEADER_NOT_AVAILABLE: the queue's broker group has no leader yet.
const LEADER_NOT_AVAILABLE: i16 = ResponseError::LeaderNotAvailable.code();

pub struct Metadata;

/// Creates the named topics that do not exist and that the principal may
/// describe and create; the Kafka code of each creation that failed (one
/// that another request created first is not a failure).
async fn auto_create(s: &Services, at: &At, names: &[String]) -> Vec<(String, i16)> {
    let core = &s.core;
    let existing: Vec<String> = core.describe(names).topics.into_iter().map(|t| t.name).collect();
    let mut failed = Vec::new();
    for name in names.iter().filter(|n| !existing.contains(n)) {
        if !at.principal.allows(core, Operation::Describe, authorizer::topic(name))
            || may_create(core, &at.principal, name).is_err()
        {
            continue;
        }
        let queues = core.config().auto_create_queues;
        let ask =
            NewTopic { name: name.clone(), queues, flush: core.config().default_flush, configs: Default::default() };
        match core.create_topic(ask).await {
            Ok(()) => tracing::info!(topic = %name, queues, "created a topic a Kafka client named"),
            Err(f) if f.0 == Reason::TopicExists => {}
            Err(f) => {
                tracing::debug!(topic = %name, reason = ?f.0, message = %f.1, "auto-creating a topic failed");
                failed.push((name.clone(), of_topic_change(f.0)));
            }
        }
    }
    failed
}

impl Api for Metadata {
    const KEY: ApiKey = ApiKey::Metadata;
    const VERSIONS: (i16, i16) = (0, 12);
    const NAME: &'static str = "kafka_Metadata";
    const NOTE: &'static str = "a broker per shard (node id = cluster-wide shard index), partition leader = \
                                the owning shard; the cluster id; authorized operations when asked; a missing \
                                topic created when auto_create_topics is on";
    type Request = MetadataRequest;
    type Response = MetadataResponse;

    async fn serve(s: &Services, request: MetadataRequest, at: &At) -> Option<MetadataResponse> {
        let (core, principal) = (&s.core, &at.principal);
        let asked = request.topics.iter().flatten();
        let by_name: Vec<String> =
            asked.clone().filter_map(|t| t.name.as_ref().filter(|n| !n.is_empty())).map(|n| n.to_string()).collect();
        let by_id: Vec<uuid::Uuid> = asked
            .filter(|t| t.name.as_ref().is_none_or(|n| n.is_empty()))
            .map(|t| t.topic_id)
            .filter(|id| !id.is_nil())
            .collect();
        let allowed = at.version < 4 || request.allow_auto_topic_creation;
        let created =
            if allowed && core.config().auto_create_topics { auto_create(s, at, &by_name).await } else { Vec::new() };
        let (found, unknown_ids) = named_by_id(core, &by_id);
        let names: Vec<String> = by_name.into_iter().chain(found).collect();
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
                let asked = request.include_topic_authorized_operations;
                let operations = authorized_operations(asked, core, principal, authorizer::topic(&t.name));
                MetadataResponseTopic::default()
                    .with_name(Some(topic_name(&t.name)))
                    .with_topic_id(uuid::Uuid::from_bytes(t.id))
                    .with_partitions(partitions)
                    .with_topic_authorized_operations(operations)
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
            let code = created
                .iter()
                .find(|(n, _)| n == missing)
                .map_or(ResponseError::UnknownTopicOrPartition.code(), |c| c.1);
            topics.push(MetadataResponseTopic::default().with_name(Some(topic_name(missing))).with_error_code(code));
        }
        for id in unknown_ids {
            let topic = MetadataResponseTopic::default().with_name(None).with_topic_id(id);
            topics.push(topic.with_error_code(ResponseError::UnknownTopicId.code()));
        }
        let known: Vec<_> = brokers.into_iter().flatten().collect();
        let asked = request.include_cluster_authorized_operations;
        let cluster_operations = authorized_operations(asked, core, principal, authorizer::cluster());
        let response = MetadataResponse::default()
            .with_cluster_id(core.cluster_id().map(StrBytes::from_string))
            .with_controller_id(controller(&known))
            .with_brokers(known)
            .with_topics(topics)
            .with_cluster_authorized_operations(cluster_operations);
        Some(response.with_throttle_time_ms(at.throttle_ms()))
    }
}

/// The names of the topics with these ids (v10+ asks by id: a consumer
/// given partitions by topic id, KIP-848), and the ids no topic has.
fn named_by_id(core: &Core, ids: &[uuid::Uuid]) -> (Vec<String>, Vec<uuid::Uuid>) {
    if ids.is_empty() {
        return (Vec::new(), Vec::new());
    }
    let metadata = core.metadata();
    let names = metadata.names_by_id();
    let (mut found, mut unknown) = (Vec::new(), Vec::new());
    for id in ids {
        match names.get(id.as_bytes()) {
            Some(name) => found.push(name.to_string()),
            None => unknown.push(*id),
        }
    }
    (found, unknown)
}
