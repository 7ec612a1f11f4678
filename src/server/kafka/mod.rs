//! The Kafka protocol edge (issue 18, first step): one listener per shard on
//! `--kafka-listen` port + k, serving ApiVersions, Metadata, Produce (records
//! translated into a ringmq batch), Fetch of this shard's partitions
//! (translated back into record batches v2) and ListOffsets (earliest,
//! latest) with the `kafka-protocol` codec. A topic is a ringmq topic, a partition a queue,
//! each shard a Kafka broker (node id = shard index).

pub mod connection;
mod dispatch;
