//! Where nodes register in etcd: `/ringmq/nodes/<group>/<node>`, the value
//! a JSON object with the node's advertised address, written under the
//! node's lease (so it disappears when the node stops renewing it).

use super::store::{EtcdStore, Store, StoreError};
use super::{ClusterConfig, ClusterError, ETCD_TIMEOUT};

const NODES_PREFIX: &str = "/ringmq/nodes/";

/// A registered node's key.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct NodeKey {
    pub broker_group: String,
    pub node: String,
}

impl NodeKey {
    pub fn of(config: &ClusterConfig) -> NodeKey {
        NodeKey { broker_group: config.broker_group.clone(), node: config.node.clone() }
    }

    pub fn etcd_key(&self) -> String {
        format!("{NODES_PREFIX}{}/{}", self.broker_group, self.node)
    }

    fn parse(key: &str) -> Option<NodeKey> {
        let (group, node) = key.strip_prefix(NODES_PREFIX)?.split_once('/')?;
        Some(NodeKey { broker_group: group.to_string(), node: node.to_string() })
    }
}

/// A registered node, as `ringmq cluster status` shows it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Node {
    #[serde(alias = "group")]
    pub broker_group: String,
    pub node: String,
    pub advertise: String,
    /// The etcd lease the registration lives under.
    #[serde(default)]
    pub lease: i64,
    /// Started with `--preferred-leader`.
    #[serde(default)]
    pub preferred_leader: bool,
}

impl Node {
    pub fn of(config: &ClusterConfig, lease: i64) -> Node {
        Node {
            broker_group: config.broker_group.clone(),
            node: config.node.clone(),
            advertise: config.advertise.clone(),
            lease,
            preferred_leader: config.preferred_leader,
        }
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a node serializes")
    }
}

/// The names of the nodes of `group` registered now.
pub(super) async fn group_nodes(store: &impl Store, group: &str) -> Result<Vec<String>, StoreError> {
    let listed = store.list(&format!("{NODES_PREFIX}{group}/")).await?;
    Ok(listed.kvs.into_iter().filter_map(|kv| NodeKey::parse(&kv.key)).map(|k| k.node).collect())
}

/// The preferred leader of `group` among its nodes registered now (the
/// first by name, should several be started with `--preferred-leader`).
pub(super) async fn preferred_node(store: &impl Store, group: &str) -> Result<Option<String>, StoreError> {
    let listed = store.list(&format!("{NODES_PREFIX}{group}/")).await?;
    let nodes = listed.kvs.iter().filter_map(|kv| kv.json::<Node>().ok());
    Ok(nodes.filter(|n| n.preferred_leader).map(|n| n.node).min())
}

/// Runs `f` with the etcd at `endpoints` on a small runtime of its own
/// (blocking: for the CLI).
pub(super) fn blocking<T>(
    endpoints: &[String],
    f: impl AsyncFnOnce(&EtcdStore) -> Result<T, ClusterError>,
) -> Result<T, ClusterError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| ClusterError::Runtime(e.to_string()))?;
    let at = |e: ClusterError| ClusterError::At { endpoints: endpoints.to_vec(), error: Box::new(e) };
    runtime.block_on(async {
        let store = EtcdStore::connect(endpoints, ETCD_TIMEOUT).await.map_err(|e| at(e.into()))?;
        f(&store).await.map_err(at)
    })
}

/// Every registered node, by group and name.
pub fn list_nodes(endpoints: &[String]) -> Result<Vec<Node>, ClusterError> {
    blocking(endpoints, async |store| {
        let mut nodes = Vec::new();
        for kv in store.list(NODES_PREFIX).await?.kvs {
            if NodeKey::parse(&kv.key).is_some() {
                nodes.push(kv.json::<Node>()?);
            }
        }
        nodes.sort_by(|a, b| (&a.broker_group, &a.node).cmp(&(&b.broker_group, &b.node)));
        Ok(nodes)
    })
}
