//! Cluster mode's data path between nodes: the leader's shard serves its
//! log to followers (`leader.rs`), each follower shard fetches it from the
//! same shard of the leader over the native protocol and mirrors it
//! (`follower.rs`, over `link.rs`); a queue moving into a broker group is
//! copied from the source group's leader by the target's (`moves.rs`), and
//! a delivery into a queue that moved away is produced to its new owner
//! (`forward.rs`).
//! etcd is not on this path; the control plane only decides who leads, in
//! which epoch, and where queues live.

mod error;
pub mod follower;
pub mod forward;
pub mod leader;
mod link;
pub mod moves;

pub use error::ReplicaError;
