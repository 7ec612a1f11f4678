//! A broker group's leader, elected through etcd. The leader key
//! `/ringmq/broker-groups/<group>/leader` lives under the leader's lease; the
//! epoch key `/ringmq/broker-groups/<group>/epoch` only grows, and both change in
//! one compare-and-swap transaction: a node leads epoch E+1 only if no
//! leader key exists and the epoch is still E when it commits.

use super::isr::{self, Isr};
use super::store::{Compare, Lease, Op, Store, StoreError};
use std::collections::{BTreeMap, BTreeSet};

/// Who leads a group, as the leader key says.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Leadership {
    pub node: String,
    /// Where the leader's shard 0 listens (shard k: port + k).
    pub advertise: String,
    pub epoch: u64,
    /// The lease the key lives under: its node's registration when it won.
    #[serde(default)]
    pub lease: i64,
}

/// Every broker group's keys are under here (a consumer group is not a broker group).
pub(super) const BROKER_GROUPS_PREFIX: &str = "/ringmq/broker-groups/";

pub(super) fn leader_key(group: &str) -> String {
    format!("{BROKER_GROUPS_PREFIX}{group}/leader")
}

pub(super) fn epoch_key(group: &str) -> String {
    format!("{BROKER_GROUPS_PREFIX}{group}/epoch")
}

/// The group's current leader, if one holds the key.
pub async fn current(store: &impl Store, group: &str) -> Result<Option<Leadership>, StoreError> {
    store.get(&leader_key(group)).await?.map(|kv| kv.json()).transpose()
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
    store: &impl Store,
    group: &str,
    node: &str,
    advertise: &str,
    shards: usize,
    lease: Lease,
) -> Result<Campaign, StoreError> {
    let (epoch, revision) = match store.get(&epoch_key(group)).await? {
        Some(kv) => (kv.number::<u64>()?, kv.mod_revision),
        None => (0, 0),
    };
    let (stored, isr_revision) = isr::read(store, group).await?;
    let members = match stored {
        Some(isr) if !isr.members.is_empty() && !isr.members.contains(node) => {
            return Ok(Campaign::NotInSync(isr.members))
        }
        Some(isr) if !isr.members.is_empty() => isr.members,
        _ => [node.to_string()].into(),
    };
    if let Some(to) = super::transfer::make_way_for(store, group, node).await? {
        return Ok(Campaign::MakeWay(to));
    }
    let next = Leadership { node: node.to_string(), advertise: advertise.to_string(), epoch: epoch + 1, lease };
    let isr = Isr { epoch: next.epoch, members };
    let json = serde_json::to_string(&next).expect("a leadership serializes");
    let when = vec![
        Compare::Absent(leader_key(group)),
        Compare::ModRevision(epoch_key(group), revision),
        Compare::ModRevision(isr::isr_key(group), isr_revision),
    ];
    let then = vec![
        Op::put(epoch_key(group), next.epoch.to_string()),
        Op::put_leased(leader_key(group), json, lease),
        Op::put(isr::isr_key(group), serde_json::to_string(&isr).expect("an ISR serializes")),
        Op::put(super::placement::shards_key(group), shards.to_string()),
        // A transfer to this node is done once it leads.
        Op::Delete(super::transfer::transfer_key(group)),
    ];
    let won = store.txn(when, then).await?.is_some();
    Ok(if won { Campaign::Won { epoch: next.epoch, isr } } else { Campaign::Lost })
}

/// What a leader recorded when it began an epoch: where each of its
/// shards' logs ended. Everything an earlier epoch left past these
/// positions on another node was never replicated by this leader.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct EpochStart {
    pub leader: String,
    /// Log end of each shard, by shard index.
    pub starts: Vec<u64>,
    /// The newest epoch whose data the leader's logs held as it began:
    /// the epoch before this one in its logs' history (None: recorded by a
    /// broker that did not keep it; every earlier epoch is then taken to be
    /// in that history).
    #[serde(default)]
    pub previous: Option<u64>,
}

fn epoch_start_prefix(group: &str) -> String {
    format!("{BROKER_GROUPS_PREFIX}{group}/epochs/")
}

fn epoch_start_key(group: &str, epoch: u64) -> String {
    // Zero-padded, so that the keys sort by epoch.
    format!("{}{epoch:020}", epoch_start_prefix(group))
}

/// Records where `epoch` began (kept for good: a node that rejoins after
/// many epochs still finds the one after its own). Only the first record
/// stands: a leader that starts its shards again in the same epoch has
/// written since, and its log end then is not where the epoch began.
pub async fn record_start(store: &impl Store, group: &str, epoch: u64, start: &EpochStart) -> Result<(), StoreError> {
    let json = serde_json::to_vec(start).expect("an epoch start serializes");
    let key = epoch_start_key(group, epoch);
    store.txn(vec![Compare::Absent(key.clone())], vec![Op::put(key, json)]).await.map(drop)
}

/// Every recorded epoch start of `group`, by epoch.
pub async fn epoch_starts(store: &impl Store, group: &str) -> Result<BTreeMap<u64, EpochStart>, StoreError> {
    let prefix = epoch_start_prefix(group);
    let mut starts = BTreeMap::new();
    for kv in store.list(&prefix).await?.kvs {
        let Some(epoch) = kv.key.strip_prefix(&prefix).and_then(|e| e.parse::<u64>().ok()) else { continue };
        starts.insert(epoch, kv.json()?);
    }
    Ok(starts)
}

