//! Cluster mode's data path between the nodes of one broker group: the
//! leader's shard serves its log to followers (`leader.rs`), each follower
//! shard fetches it from the same shard of the leader over the native
//! protocol and mirrors it (`follower.rs`, over `link.rs`). etcd is not on
//! this path; the control plane only decides who leads, in which epoch.

mod error;
pub mod follower;
pub mod leader;
mod link;

pub use error::ReplicaError;
