//! OffsetFetch: a group's committed offsets (-1: none) and their metadata,
//! of the partitions asked for, or (no topics named) of every partition it
//! has committed that the principal may describe. v8+ asks for several
//! groups at once (each answered as the older versions answer one; a
//! consumer-protocol member's epoch is not checked: reading is harmless).
//! With `require_stable` (v7+, KIP-447: a read_committed consumer) a
//! partition whose offset a transaction holds pending is answered
//! UNSTABLE_OFFSET_COMMIT, and the consumer asks again once it ended.

use super::{Api, At};
use crate::protocol::messages::QueueRef;
use crate::security::acl::Operation;
use crate::server::auth::authorizer::{self, Principal};
use crate::server::kafka::groups::{coordinated, TOPIC_REFUSED};
use crate::server::kafka::{text, Services};
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions, OffsetFetchResponseTopic,
    OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{ApiKey, OffsetFetchRequest, OffsetFetchResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

pub struct OffsetFetch;

const UNSTABLE: i16 = ResponseError::UnstableOffsetCommit.code();

impl Api for OffsetFetch {
    const KEY: ApiKey = ApiKey::OffsetFetch;
    const VERSIONS: (i16, i16) = (1, 9);
    const NAME: &'static str = "kafka_OffsetFetch";
    const NOTE: &'static str =
        "a group's committed offsets (-1: none) and their metadata, of the partitions asked or all; v8+ several \
         groups; require_stable: UNSTABLE_OFFSET_COMMIT while a transaction holds one pending";
    type Request = OffsetFetchRequest;
    type Response = OffsetFetchResponse;

    async fn serve(s: &Services, r: OffsetFetchRequest, at: &At) -> Option<OffsetFetchResponse> {
        let response = OffsetFetchResponse::default().with_throttle_time_ms(at.throttle_ms());
        if at.version < 8 {
            let asked =
                r.topics.as_ref().map(|ts| ts.iter().map(|t| (t.name.to_string(), t.partition_indexes.clone())));
            let (code, topics) =
                committed(s, &at.principal, &r.group_id, asked.map(Iterator::collect), r.require_stable);
            let topics = answered!(topics, OffsetFetchResponseTopic, OffsetFetchResponsePartition);
            return Some(response.with_error_code(code).with_topics(topics));
        }
        let groups = r.groups.iter().map(|g| {
            let asked =
                g.topics.as_ref().map(|ts| ts.iter().map(|t| (t.name.to_string(), t.partition_indexes.clone())));
            let (code, topics) =
                committed(s, &at.principal, &g.group_id, asked.map(Iterator::collect), r.require_stable);
            let topics = answered!(topics, OffsetFetchResponseTopics, OffsetFetchResponsePartitions);
            OffsetFetchResponseGroup::default()
                .with_group_id(g.group_id.clone())
                .with_error_code(code)
                .with_topics(topics)
        });
        Some(response.with_groups(groups.collect()))
    }
}

/// A group's answered topics in one of Kafka's two shapes (before v8 and
/// v8+: alike but for their types).
macro_rules! answered {
    ($topics:expr, $topic:ident, $partition:ident) => {
        $topics
            .into_iter()
            .map(|(name, partitions): (String, Vec<Partition>)| {
                let partitions = partitions.into_iter().map(|p| {
                    $partition::default()
                        .with_partition_index(p.index)
                        .with_committed_offset(p.offset)
                        .with_metadata(Some(StrBytes::from_string(p.metadata)))
                        .with_error_code(p.code)
                });
                $topic::default().with_name(TopicName(text(name))).with_partitions(partitions.collect())
            })
            .collect()
    };
}
use answered;

/// One partition's committed offset as answered.
struct Partition {
    index: i32,
    offset: i64,
    metadata: String,
    code: i16,
}

/// A group's committed offsets of the partitions `asked` (None: all it
/// committed that the principal may describe): the group's error code and
/// each topic's partitions; `stable`: none a transaction holds pending.
fn committed(
    s: &Services,
    principal: &Principal,
    group: &str,
    asked: Option<Vec<(String, Vec<i32>)>>,
    stable: bool,
) -> (i16, Vec<(String, Vec<Partition>)>) {
    if let Err(code) = coordinated(s, principal, Operation::Describe, group) {
        return (code, Vec::new());
    }
    let listed = asked.is_some();
    let describable = |topic: &str| principal.allows(&s.core, Operation::Describe, authorizer::topic(topic));
    let asked = asked.unwrap_or_else(|| {
        let all = s.core.describe(&[]).topics.into_iter();
        // Of every committed partition, only the topics the principal may describe.
        all.filter(|t| describable(&t.name)).map(|t| (t.name, (0..t.queue_shards.len() as i32).collect())).collect()
    });
    let topics = asked
        .into_iter()
        .map(|(topic, queues)| {
            let refused = listed && !describable(&topic);
            let partitions = queues
                .into_iter()
                .filter_map(|q| {
                    let queue = QueueRef { topic: topic.clone(), queue: q.max(0) as u32 };
                    let committed = s.groups.committed_with_metadata(group, &queue);
                    let (offset, metadata) = committed.map_or((-1, String::new()), |c| (c.offset as i64, c.metadata));
                    let unstable = stable && s.core.offsets().is_pending(group, &topic, queue.queue);
                    (listed || offset >= 0).then_some(match (refused, unstable) {
                        (true, _) => Partition { index: q, offset: -1, metadata, code: TOPIC_REFUSED },
                        (false, true) => Partition { index: q, offset: -1, metadata, code: UNSTABLE },
                        (false, false) => Partition { index: q, offset, metadata, code: 0 },
                    })
                })
                .collect();
            (topic, partitions)
        })
        .collect();
    (0, topics)
}
