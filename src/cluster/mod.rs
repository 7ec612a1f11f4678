//! Cluster mode's control plane: etcd holds which nodes are alive (each
//! registered under a lease it keeps alive) and each broker group's leader
//! and epoch (changed only by compare-and-swap). The data path never goes through etcd.
//!
//! The etcd client (tonic over tokio) runs on a thread of its own,
//! `ringmq-control`, bridged to the rest by channels: no shard thread ever
//! runs it.

mod accounts;
mod cluster_id;
mod control_plane;
mod election;
mod isr;
pub mod local_epoch;
mod moves;
pub mod node;
mod placement;
mod rebalance;
mod registry;
#[cfg(test)]
mod simulation;
pub mod store;
mod transfer;

pub use accounts::{change_accounts, cluster_users};
pub use cluster_id::read_cluster_id;
pub use control_plane::{ControlPlane, ControlPlaneError, Elected, OnLost};
pub use election::{list_groups, EpochStart, GroupState, Leadership};
pub use isr::Isr;
pub use moves::{cancel_move, drain, list_moves, move_queue, QueueMove};
pub use rebalance::{rebalance, GroupLoad, Plan, EVEN};
pub use registry::{list_nodes, Node, NodeKey};
pub use transfer::request as transfer_leader;

use std::time::Duration;

/// Why a cluster command (the CLI's, or a node's control plane) failed.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error(transparent)]
    Store(#[from] store::StoreError),
    #[error("etcd at {endpoints:?}: {error}")]
    At { endpoints: Vec<String>, error: Box<ClusterError> },
    #[error("cannot start the etcd client: {0}")]
    Runtime(String),
    /// What was asked cannot be done as the cluster stands (the message says why).
    #[error("{0}")]
    Refused(String),
}

/// How a node joins a cluster (`serve --cluster URL --group G --node N --advertise ADDR`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterConfig {
    /// etcd endpoints, `host:port`.
    pub endpoints: Vec<String>,
    /// The broker group this node belongs to.
    pub broker_group: String,
    /// This node's name, unique in its group.
    pub node: String,
    /// The address clients and peers reach this node's shard 0 on.
    pub advertise: String,
    /// A node whose lease is not renewed for this long is gone.
    pub lease_ttl: Duration,
    /// Shards per node (the same on every node of the group).
    pub shards: usize,
    /// This node is its group's preferred leader (Kafka's preferred
    /// replica): a preferred-leader election hands the lead to it.
    pub preferred_leader: bool,
}

/// Longest an etcd call may take before the control plane reports it.
pub const ETCD_TIMEOUT: Duration = Duration::from_secs(5);
/// Default lease of a node's registration.
pub const DEFAULT_LEASE_TTL: Duration = Duration::from_secs(5);

/// A cluster URL that names no etcd endpoint.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?}: expected etcd://host:port[,host:port]")]
pub struct BadClusterUrl(pub String);

/// `etcd://host:port[,host:port...]` as endpoints.
pub fn parse_endpoints(url: &str) -> Result<Vec<String>, BadClusterUrl> {
    let bad = || BadClusterUrl(url.to_string());
    let rest = url.strip_prefix("etcd://").ok_or_else(bad)?;
    let endpoints: Vec<String> = rest.split(',').filter(|e| !e.is_empty()).map(str::to_string).collect();
    if endpoints.is_empty() || endpoints.iter().any(|e| !e.contains(':')) {
        return Err(bad());
    }
    Ok(endpoints)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_come_from_an_etcd_url() {
        assert_eq!(parse_endpoints("etcd://127.0.0.1:2379").unwrap(), vec!["127.0.0.1:2379"]);
        assert_eq!(parse_endpoints("etcd://a:1,b:2").unwrap(), vec!["a:1", "b:2"]);
        assert!(parse_endpoints("http://a:1").is_err());
        assert!(parse_endpoints("etcd://").is_err());
        assert!(parse_endpoints("etcd://nohost").is_err());
    }
}
