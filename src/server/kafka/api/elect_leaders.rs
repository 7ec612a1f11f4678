//! ElectLeaders: in ringmq a broker group has one leader for all its
//! queues, elected by the control plane from the in-sync set only, never
//! per partition and never unclean. So a partition whose group has a leader
//! needs no election (ELECTION_NOT_NEEDED, saying so), and one whose group
//! has none waits for an in-sync member (ELIGIBLE_LEADERS_NOT_AVAILABLE). A
//! planned move of a group's leadership is `ringmq cluster transfer-leader`.
//! Alter on the cluster.

use super::{Api, At};
use crate::protocol::messages::QueueRef;
use crate::security::acl::Operation;
use crate::server::auth::authorizer;
use crate::server::core::metadata::Home;
use crate::server::core::{Core, Failure};
use crate::server::kafka::{codes, text, Services};
use kafka_protocol::messages::elect_leaders_response::{PartitionResult, ReplicaElectionResult};
use kafka_protocol::messages::{ApiKey, ElectLeadersRequest, ElectLeadersResponse};
use kafka_protocol::ResponseError;

pub struct ElectLeaders;

impl Api for ElectLeaders {
    const KEY: ApiKey = ApiKey::ElectLeaders;
    const VERSIONS: (i16, i16) = (0, 2);
    const NAME: &'static str = "kafka_ElectLeaders";
    const NOTE: &'static str = "no per-partition election: a broker group's one leader (in-sync only) serves every \
                                queue; ELECTION_NOT_NEEDED while it has one (`ringmq cluster transfer-leader` moves it)";
    type Request = ElectLeadersRequest;
    type Response = ElectLeadersResponse;

    async fn serve(s: &Services, r: ElectLeadersRequest, at: &At) -> Option<ElectLeadersResponse> {
        let response = ElectLeadersResponse::default().with_throttle_time_ms(at.throttle_ms());
        if at.principal.check(&s.core, Operation::Alter, authorizer::cluster()).is_err() {
            return Some(response.with_error_code(ResponseError::ClusterAuthorizationFailed.code()));
        }
        let asked: Vec<(String, Vec<i32>)> = match &r.topic_partitions {
            Some(topics) => topics.iter().map(|t| (t.topic.to_string(), t.partitions.clone())).collect(),
            None => s
                .core
                .metadata()
                .topics
                .iter()
                .map(|(n, t)| (n.clone(), (0..t.queues.len() as i32).collect()))
                .collect(),
        };
        let results = asked
            .into_iter()
            .map(|(topic, partitions)| {
                let partition_result = partitions
                    .iter()
                    .map(|p| {
                        let (code, m) =
                            election(&s.core, &QueueRef { topic: topic.clone(), queue: (*p).max(0) as u32 });
                        PartitionResult::default()
                            .with_partition_id(*p)
                            .with_error_code(code)
                            .with_error_message(Some(text(m)))
                    })
                    .collect();
                ReplicaElectionResult::default().with_topic(text(topic).into()).with_partition_result(partition_result)
            })
            .collect();
        Some(response.with_replica_election_results(results))
    }
}

/// Why a partition needs no election (or cannot have one now).
fn election(core: &Core, queue: &QueueRef) -> (i16, String) {
    let home = match core.home(queue) {
        Ok(home) => home,
        Err(Failure(reason, m)) => return (codes::of(reason), m),
    };
    let group = match (&home, core.placement()) {
        (Home::Group(place), Some(link)) => {
            let view = link.view.borrow();
            match view.groups.iter().find(|g| g.broker_group == place.broker_group) {
                Some(g) if g.leader.is_some() => place.broker_group.clone(),
                _ => {
                    let m = format!(
                        "broker group {:?} has no leader now; one of its in-sync members will be elected",
                        place.broker_group
                    );
                    return (ResponseError::EligibleLeadersNotAvailable.code(), m);
                }
            }
        }
        _ => "this node's".to_string(),
    };
    let m = format!("{group} broker group's leader serves the partition; `ringmq cluster transfer-leader` moves it");
    (ResponseError::ElectionNotNeeded.code(), m)
}
