//! ListPartitionReassignments: the queues moving between broker groups
//! (`ringmq cluster move`, `drain`, AlterPartitionReassignments). A moving
//! partition's replicas are the shard it moves from and the one it moves
//! to (each shard is a broker), adding the target and removing the source,
//! as Kafka lists a reassignment in progress. Describe on the cluster.

use super::{Api, At};
use crate::security::acl::Operation;
use crate::server::auth::authorizer;
use crate::server::kafka::{brokers::topic_name, Services};
use kafka_protocol::messages::list_partition_reassignments_response::{
    OngoingPartitionReassignment, OngoingTopicReassignment,
};
use kafka_protocol::messages::{
    ApiKey, BrokerId, ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse,
};
use kafka_protocol::ResponseError;
use std::collections::BTreeMap;

pub struct ListPartitionReassignments;

impl Api for ListPartitionReassignments {
    const KEY: ApiKey = ApiKey::ListPartitionReassignments;
    const VERSIONS: (i16, i16) = (0, 0);
    const NAME: &'static str = "kafka_ListPartitionReassignments";
    const NOTE: &'static str = "the queues moving between broker groups: replicas the shards it moves from and to \
                                (Describe on the cluster)";
    type Request = ListPartitionReassignmentsRequest;
    type Response = ListPartitionReassignmentsResponse;

    async fn serve(
        s: &Services,
        r: ListPartitionReassignmentsRequest,
        at: &At,
    ) -> Option<ListPartitionReassignmentsResponse> {
        let response = ListPartitionReassignmentsResponse::default().with_throttle_time_ms(at.throttle_ms());
        if at.principal.check(&s.core, Operation::Describe, authorizer::cluster()).is_err() {
            return Some(response.with_error_code(ResponseError::ClusterAuthorizationFailed.code()));
        }
        let wanted = |topic: &str, queue: u32| match &r.topics {
            None => true,
            Some(topics) => {
                topics.iter().any(|t| t.name.as_str() == topic && t.partition_indexes.contains(&(queue as i32)))
            }
        };
        let mut topics: BTreeMap<String, Vec<OngoingPartitionReassignment>> = BTreeMap::new();
        for m in s.core.moving_queues().into_iter().filter(|m| wanted(&m.topic, m.queue)) {
            let (from, to) = (BrokerId(m.from as i32), BrokerId(m.to as i32));
            let partition = OngoingPartitionReassignment::default()
                .with_partition_index(m.queue as i32)
                .with_replicas(vec![from, to])
                .with_adding_replicas(vec![to])
                .with_removing_replicas(vec![from]);
            topics.entry(m.topic).or_default().push(partition);
        }
        let topics = topics
            .into_iter()
            .map(|(name, partitions)| {
                OngoingTopicReassignment::default().with_name(topic_name(&name)).with_partitions(partitions)
            })
            .collect();
        Some(response.with_topics(topics))
    }
}
