//! A broker group's leader, elected through etcd. The leader key
//! `/ringmq/groups/<group>/leader` lives under the leader's lease; the
//! epoch key `/ringmq/groups/<group>/epoch` only grows, and both change in
//! one compare-and-swap transaction: a node leads epoch E+1 only if no
//! leader key exists and the epoch is still E when it commits.

use super::isr::{self, Isr};
use etcd_client::{Client, Compare, CompareOp, GetOptions, PutOptions, Txn, TxnOp};
use std::collections::{BTreeMap, BTreeSet};

/// Who leads a group, as the leader key says.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Leadership {
    pub node: String,
    /// Where the leader's shard 0 listens (shard k: port + k).
    pub advertise: String,
    pub epoch: u64,
}

pub(super) const GROUPS_PREFIX: &str = "/ringmq/groups/";

pub(super) fn leader_key(group: &str) -> String {
    format!("{GROUPS_PREFIX}{group}/leader")
}

pub(super) fn epoch_key(group: &str) -> String {
    format!("{GROUPS_PREFIX}{group}/epoch")
}

/// The group's current leader, if one holds the key.
pub async fn current(client: &mut Client, group: &str) -> Result<Option<Leadership>, String> {
    let found = client.get(leader_key(group), None).await.map_err(|e| e.to_string())?;
    let Some(kv) = found.kvs().first() else { return Ok(None) };
    serde_json::from_slice(kv.value()).map(Some).map_err(|e| format!("{}: {e}", leader_key(group)))
}

/// How a campaign ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Campaign {
    /// This node leads `epoch`, with this in-sync set (it included).
    Won { epoch: u64, isr: Isr },
    /// Another node got there first, or the state moved under the attempt.
    Lost,
    /// The stored in-sync set does not name this node: it may lack
    /// acknowledged messages, so it must not lead.
    NotInSync(BTreeSet<String>),
    /// A transfer asks for another node to lead (`cluster transfer-leader`).
    MakeWay(String),
}

/// One attempt to lead `group` under `lease`, in one transaction: no leader
/// key, the epoch and the in-sync set unchanged since read, and this node in
/// the set (any node, while no set is stored) -> epoch + 1, the leader key,
/// and the set stamped with the new epoch (and the group's shard count,
/// which numbers its shards in the cluster). While a transfer names another
/// registered node, this one makes way.
pub async fn campaign(
    client: &mut Client,
    group: &str,
    node: &str,
    advertise: &str,
    shards: usize,
    lease: i64,
) -> Result<Campaign, String> {
    let found = client.get(epoch_key(group), None).await.map_err(|e| e.to_string())?;
    let (epoch, revision) = match found.kvs().first() {
        Some(kv) => {
            let text = kv.value_str().map_err(|e| e.to_string())?;
            (text.parse::<u64>().map_err(|e| format!("{}: {e}", epoch_key(group)))?, kv.mod_revision())
        }
        None => (0, 0),
    };
    let (stored, isr_revision) = isr::read(client, group).await?;
    let members = match stored {
        Some(isr) if !isr.members.is_empty() && !isr.members.contains(node) => {
            return Ok(Campaign::NotInSync(isr.members))
        }
        Some(isr) if !isr.members.is_empty() => isr.members,
        _ => [node.to_string()].into(),
    };
    if let Some(to) = super::transfer::make_way_for(client, group, node).await? {
        return Ok(Campaign::MakeWay(to));
    }
    let next = Leadership { node: node.to_string(), advertise: advertise.to_string(), epoch: epoch + 1 };
    let isr = Isr { epoch: next.epoch, members };
    let json = serde_json::to_string(&next).expect("a leadership serializes");
    let txn = Txn::new()
        .when([
            Compare::create_revision(leader_key(group), CompareOp::Equal, 0),
            Compare::mod_revision(epoch_key(group), CompareOp::Equal, revision),
            Compare::mod_revision(isr::isr_key(group), CompareOp::Equal, isr_revision),
        ])
        .and_then([
            TxnOp::put(epoch_key(group), next.epoch.to_string(), None),
            TxnOp::put(leader_key(group), json, Some(PutOptions::new().with_lease(lease))),
            TxnOp::put(isr::isr_key(group), serde_json::to_string(&isr).expect("an ISR serializes"), None),
            TxnOp::put(super::placement::shards_key(group), shards.to_string(), None),
            // A transfer to this node is done once it leads.
            TxnOp::delete(super::transfer::transfer_key(group), None),
        ]);
    let done = client.txn(txn).await.map_err(|e| e.to_string())?;
    Ok(if done.succeeded() { Campaign::Won { epoch: next.epoch, isr } } else { Campaign::Lost })
}

