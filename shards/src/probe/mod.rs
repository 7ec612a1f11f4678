//! What a shard tells about itself and how tests make it fail: counters and
//! failure probes.

pub(crate) mod fault;
pub(crate) mod stats;
