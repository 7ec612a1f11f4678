//! The cluster as Kafka clients see it: each shard is a Kafka broker (node
//! id = the shard's index in the whole cluster). This node's shard k
//! listens on the `--kafka-listen` port plus k; another node's shard on its
//! native port plus the distance between this node's Kafka and native
//! ports (every node of a cluster keeps the same distance).

use crate::server::core::Core;
use kafka_protocol::messages::metadata_response::MetadataResponseBroker;
use kafka_protocol::messages::{BrokerId, TopicName};
use kafka_protocol::protocol::StrBytes;
use std::net::SocketAddr;

/// Every shard of the cluster as a Kafka broker, by shard index (None: its
/// broker group has no leader now).
pub fn brokers(core: &Core) -> Vec<Option<MetadataResponseBroker>> {
    let Some(kafka) = core.config().kafka_listen else { return Vec::new() };
    let mine = core.addrs();
    let native_base = mine.first().and_then(|a| a.parse::<SocketAddr>().ok()).map_or(0, |a| a.port());
    let distance = i32::from(kafka.port()) - i32::from(native_base);
    core.shard_addrs()
        .iter()
        .enumerate()
        .map(|(shard, addr)| {
            let native: SocketAddr = addr.parse().ok()?;
            let (host, port) = match mine.iter().position(|a| a == addr) {
                Some(k) => (kafka.ip(), i32::from(kafka.port()) + k as i32),
                None => (native.ip(), i32::from(native.port()) + distance),
            };
            let broker = MetadataResponseBroker::default().with_node_id(BrokerId(shard as i32));
            Some(broker.with_host(StrBytes::from_string(host.to_string())).with_port(port))
        })
        .collect()
}

/// The broker Metadata and DescribeCluster name as the controller: the
/// first known (ringmq has no controller broker; etcd keeps the cluster),
/// -1 when none is.
pub fn controller(known: &[MetadataResponseBroker]) -> BrokerId {
    known.first().map_or(BrokerId(-1), |b| b.node_id)
}

/// A topic's name as Kafka's messages carry it.
pub fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_string()))
}
