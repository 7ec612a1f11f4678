//! AlterPartitionReassignments: moves partitions between broker groups,
//! the moves `ringmq cluster move` makes. Each shard is a broker and a
//! partition is replicated by its broker group, so a reassignment names one
//! broker: the shard the partition moves to, in another broker group (its
//! leader copies it, freezes it a moment and takes it over while clients go
//! on). Null replicas, or the partition's current broker, cancel a move
//! not yet switched. Answered once the move is stored and applied, not
//! done: ListPartitionReassignments shows it until it is. Alter on the cluster.

use super::{Api, At};
use crate::protocol::messages::QueueRef;
use crate::security::acl::Operation;
use crate::server::auth::authorizer;
use crate::server::core::placement::Place;
use crate::server::core::{Core, Failure};
use crate::server::kafka::{codes, text, Services};
use kafka_protocol::messages::alter_partition_reassignments_request::ReassignablePartition;
use kafka_protocol::messages::alter_partition_reassignments_response::{
    ReassignablePartitionResponse, ReassignableTopicResponse,
};
use kafka_protocol::messages::{AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse, ApiKey};
use kafka_protocol::ResponseError;

pub struct AlterPartitionReassignments;

impl Api for AlterPartitionReassignments {
    const KEY: ApiKey = ApiKey::AlterPartitionReassignments;
    const VERSIONS: (i16, i16) = (0, 1);
    const NAME: &'static str = "kafka_AlterPartitionReassignments";
    const NOTE: &'static str = "moves a partition to the one broker (shard) named, in another broker group, while \
                                clients go on; null replicas cancel (Alter on the cluster)";
    type Request = AlterPartitionReassignmentsRequest;
    type Response = AlterPartitionReassignmentsResponse;

    async fn serve(
        s: &Services,
        r: AlterPartitionReassignmentsRequest,
        at: &At,
    ) -> Option<AlterPartitionReassignmentsResponse> {
        let response = AlterPartitionReassignmentsResponse::default()
            .with_throttle_time_ms(at.throttle_ms())
            .with_allow_replication_factor_change(r.allow_replication_factor_change);
        if at.principal.check(&s.core, Operation::Alter, authorizer::cluster()).is_err() {
            let refused = response.with_error_code(ResponseError::ClusterAuthorizationFailed.code());
            return Some(refused.with_error_message(Some(text("Alter on the cluster is needed"))));
        }
        let mut responses = Vec::new();
        for topic in r.topics {
            let mut partitions = Vec::new();
            for p in &topic.partitions {
                let queue = QueueRef { topic: topic.name.to_string(), queue: p.partition_index.max(0) as u32 };
                let (code, message) = match reassign(&s.core, &queue, p).await {
                    Ok(()) => (0, None),
                    Err((code, m)) => (code, Some(text(m))),
                };
                let answer = ReassignablePartitionResponse::default().with_partition_index(p.partition_index);
                partitions.push(answer.with_error_code(code).with_error_message(message));
            }
            responses.push(ReassignableTopicResponse::default().with_name(topic.name).with_partitions(partitions));
        }
        Some(response.with_responses(responses))
    }
}

/// Starts, replaces or cancels the move of one partition.
async fn reassign(core: &Core, queue: &QueueRef, p: &ReassignablePartition) -> Result<(), (i16, String)> {
    let failed = |f: Failure| (codes::of(f.0), f.1);
    core.home(queue).map_err(|f| (ResponseError::UnknownTopicOrPartition.code(), f.1))?;
    let moving = core.moving_queues().into_iter().find(|m| m.topic == queue.topic && m.queue == queue.queue);
    let current = core.describe(std::slice::from_ref(&queue.topic)).topics.first().map(|t| t.queue_shards.clone());
    let current = current.and_then(|shards| shards.get(queue.queue as usize).copied());
    let to = match p.replicas.as_deref() {
        None => None,
        Some([broker]) if Some(broker.0 as u32) == current => None,
        Some([broker]) => Some(target(core, broker.0)?),
        Some(brokers) => {
            let m = format!(
                "{brokers:?}: name one broker, the shard the partition moves to; its broker group replicates it"
            );
            return Err((ResponseError::InvalidReplicaAssignment.code(), m));
        }
    };
    let link = core.placement().ok_or_else(single_node);
    match (to, moving) {
        (None, None) => {
            let m = format!("partition {} of {:?} is not being reassigned", queue.queue, queue.topic);
            Err((ResponseError::NoReassignmentInProgress.code(), m))
        }
        (None, Some(_)) => link?.move_queue(&queue.topic, queue.queue, None).await.map_err(failed),
        (Some(place), _) => link?.move_queue(&queue.topic, queue.queue, Some(place)).await.map_err(failed),
    }
}

fn single_node() -> (i16, String) {
    let m = "a single node's partitions stay on their shard; reassignment moves them between broker groups";
    (ResponseError::InvalidReplicaAssignment.code(), m.to_string())
}

/// The place of broker (cluster-wide shard) `broker`.
fn target(core: &Core, broker: i32) -> Result<Place, (i16, String)> {
    core.placement().ok_or_else(single_node)?;
    let place = u32::try_from(broker).ok().and_then(|b| core.place_of_shard(b));
    place.ok_or_else(|| (ResponseError::InvalidReplicaAssignment.code(), format!("no broker {broker} is known")))
}