/// Where a node whose logs hold data of epochs up to `last` must cut shard
/// `shard`'s log before it follows the leader of epoch `leading` (Kafka's
/// leader-epoch truncation, KIP-101 and KIP-279). The new leader's log holds
/// the data of a chain of epochs, each start naming the one before it
/// (`previous`). The node's log agrees with it up to where the chain moved
/// past `c`, the newest chain epoch at or before `last`; beyond that it may
/// hold data of any later epoch it took part in (its recorded epoch can lag
/// the data), so it is cut at the earliest start of any epoch after `c`.
/// Every such start is at or past what the group had committed when that
/// epoch began, so nothing committed before is cut. None: nothing to cut.
pub fn cut_for(starts: &BTreeMap<u64, EpochStart>, last: u64, leading: u64, shard: usize) -> Option<u64> {
    if last >= leading {
        // It followed this epoch already: its log is this leader's.
        return None;
    }
    let mut c = last;
    let mut on_chain = leading;
    while let Some(previous) = starts.get(&on_chain).and_then(|s| s.previous) {
        // A chain runs to earlier epochs only: a start that names its own
        // epoch or a later one (recorded again after the node had stored
        // the epoch) ends it, as a start without a previous epoch does.
        if previous >= on_chain {
            break;
        }
        if previous <= last {
            c = previous;
            break;
        }
        on_chain = previous;
    }
    starts.range(c + 1..=leading).filter_map(|(_, s)| s.starts.get(shard).copied()).min()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn start(leader: &str, starts: &[u64], previous: Option<u64>) -> EpochStart {
        EpochStart { leader: leader.into(), starts: starts.to_vec(), previous }
    }

    #[test]
    fn a_rejoining_node_cuts_at_the_start_of_the_first_epoch_after_its_own() {
        let starts: BTreeMap<u64, EpochStart> = [
            (1, start("a", &[0, 0], Some(0))),
            (2, start("b", &[500, 300], Some(1))),
            (4, start("c", &[900, 700], Some(2))),
        ]
        .into();
        assert_eq!(cut_for(&starts, 1, 4, 0), Some(500), "a leader of epoch 1 cuts where b began epoch 2");
        assert_eq!(cut_for(&starts, 1, 4, 1), Some(300));
        assert_eq!(cut_for(&starts, 2, 4, 0), Some(900), "epoch 3 recorded nothing: epoch 4's start");
        assert_eq!(cut_for(&starts, 0, 4, 1), Some(0), "a node that never followed anyone keeps nothing");
        assert_eq!(cut_for(&starts, 4, 4, 0), None, "a node of the current epoch keeps its log");
    }

    #[test]
    fn a_node_whose_last_epoch_the_new_leader_never_held_cuts_where_that_epoch_began() {
        // c led epoch 4 from 616 while a, which held epoch 3 to 620, was
        // away; a leads epoch 5 with its epoch-3 data. c's epoch-4 data at
        // 616.. is not in a's log: c cuts at 616, not at epoch 5's 620.
        let starts: BTreeMap<u64, EpochStart> =
            [(3, start("b", &[400], Some(2))), (4, start("c", &[616], Some(3))), (5, start("a", &[620], Some(3)))]
                .into();
        assert_eq!(cut_for(&starts, 4, 5, 0), Some(616));
        assert_eq!(
            cut_for(&starts, 3, 5, 0),
            Some(616),
            "its recorded epoch may lag its data: every later start counts"
        );
    }

    #[test]
    fn a_start_that_names_its_own_epoch_ends_the_chain_instead_of_looping() {
        // Found by the simulator (seed 196): a follower of epoch 5 looped forever.
        let starts: BTreeMap<u64, EpochStart> =
            [(3, start("a", &[100], Some(2))), (5, start("b", &[150], Some(5)))].into_iter().collect();
        assert_eq!(cut_for(&starts, 2, 5, 0), Some(100));
        let without: BTreeMap<u64, EpochStart> =
            [(3, start("a", &[100], Some(2))), (5, start("b", &[150], None))].into_iter().collect();
        assert_eq!(cut_for(&starts, 4, 5, 0), cut_for(&without, 4, 5, 0));
    }

    #[test]
    fn starts_recorded_without_a_previous_epoch_cut_as_before() {
        let starts: BTreeMap<u64, EpochStart> =
            [(1, start("a", &[0], None)), (2, start("b", &[500], None)), (4, start("c", &[900], None))].into();
        assert_eq!(cut_for(&starts, 1, 4, 0), Some(500));
        assert_eq!(cut_for(&starts, 2, 4, 0), Some(900));
    }
}

/// A broker group as etcd describes it, for `ringmq cluster status`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct GroupState {
    pub broker_group: String,
    /// None while the group has no live leader.
    pub leader: Option<Leadership>,
    pub isr: Option<Isr>,
    /// Each follower's lag as the leader last stored it.
    pub lags: BTreeMap<String, isr::FollowerLag>,
}

/// Every broker group that has an epoch, by name.
pub fn list_groups(endpoints: &[String]) -> Result<Vec<GroupState>, super::ClusterError> {
    super::registry::blocking(endpoints, async |store| {
        let mut groups = Vec::new();
        for kv in store.list(BROKER_GROUPS_PREFIX).await?.kvs {
            let Some(group) = kv.key.strip_prefix(BROKER_GROUPS_PREFIX).and_then(|k| k.strip_suffix("/epoch")) else {
                continue;
            };
            let leader = current(store, group).await?;
            let (isr, _) = isr::read(store, group).await?;
            let lags = isr::read_lags(store, group).await?;
            groups.push(GroupState { broker_group: group.to_string(), leader, isr, lags });
        }
        Ok(groups)
    })
}
