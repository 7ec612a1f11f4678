//! ringmq-bench: the load generator (open-loop producers, consumers,
//! end-to-end and publish latency in HDR histograms) and its tools.

pub mod chart;
pub mod compare;
pub mod cpu;
pub mod delayed;
pub mod histogram;
pub mod payload;
// Without the `kafka` feature (librdkafka), --protocol kafka is refused.
#[cfg_attr(not(feature = "kafka"), path = "kafka_off.rs")]
mod kafka;
pub mod rebalance;
pub mod run;
pub mod summary;
pub mod workload;
