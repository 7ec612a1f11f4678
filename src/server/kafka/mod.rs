//! The Kafka protocol edge (issue 18, first step): one listener per shard on
//! `--kafka-listen` port + k, serving ApiVersions and Metadata with the
//! `kafka-protocol` codec. A topic is a ringmq topic, a partition a queue,
//! each shard a Kafka broker (node id = shard index).

pub mod connection;
mod dispatch;
