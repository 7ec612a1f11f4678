//! A broker group's leader, elected through etcd. The leader key
//! `/ringmq/groups/<group>/leader` lives under the leader's lease; the
//! epoch key `/ringmq/groups/<group>/epoch` only grows, and both change in
//! one compare-and-swap transaction: a node leads epoch E+1 only if no
//! leader key exists and the epoch is still E when it commits.

use etcd_client::{Client, Compare, CompareOp, PutOptions, Txn, TxnOp};

/// Who leads a group, as the leader key says.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Leadership {
    pub node: String,
    /// Where the leader's shard 0 listens (shard k: port + k).
    pub advertise: String,
    pub epoch: u64,
}

fn leader_key(group: &str) -> String {
    format!("/ringmq/groups/{group}/leader")
}

fn epoch_key(group: &str) -> String {
    format!("/ringmq/groups/{group}/epoch")
}

/// The group's current leader, if one holds the key.
pub async fn current(client: &mut Client, group: &str) -> Result<Option<Leadership>, String> {
    let found = client.get(leader_key(group), None).await.map_err(|e| e.to_string())?;
    let Some(kv) = found.kvs().first() else { return Ok(None) };
    serde_json::from_slice(kv.value()).map(Some).map_err(|e| format!("{}: {e}", leader_key(group)))
}

/// One attempt to lead `group` under `lease`: Some(epoch) if this node now
/// leads, None if another node got there first (or holds the key).
pub async fn campaign(
    client: &mut Client,
    group: &str,
    node: &str,
    advertise: &str,
    lease: i64,
) -> Result<Option<u64>, String> {
    let found = client.get(epoch_key(group), None).await.map_err(|e| e.to_string())?;
    let (epoch, revision) = match found.kvs().first() {
        Some(kv) => {
            let text = kv.value_str().map_err(|e| e.to_string())?;
            (text.parse::<u64>().map_err(|e| format!("{}: {e}", epoch_key(group)))?, kv.mod_revision())
        }
        None => (0, 0),
    };
    let next = Leadership { node: node.to_string(), advertise: advertise.to_string(), epoch: epoch + 1 };
    let json = serde_json::to_string(&next).expect("a leadership serializes");
    let txn = Txn::new()
        .when([
            Compare::create_revision(leader_key(group), CompareOp::Equal, 0),
            Compare::mod_revision(epoch_key(group), CompareOp::Equal, revision),
        ])
        .and_then([
            TxnOp::put(epoch_key(group), next.epoch.to_string(), None),
            TxnOp::put(leader_key(group), json, Some(PutOptions::new().with_lease(lease))),
        ]);
    let done = client.txn(txn).await.map_err(|e| e.to_string())?;
    Ok(done.succeeded().then_some(next.epoch))
}
