//! ConsumerGroupHeartbeat: Kafka's consumer protocol (KIP-848), the broker
//! assigning (`groups/member_epochs.rs`): a member joins (epoch 0), beats
//! with its subscription and owned partitions when they change, and is told
//! its epoch and, when they change, its partitions (by topic id). On the
//! group's coordinator; Read on the group. A group is of one protocol at a
//! time (INCONSISTENT_GROUP_PROTOCOL otherwise). Subscriptions by regex
//! (INVALID_REGULAR_EXPRESSION when one does not compile) and static
//! members (`group.instance.id`) are served. The session timeout and the
//! heartbeat interval are the broker's settings, as Kafka's are.

use super::{Api, At};
use crate::security::acl::Operation;
use crate::server::groups::member_epochs::{Beat, TopicRegex};
use crate::server::kafka::groups::{by_topic_id, coordinated};
use crate::server::kafka::{codes, text, Services};
use kafka_protocol::messages::consumer_group_heartbeat_response::{Assignment, TopicPartitions};
use kafka_protocol::messages::{ApiKey, ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse};
use kafka_protocol::ResponseError;

pub struct ConsumerGroupHeartbeat;

impl Api for ConsumerGroupHeartbeat {
    const KEY: ApiKey = ApiKey::ConsumerGroupHeartbeat;
    const VERSIONS: (i16, i16) = (0, 1);
    const NAME: &'static str = "kafka_ConsumerGroupHeartbeat";
    const NOTE: &'static str = "KIP-848 consumer groups: the broker assigns (sticky, even), members reach their \
                                target incrementally, a partition never held twice; regex subscriptions and \
                                static members";
    type Request = ConsumerGroupHeartbeatRequest;
    type Response = ConsumerGroupHeartbeatResponse;

    async fn serve(s: &Services, r: ConsumerGroupHeartbeatRequest, at: &At) -> Option<ConsumerGroupHeartbeatResponse> {
        let response = ConsumerGroupHeartbeatResponse::default().with_throttle_time_ms(at.throttle_ms());
        let refused =
            |code: i16, m: String| Some(response.clone().with_error_code(code).with_error_message(Some(text(m))));
        if let Err(code) = coordinated(s, &at.principal, Operation::Read, &r.group_id) {
            return Some(response.with_error_code(code));
        }
        // None: unchanged; an empty one: no regex any more.
        let regex = match r.subscribed_topic_regex.as_deref() {
            None => None,
            Some("") => Some(None),
            Some(re) => match TopicRegex::new(re) {
                Ok(regex) => Some(Some(regex)),
                Err(why) => {
                    let m = format!("the subscription's regular expression does not compile: {why}");
                    return refused(ResponseError::InvalidRegularExpression.code(), m);
                }
            },
        };
        let metadata = s.core.metadata();
        let owned = r.topic_partitions.as_ref().map(|topics| {
            let names = metadata.names_by_id();
            let known = topics.iter().filter_map(|t| Some((names.get(t.topic_id.as_bytes())?, &t.partitions)));
            known.flat_map(|(name, ps)| ps.iter().map(move |p| (name.to_string(), (*p).max(0) as u32))).collect()
        });
        let beat = Beat {
            group: r.group_id.to_string(),
            member: r.member_id.to_string(),
            epoch: r.member_epoch,
            subscribed: r.subscribed_topic_names.as_ref().map(|t| t.iter().map(|n| n.to_string()).collect()),
            regex,
            instance: r.instance_id.as_ref().map(|i| i.to_string()),
            owned,
            session_timeout_ms: s.core.config().consumer_session_timeout.as_millis() as u64,
            client_id: at.client_id.clone(),
            client_host: String::new(),
        };
        let answer = match s.groups.consumer_heartbeat(&beat) {
            Ok(answer) => answer,
            Err(f) => return refused(codes::of(f.0), f.1),
        };
        let assignment = answer.assignment.map(|partitions| {
            let topics = by_topic_id(&s.core, &partitions).into_iter().filter_map(|(id, _, partitions)| {
                Some(TopicPartitions::default().with_topic_id(id?).with_partitions(partitions))
            });
            Assignment::default().with_topic_partitions(topics.collect())
        });
        Some(
            response
                .with_member_id(Some(text(answer.member)))
                .with_member_epoch(answer.epoch)
                .with_heartbeat_interval_ms(s.core.config().consumer_heartbeat_interval.as_millis() as i32)
                .with_assignment(assignment),
        )
    }
}
