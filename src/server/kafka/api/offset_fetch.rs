//! OffsetFetch: the group's committed offsets (-1: none) and their metadata, of the partitions
//! asked for, or (no topics named) of every partition it has committed that
//! the principal may describe.

use super::{Api, At};
use crate::protocol::messages::QueueRef;
use crate::security::acl::Operation;
use crate::server::auth::authorizer::{self, Principal};
use crate::server::kafka::groups::{coordinated, TOPIC_REFUSED};
use crate::server::kafka::{text, Services};
use kafka_protocol::messages::offset_fetch_response::{OffsetFetchResponsePartition, OffsetFetchResponseTopic};
use kafka_protocol::messages::TopicName;
use kafka_protocol::messages::{ApiKey, OffsetFetchRequest, OffsetFetchResponse};
use kafka_protocol::protocol::StrBytes;

pub struct OffsetFetch;

impl Api for OffsetFetch {
    const KEY: ApiKey = ApiKey::OffsetFetch;
    const VERSIONS: (i16, i16) = (1, 7);
    const NAME: &'static str = "kafka_OffsetFetch";
    const NOTE: &'static str =
        "a group's committed offsets (-1: none) and their metadata, of the partitions asked or all";
    type Request = OffsetFetchRequest;
    type Response = OffsetFetchResponse;

    async fn serve(s: &Services, r: OffsetFetchRequest, at: &At) -> Option<OffsetFetchResponse> {
        Some(committed(s, &at.principal, &r).with_throttle_time_ms(at.throttle_ms()))
    }
}

fn committed(s: &Services, principal: &Principal, r: &OffsetFetchRequest) -> OffsetFetchResponse {
    if let Err(code) = coordinated(s, principal, Operation::Describe, &r.group_id) {
        return OffsetFetchResponse::default().with_error_code(code);
    }
    let asked: Vec<(String, Vec<i32>)> = match &r.topics {
        Some(topics) => topics.iter().map(|t| (t.name.to_string(), t.partition_indexes.clone())).collect(),
        None => s
            .core
            .describe(&[])
            .topics
            .into_iter()
            .map(|t| {
                let queues = (0..t.queue_shards.len() as i32).collect();
                (t.name, queues)
            })
            .collect(),
    };
    let listed = r.topics.is_some();
    let describable = |topic: &str| principal.allows(&s.core, Operation::Describe, authorizer::topic(topic));
    // Of every committed partition, only the topics the principal may describe.
    let asked: Vec<(String, Vec<i32>)> = asked.into_iter().filter(|(t, _)| listed || describable(t)).collect();
    let topics = asked
        .into_iter()
        .map(|(topic, queues)| {
            let partitions: Vec<OffsetFetchResponsePartition> = queues
                .into_iter()
                .filter_map(|q| {
                    let queue = QueueRef { topic: topic.clone(), queue: q.max(0) as u32 };
                    let committed = s.groups.committed_with_metadata(&r.group_id, &queue);
                    let (offset, metadata) = committed.map_or((-1, String::new()), |c| (c.offset as i64, c.metadata));
                    (listed || offset >= 0).then(|| {
                        OffsetFetchResponsePartition::default()
                            .with_partition_index(q)
                            .with_committed_offset(offset)
                            .with_metadata(Some(StrBytes::from_string(metadata)))
                    })
                })
                .collect();
            let response = OffsetFetchResponseTopic::default().with_name(TopicName(text(topic.clone())));
            if listed && !describable(&topic) {
                let refused =
                    |p: OffsetFetchResponsePartition| p.with_error_code(TOPIC_REFUSED).with_committed_offset(-1);
                return response.with_partitions(partitions.into_iter().map(refused).collect());
            }
            response.with_partitions(partitions)
        })
        .collect();
    OffsetFetchResponse::default().with_topics(topics)
}
