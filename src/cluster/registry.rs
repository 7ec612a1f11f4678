//! Where nodes register in etcd: `/ringmq/nodes/<group>/<node>`, the value
//! a JSON object with the node's advertised address, written under the
//! node's lease (so it disappears when the node stops renewing it).

use super::{ClusterConfig, ETCD_TIMEOUT};
use etcd_client::{Client, GetOptions};

const NODES_PREFIX: &str = "/ringmq/nodes/";

/// A registered node's key.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct NodeKey {
    pub group: String,
    pub node: String,
}

impl NodeKey {
    pub fn of(config: &ClusterConfig) -> NodeKey {
        NodeKey { group: config.group.clone(), node: config.node.clone() }
    }

    pub fn etcd_key(&self) -> String {
        format!("{NODES_PREFIX}{}/{}", self.group, self.node)
    }

    fn parse(key: &str) -> Option<NodeKey> {
        let (group, node) = key.strip_prefix(NODES_PREFIX)?.split_once('/')?;
        Some(NodeKey { group: group.to_string(), node: node.to_string() })
    }
}

/// A registered node, as `ringmq cluster status` shows it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Node {
    pub group: String,
    pub node: String,
    pub advertise: String,
    /// The etcd lease the registration lives under.
    #[serde(default)]
    pub lease: i64,
}

impl Node {
    pub fn of(config: &ClusterConfig, lease: i64) -> Node {
        Node { group: config.group.clone(), node: config.node.clone(), advertise: config.advertise.clone(), lease }
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a node serializes")
    }
}

/// A client of the etcd at `endpoints`, connected within `ETCD_TIMEOUT`.
pub(super) async fn connect(endpoints: &[String]) -> Result<Client, String> {
    tokio::time::timeout(ETCD_TIMEOUT, Client::connect(endpoints, None))
        .await
        .map_err(|_| format!("no connection within {ETCD_TIMEOUT:?}"))?
        .map_err(|e| e.to_string())
}

/// The names of the nodes of `group` registered now.
pub(super) async fn group_nodes(client: &mut Client, group: &str) -> Result<Vec<String>, String> {
    let prefix = format!("{NODES_PREFIX}{group}/");
    let found = client.get(prefix.clone(), Some(GetOptions::new().with_prefix())).await.map_err(|e| e.to_string())?;
    let mut names = Vec::new();
    for kv in found.kvs() {
        let key = kv.key_str().map_err(|e| e.to_string())?;
        names.extend(NodeKey::parse(key).map(|k| k.node));
    }
    Ok(names)
}

/// Runs `f` with a client of the etcd at `endpoints` on a small runtime of
/// its own (blocking: for the CLI).
pub(super) fn blocking<T>(
    endpoints: &[String],
    f: impl AsyncFnOnce(&mut Client) -> Result<T, String>,
) -> Result<T, String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("starting the etcd client: {e}"))?;
    runtime.block_on(async {
        let mut client = connect(endpoints).await.map_err(|e| format!("etcd at {endpoints:?}: {e}"))?;
        f(&mut client).await.map_err(|e| format!("etcd at {endpoints:?}: {e}"))
    })
}

/// Every registered node, by group and name.
pub fn list_nodes(endpoints: &[String]) -> Result<Vec<Node>, String> {
    blocking(endpoints, async |client| {
        let found = client.get(NODES_PREFIX, Some(GetOptions::new().with_prefix())).await.map_err(|e| e.to_string())?;
        let mut nodes = Vec::new();
        for kv in found.kvs() {
            let key = kv.key_str().map_err(|e| e.to_string())?;
            if NodeKey::parse(key).is_none() {
                continue;
            }
            let node: Node = serde_json::from_slice(kv.value()).map_err(|e| format!("{key}: {e}"))?;
            nodes.push(node);
        }
        nodes.sort_by(|a, b| (&a.group, &a.node).cmp(&(&b.group, &b.node)));
        Ok(nodes)
    })
}
