//! ConsumerGroupDescribe: a KIP-848 group's epoch and members with their
//! subscriptions, assignments and targets (Describe on the group, on its
//! coordinator), and the principal's authorized operations on it when
//! asked. A group of the classic protocol is not one (GROUP_ID_NOT_FOUND,
//! as Kafka answers; admin clients then describe it with DescribeGroups).

use super::{Api, At};
use crate::security::acl::Operation;
use crate::server::auth::authorizer;
use crate::server::groups::member_epochs::Partition;
use crate::server::kafka::acls::authorized_operations;
use crate::server::kafka::groups::{by_topic_id, coordinated};
use crate::server::kafka::{text, Services};
use kafka_protocol::messages::consumer_group_describe_response::{Assignment, DescribedGroup, Member, TopicPartitions};
use kafka_protocol::messages::{ApiKey, ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse, TopicName};
use kafka_protocol::ResponseError;

pub struct ConsumerGroupDescribe;

impl Api for ConsumerGroupDescribe {
    const KEY: ApiKey = ApiKey::ConsumerGroupDescribe;
    const VERSIONS: (i16, i16) = (0, 1);
    const NAME: &'static str = "kafka_ConsumerGroupDescribe";
    const NOTE: &'static str = "a KIP-848 group's epoch, members, assignments and targets; a classic group is \
                                GROUP_ID_NOT_FOUND (described by DescribeGroups)";
    type Request = ConsumerGroupDescribeRequest;
    type Response = ConsumerGroupDescribeResponse;

    async fn serve(s: &Services, r: ConsumerGroupDescribeRequest, at: &At) -> Option<ConsumerGroupDescribeResponse> {
        let asked = r.include_authorized_operations;
        let operations = |group: &str| authorized_operations(asked, &s.core, &at.principal, authorizer::group(group));
        let assignment = |partitions: &[Partition]| {
            let topics = by_topic_id(&s.core, partitions).into_iter().map(|(id, topic, partitions)| {
                TopicPartitions::default()
                    .with_topic_id(id.unwrap_or_default())
                    .with_topic_name(TopicName(text(topic)))
                    .with_partitions(partitions)
            });
            Assignment::default().with_topic_partitions(topics.collect())
        };
        let groups = r
            .group_ids
            .iter()
            .map(|group| {
                let described = DescribedGroup::default().with_group_id(group.clone());
                if let Err(code) = coordinated(s, &at.principal, Operation::Describe, group) {
                    return described.with_error_code(code);
                }
                let Some(view) = s.groups.consumer_group(group) else {
                    let m = format!("group {:?} is not a group of the consumer protocol", group.as_str());
                    return described
                        .with_error_code(ResponseError::GroupIdNotFound.code())
                        .with_error_message(Some(text(m)));
                };
                let members = view.members.iter().map(|m| {
                    Member::default()
                        .with_member_id(text(m.member.clone()))
                        .with_member_epoch(m.epoch as i32)
                        .with_client_id(text(m.client_id.clone()))
                        .with_client_host(text(m.client_host.clone()))
                        .with_instance_id(m.instance.clone().map(text))
                        .with_subscribed_topic_names(m.subscribed.iter().map(|t| TopicName(text(t.clone()))).collect())
                        .with_subscribed_topic_regex(m.regex.clone().map(text))
                        .with_assignment(assignment(&m.assigned))
                        .with_target_assignment(assignment(&m.target))
                        .with_member_type(1)
                });
                described
                    .with_group_state(text("Stable"))
                    .with_group_epoch(view.epoch as i32)
                    .with_assignment_epoch(view.epoch as i32)
                    .with_assignor_name(text("uniform"))
                    .with_members(members.collect())
                    .with_authorized_operations(operations(group))
            })
            .collect();
        Some(ConsumerGroupDescribeResponse::default().with_groups(groups).with_throttle_time_ms(at.throttle_ms()))
    }
}
