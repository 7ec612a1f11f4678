//! OffsetDelete: a group's committed offsets of some partitions deleted
//! durably, unless a member of the group holds a partition of the topic
//! (GROUP_SUBSCRIBED_TO_TOPIC for that topic's partitions). On the group's
//! coordinator; Delete on the group, Read on each topic.

use super::delete_groups::deletion_code;
use super::{Api, At};
use crate::security::acl::Operation;
use crate::server::auth::authorizer;
use crate::server::kafka::groups::{coordinated, TOPIC_REFUSED};
use crate::server::kafka::{codes, permitted, Services};
use kafka_protocol::messages::offset_delete_response::{OffsetDeleteResponsePartition, OffsetDeleteResponseTopic};
use kafka_protocol::messages::{ApiKey, OffsetDeleteRequest, OffsetDeleteResponse};

pub struct OffsetDelete;

impl Api for OffsetDelete {
    const KEY: ApiKey = ApiKey::OffsetDelete;
    const VERSIONS: (i16, i16) = (0, 0);
    const NAME: &'static str = "kafka_OffsetDelete";
    const NOTE: &'static str = "a group's offsets of partitions deleted durably, unless a member consumes the topic";
    type Request = OffsetDeleteRequest;
    type Response = OffsetDeleteResponse;

    async fn serve(s: &Services, r: OffsetDeleteRequest, at: &At) -> Option<OffsetDeleteResponse> {
        if let Err(code) = coordinated(s, &at.principal, Operation::Delete, &r.group_id) {
            return Some(OffsetDeleteResponse::default().with_error_code(code));
        }
        let mut topics = Vec::new();
        for t in &r.topics {
            let allowed = permitted(&s.core, &at.principal, Operation::Read, authorizer::topic(&t.name), TOPIC_REFUSED);
            let queues: Vec<u32> = t.partitions.iter().map(|p| p.partition_index.max(0) as u32).collect();
            let code = match allowed {
                Err(code) => code,
                Ok(()) => match s.groups.delete_offsets(&r.group_id, &t.name, &queues).await {
                    Ok(deletion) => deletion_code(deletion),
                    Err(f) => codes::of(f.0),
                },
            };
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    OffsetDeleteResponsePartition::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(code)
                })
                .collect();
            topics.push(OffsetDeleteResponseTopic::default().with_name(t.name.clone()).with_partitions(partitions));
        }
        Some(OffsetDeleteResponse::default().with_topics(topics).with_throttle_time_ms(at.throttle_ms()))
    }
}