/// What a leader recorded when it began an epoch: where each of its
/// shards' logs ended. Everything an earlier epoch left past these
/// positions on another node was never replicated by this leader.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct EpochStart {
    pub leader: String,
    /// Log end of each shard, by shard index.
    pub starts: Vec<u64>,
}

fn epoch_start_prefix(group: &str) -> String {
    format!("/ringmq/groups/{group}/epochs/")
}

fn epoch_start_key(group: &str, epoch: u64) -> String {
    // Zero-padded, so that the keys sort by epoch.
    format!("{}{epoch:020}", epoch_start_prefix(group))
}

/// Records where `epoch` began (kept for good: a node that rejoins after
/// many epochs still finds the one after its own).
pub async fn record_start(client: &mut Client, group: &str, epoch: u64, start: &EpochStart) -> Result<(), String> {
    let json = serde_json::to_string(start).expect("an epoch start serializes");
    client.put(epoch_start_key(group, epoch), json, None).await.map_err(|e| e.to_string())?;
    Ok(())
}

/// Every recorded epoch start of `group`, by epoch.
pub async fn epoch_starts(client: &mut Client, group: &str) -> Result<BTreeMap<u64, EpochStart>, String> {
    let prefix = epoch_start_prefix(group);
    let found = client.get(prefix.clone(), Some(GetOptions::new().with_prefix())).await.map_err(|e| e.to_string())?;
    let mut starts = BTreeMap::new();
    for kv in found.kvs() {
        let key = kv.key_str().map_err(|e| e.to_string())?;
        let epoch = key.strip_prefix(&prefix).and_then(|e| e.parse::<u64>().ok());
        let Some(epoch) = epoch else { continue };
        let start: EpochStart = serde_json::from_slice(kv.value()).map_err(|e| format!("{key}: {e}"))?;
        starts.insert(epoch, start);
    }
    Ok(starts)
}

/// Where a node whose log holds data of epochs up to `last` must cut shard
/// `shard`'s log before it follows: the start of the first epoch after
/// `last` (Kafka's leader-epoch truncation). None: nothing to cut.
pub fn cut_for(starts: &BTreeMap<u64, EpochStart>, last: u64, shard: usize) -> Option<u64> {
    starts.range(last + 1..).next().and_then(|(_, s)| s.starts.get(shard).copied())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rejoining_node_cuts_at_the_start_of_the_first_epoch_after_its_own() {
        let start = |leader: &str, starts: &[u64]| EpochStart { leader: leader.into(), starts: starts.to_vec() };
        let starts: BTreeMap<u64, EpochStart> =
            [(1, start("a", &[0, 0])), (2, start("b", &[500, 300])), (4, start("c", &[900, 700]))].into();
        assert_eq!(cut_for(&starts, 1, 0), Some(500), "a leader of epoch 1 cuts where b began epoch 2");
        assert_eq!(cut_for(&starts, 1, 1), Some(300));
        assert_eq!(cut_for(&starts, 2, 0), Some(900), "epoch 3 recorded nothing: epoch 4's start");
        assert_eq!(cut_for(&starts, 4, 0), None, "a node of the current epoch keeps its log");
        assert_eq!(cut_for(&starts, 0, 1), Some(0), "a node that never followed anyone keeps nothing");
    }
}

/// A broker group as etcd describes it, for `ringmq cluster status`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct GroupState {
    pub group: String,
    /// None while the group has no live leader.
    pub leader: Option<Leadership>,
    pub isr: Option<Isr>,
    /// Each follower's lag as the leader last stored it.
    pub lags: BTreeMap<String, isr::FollowerLag>,
}

/// Every broker group that has an epoch, by name.
pub fn list_groups(endpoints: &[String]) -> Result<Vec<GroupState>, String> {
    super::registry::blocking(endpoints, async |client| {
        let found = client
            .get(GROUPS_PREFIX, Some(GetOptions::new().with_prefix().with_keys_only()))
            .await
            .map_err(|e| e.to_string())?;
        let mut groups = Vec::new();
        for kv in found.kvs() {
            let key = kv.key_str().map_err(|e| e.to_string())?;
            let Some(group) = key.strip_prefix(GROUPS_PREFIX).and_then(|k| k.strip_suffix("/epoch")) else {
                continue;
            };
            let leader = current(client, group).await?;
            let (isr, _) = isr::read(client, group).await?;
            let lags = isr::read_lags(client, group).await?;
            groups.push(GroupState { group: group.to_string(), leader, isr, lags });
        }
        Ok(groups)
    })
}
