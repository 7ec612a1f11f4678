//! What a shard tells about itself and how tests make it fail: counters,
//! histograms and failure probes.

pub(crate) mod fault;
pub(crate) mod histogram;
pub(crate) mod stats;
