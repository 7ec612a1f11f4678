//! DescribeLogDirs: each shard is a Kafka broker with one log directory
//! (`DATA_DIR/shard-N`), answering for its own queues: each partition's
//! size, estimated as its records times the bytes per record of 8 sampled
//! batches (a shard's queues share one log, so no file holds one queue),
//! and the file system's total and usable bytes (Describe on the cluster).

use super::{Api, At};
use crate::security::acl::Operation;
use crate::server::auth::authorizer;
use crate::server::data::retention::estimated_bytes;
use crate::server::kafka::{codes, text, Services};
use kafka_protocol::messages::describe_log_dirs_response::{
    DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
};
use kafka_protocol::messages::{ApiKey, DescribeLogDirsRequest, DescribeLogDirsResponse};
use kafka_protocol::ResponseError;
use ringmq_shards::QueueId;
use std::collections::BTreeMap;

pub struct DescribeLogDirs;

impl Api for DescribeLogDirs {
    const KEY: ApiKey = ApiKey::DescribeLogDirs;
    const VERSIONS: (i16, i16) = (1, 4);
    const NAME: &'static str = "kafka_DescribeLogDirs";
    const NOTE: &'static str = "a shard's directory, its queues' sizes (estimated from sampled batches) and its \
                                disk's total and usable bytes (Describe on the cluster)";
    type Request = DescribeLogDirsRequest;
    type Response = DescribeLogDirsResponse;

    async fn serve(s: &Services, r: DescribeLogDirsRequest, at: &At) -> Option<DescribeLogDirsResponse> {
        let response = DescribeLogDirsResponse::default().with_throttle_time_ms(at.throttle_ms());
        if at.principal.check(&s.core, Operation::Describe, authorizer::cluster()).is_err() {
            return Some(response.with_error_code(ResponseError::ClusterAuthorizationFailed.code()));
        }
        let core = &s.core;
        let dir = core.config().shard_dir(core.id());
        let wanted = |topic: &str, queue: u32| match &r.topics {
            None => true,
            Some(topics) => topics.iter().any(|t| t.topic.as_str() == topic && t.partitions.contains(&(queue as i32))),
        };
        let mut topics: BTreeMap<String, Vec<DescribeLogDirsPartition>> = BTreeMap::new();
        let mut result = DescribeLogDirsResult::default().with_log_dir(text(dir.display().to_string()));
        for (topic, queue, slot) in core.metadata().slots_on(core.id()) {
            if !wanted(&topic, queue) {
                continue;
            }
            match estimated_bytes(core.storage(), QueueId(slot.storage_id)).await {
                Ok(bytes) => topics.entry(topic).or_default().push(
                    DescribeLogDirsPartition::default()
                        .with_partition_index(queue as i32)
                        .with_partition_size(bytes as i64),
                ),
                Err(e) => result = result.with_error_code(codes::of(crate::server::core::Failure::from(e).0)),
            }
        }
        if let Ok(fs) = rustix::fs::statvfs(&dir) {
            let total = fs.f_blocks.saturating_mul(fs.f_frsize);
            let usable = fs.f_bavail.saturating_mul(fs.f_frsize);
            result = result.with_total_bytes(total as i64).with_usable_bytes(usable as i64);
        }
        let topics = topics
            .into_iter()
            .map(|(name, partitions)| {
                DescribeLogDirsTopic::default().with_name(text(name).into()).with_partitions(partitions)
            })
            .collect();
        Some(response.with_results(vec![result.with_topics(topics)]))
    }
}
