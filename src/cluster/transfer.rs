//! A planned change of a broker group's leader (`ringmq cluster
//! transfer-leader`). The request `/ringmq/broker-groups/<G>/transfer` names the
//! node to lead and lives under a lease of its own (`REQUEST_TTL`), so a
//! request nobody can carry out goes away. The leader hands over once the
//! target is in the in-sync set and has caught up (or after
//! `CATCH_UP_WAIT`): it deletes its leader key and restarts as a follower.
//! While the request stands and its target is registered, only the target
//! campaigns; its winning campaign removes the request.
//!
//! Sync replication loses nothing acknowledged: the target is in the
//! in-sync set. Async replication loses what the target had not fetched
//! when the leader stepped down, as a fail-over does; the leader waits for
//! it to catch up first.

use super::election::{self, Leadership, BROKER_GROUPS_PREFIX};
use super::isr;
use super::registry;
use super::store::{Compare, Op, Store, StoreError};
use super::ClusterError;
use crate::server::placement::PreferredElection;
use std::time::{Duration, Instant};

/// How long a transfer request stands.
const REQUEST_TTL: Duration = Duration::from_secs(30);
/// Longest the leader waits for the target to catch up before it hands over.
pub(super) const CATCH_UP_WAIT: Duration = Duration::from_secs(2);

fn refused(why: String) -> ClusterError {
    ClusterError::Refused(why)
}

/// Who should lead.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Transfer {
    pub to: String,
}

pub(super) fn transfer_key(group: &str) -> String {
    format!("{BROKER_GROUPS_PREFIX}{group}/transfer")
}

/// The standing request of `group`, if any.
pub(super) async fn read(store: &impl Store, group: &str) -> Result<Option<Transfer>, StoreError> {
    store.get(&transfer_key(group)).await?.map(|kv| kv.json()).transpose()
}

/// The node a standing request asks `node` to make way for: registered, and not `node`.
pub(super) async fn make_way_for(store: &impl Store, group: &str, node: &str) -> Result<Option<String>, StoreError> {
    let Some(t) = read(store, group).await? else { return Ok(None) };
    if t.to == node || !registry::group_nodes(store, group).await?.contains(&t.to) {
        return Ok(None);
    }
    Ok(Some(t.to))
}

/// Gives up the lead of `group` that `mine` holds: deletes the leader key
/// if it is still this one. False if it was not.
pub(super) async fn resign(store: &impl Store, group: &str, mine: &Leadership) -> Result<bool, StoreError> {
    let json = serde_json::to_vec(mine).expect("a leadership serializes");
    let key = election::leader_key(group);
    Ok(store.txn(vec![Compare::Value(key.clone(), json)], vec![Op::Delete(key)]).await?.is_some())
}

/// Asks `group`'s leader to hand over to `to` (any other member of the
/// in-sync set if None) and waits up to `wait` until that node leads.
pub fn request(
    endpoints: &[String],
    group: &str,
    to: Option<&str>,
    wait: Duration,
) -> Result<Leadership, ClusterError> {
    registry::blocking(endpoints, async |store| {
        let leader = election::current(store, group)
            .await?
            .ok_or_else(|| refused(format!("broker group {group:?} has no leader now; it elects one by itself")))?;
        let (isr, _) = isr::read(store, group).await?;
        let members = isr.map(|i| i.members).unwrap_or_default();
        let alive = registry::group_nodes(store, group).await?;
        let target = match to {
            Some(to) => to.to_string(),
            None => members.iter().find(|m| **m != leader.node && alive.contains(m)).cloned().ok_or_else(|| {
                refused(format!("broker group {group:?} has no other in-sync member to lead (in sync: {members:?})"))
            })?,
        };
        if target == leader.node {
            return Ok(leader);
        }
        if !members.contains(&target) || !alive.contains(&target) {
            return Err(refused(format!(
                "{target:?} may not lead broker group {group:?}: it must be registered and in sync (in sync: {members:?})"
            )));
        }
        ask(store, group, &target).await?;
        let deadline = Instant::now() + wait;
        loop {
            match election::current(store, group).await? {
                Some(now) if now.node == target => return Ok(now),
                _ if Instant::now() > deadline => {
                    return Err(refused(format!("{target:?} did not take the lead of {group:?} within {wait:?}")));
                }
                _ => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    })
}

/// Stores the request that `group`'s lead go to `to`, under a lease of its own.
async fn ask(store: &impl Store, group: &str, to: &str) -> Result<(), StoreError> {
    let (lease, _) = store.grant(REQUEST_TTL).await?;
    let json = serde_json::to_vec(&Transfer { to: to.to_string() }).expect("a transfer serializes");
    store.put(&transfer_key(group), json, Some(lease)).await
}

/// Kafka's preferred-leader election for `group`: its leader is asked to
/// hand over to the node started with `--preferred-leader`, if that node
/// is registered, in sync and not leading already. Answers once the
/// request is stored (the leader hands over as `request`'s do).
pub async fn elect_preferred(store: &impl Store, group: &str) -> Result<PreferredElection, StoreError> {
    let Some(preferred) = registry::preferred_node(store, group).await? else {
        let why = format!("no node of broker group {group:?} is started with --preferred-leader; its leader stays");
        return Ok(PreferredElection::NotNeeded(why));
    };
    let Some(leader) = election::current(store, group).await? else {
        let why = format!("broker group {group:?} has no leader now; one of its in-sync members will be elected");
        return Ok(PreferredElection::Unavailable(why));
    };
    if leader.node == preferred {
        return Ok(PreferredElection::NotNeeded(format!("{preferred:?}, the preferred leader, leads {group:?}")));
    }
    let (isr, _) = isr::read(store, group).await?;
    let members = isr.map(|i| i.members).unwrap_or_default();
    if !members.contains(&preferred) {
        let why = format!("{preferred:?}, the preferred leader of {group:?}, is not in sync (in sync: {members:?})");
        return Ok(PreferredElection::Unavailable(why));
    }
    ask(store, group, &preferred).await?;
    Ok(PreferredElection::Requested(format!("the lead of {group:?} goes to {preferred:?}, its preferred leader")))
}
