//! ElectLeaders: in ringmq a broker group has one leader for all its
//! queues, elected by the control plane from the in-sync set only, never
//! per partition and never unclean. A PREFERRED election asks the
//! partition's group to hand its lead to the node started with
//! `--preferred-leader` (Kafka's preferred replica), a planned transfer as
//! `ringmq cluster transfer-leader` makes: one request per group, however
//! many of its partitions are named. ELECTION_NOT_NEEDED when that node
//! leads already or the group names none (and on a single node);
//! PREFERRED_LEADER_NOT_AVAILABLE when it is not in sync. An UNCLEAN
//! election is never needed while the group has a leader, and waits for an
//! in-sync member while it has none (ELIGIBLE_LEADERS_NOT_AVAILABLE).
//! Alter on the cluster.

use super::{Api, At};
use crate::protocol::messages::QueueRef;
use crate::security::acl::Operation;
use crate::server::auth::authorizer;
use crate::server::core::metadata::Home;
use crate::server::core::placement::PreferredElection;
use crate::server::core::{Core, Failure};
use crate::server::kafka::{codes, text, Services};
use kafka_protocol::messages::elect_leaders_response::{PartitionResult, ReplicaElectionResult};
use kafka_protocol::messages::{ApiKey, ElectLeadersRequest, ElectLeadersResponse};
use kafka_protocol::ResponseError;
use std::collections::HashMap;

pub struct ElectLeaders;

impl Api for ElectLeaders {
    const KEY: ApiKey = ApiKey::ElectLeaders;
    const VERSIONS: (i16, i16) = (0, 2);
    const NAME: &'static str = "kafka_ElectLeaders";
    const NOTE: &'static str = "a broker group's one leader (in-sync only) serves every queue: PREFERRED hands a \
                                group's lead to its `--preferred-leader` node; UNCLEAN is never needed";
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
        // Asked for every partition, Kafka answers only those an election was made or refused for.
        let all = r.topic_partitions.is_none();
        let preferred = r.election_type == PREFERRED;
        let mut groups: HashMap<String, (i16, Option<String>)> = HashMap::new();
        let mut results = Vec::new();
        for (topic, partitions) in asked {
            let mut partition_result = Vec::new();
            for p in partitions {
                let queue = QueueRef { topic: topic.clone(), queue: p.max(0) as u32 };
                let (code, m) = match (preferred, group_of(&s.core, &queue)) {
                    (_, Err(Failure(reason, m))) => (codes::of(reason), Some(m)),
                    (true, Ok(Some(group))) => match groups.get(&group) {
                        Some(answer) => answer.clone(),
                        None => {
                            let answer = elect_preferred(&s.core, &group).await;
                            groups.entry(group).or_insert(answer).clone()
                        }
                    },
                    (_, Ok(group)) => unclean(&s.core, group),
                };
                if all && code == ResponseError::ElectionNotNeeded.code() {
                    continue;
                }
                let result = PartitionResult::default().with_partition_id(p).with_error_code(code);
                partition_result.push(result.with_error_message(m.map(text)));
            }
            if partition_result.is_empty() {
                continue;
            }
            let topic = ReplicaElectionResult::default().with_topic(text(topic).into());
            results.push(topic.with_partition_result(partition_result));
        }
        Some(response.with_replica_election_results(results))
    }
}

/// Kafka's election type of a preferred-replica election (v0 has no type: preferred).
const PREFERRED: i8 = 0;

/// The broker group that serves `queue` (None: a single node serves it).
fn group_of(core: &Core, queue: &QueueRef) -> Result<Option<String>, Failure> {
    let home = core.home(queue)?;
    let Some(cluster) = core.config().cluster.as_ref().filter(|_| core.placement().is_some()) else { return Ok(None) };
    Ok(Some(match home {
        Home::Group(place) | Home::Arriving { from: place, .. } => place.broker_group,
        Home::Here(_) | Home::Leaving { .. } => cluster.broker_group.clone(),
    }))
}

/// A preferred-leader election of `group`'s lead, once per request.
async fn elect_preferred(core: &Core, group: &str) -> (i16, Option<String>) {
    let link = core.placement().expect("a group's queue: a cluster node");
    match link.elect_preferred(group).await {
        Ok(PreferredElection::Requested(_)) => (0, None),
        Ok(PreferredElection::NotNeeded(m)) => (ResponseError::ElectionNotNeeded.code(), Some(m)),
        Ok(PreferredElection::Unavailable(m)) => (ResponseError::PreferredLeaderNotAvailable.code(), Some(m)),
        Err(Failure(reason, m)) => (codes::of(reason), Some(m)),
    }
}

/// Why an unclean election is never needed (or cannot be had now).
fn unclean(core: &Core, group: Option<String>) -> (i16, Option<String>) {
    let Some(group) = group else {
        return (ResponseError::ElectionNotNeeded.code(), Some("this node leads every partition".into()));
    };
    let link = core.placement().expect("a group's queue: a cluster node");
    let led = link.view.borrow().groups.iter().any(|g| g.broker_group == group && g.leader.is_some());
    if !led {
        let m = format!("broker group {group:?} has no leader now; one of its in-sync members will be elected");
        return (ResponseError::EligibleLeadersNotAvailable.code(), Some(m));
    }
    let m = format!("broker group {group:?} has an in-sync leader; ringmq never elects an out-of-sync one");
    (ResponseError::ElectionNotNeeded.code(), Some(m))
}
