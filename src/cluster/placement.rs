//! Where topics live over the broker groups, in etcd:
//!
//! - `/ringmq/topics/<name>`: the topic's flush policy and each queue's
//!   group and shard (created once, by compare-and-swap);
//! - `/ringmq/groups/<G>/shards`: how many shards the group's nodes run
//!   (stored by every campaign);
//! - `/ringmq/groups/<G>/applied`: the newest etcd revision whose topics the
//!   group's leader has made its metadata.
//!
//! A topic change is answered once every group that has a leader applied it,
//! so a client may use any queue of it at once.

use super::election::{Leadership, GROUPS_PREFIX};
use crate::protocol::messages::CreateTopic;
use crate::protocol::ErrorCode;
use crate::server::placement::{place, ClusterView, GroupShards, PlacedTopic};
use crate::server::Failure;
use etcd_client::{Client, Compare, CompareOp, GetOptions, Txn, TxnOp};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

pub(super) const TOPICS_PREFIX: &str = "/ringmq/topics/";
/// Longest a topic change waits for the groups to apply it.
const APPLY_WAIT: Duration = Duration::from_secs(10);
/// How often that wait looks again.
const APPLY_POLL: Duration = Duration::from_millis(20);

pub(super) fn shards_key(group: &str) -> String {
    format!("{GROUPS_PREFIX}{group}/shards")
}

fn applied_key(group: &str) -> String {
    format!("{GROUPS_PREFIX}{group}/applied")
}

fn topic_key(name: &str) -> String {
    format!("{TOPICS_PREFIX}{name}")
}

/// True if a change of `key` may change the view (a leader, a group's shards, a topic).
pub(super) fn moves_the_view(key: &[u8]) -> bool {
    let key = String::from_utf8_lossy(key);
    key.starts_with(TOPICS_PREFIX)
        || (key.starts_with(GROUPS_PREFIX) && (key.ends_with("/leader") || key.ends_with("/shards")))
}

/// Every group with its shards and leader, and what each leader applied.
async fn read_groups(client: &mut Client) -> Result<(Vec<GroupShards>, BTreeMap<String, i64>), String> {
    let found = client.get(GROUPS_PREFIX, Some(GetOptions::new().with_prefix())).await.map_err(|e| e.to_string())?;
    let (mut shards, mut leaders, mut applied) = (BTreeMap::new(), BTreeMap::new(), BTreeMap::new());
    for kv in found.kvs() {
        let key = kv.key_str().map_err(|e| e.to_string())?;
        let Some((group, what)) = key.strip_prefix(GROUPS_PREFIX).and_then(|k| k.split_once('/')) else { continue };
        let text = kv.value_str().map_err(|e| format!("{key}: {e}"))?;
        match what {
            "shards" => {
                shards.insert(group.to_string(), text.parse::<u32>().map_err(|e| format!("{key}: {e}"))?);
            }
            "leader" => {
                let leader: Leadership = serde_json::from_str(text).map_err(|e| format!("{key}: {e}"))?;
                leaders.insert(group.to_string(), leader.advertise);
            }
            "applied" => {
                applied.insert(group.to_string(), text.parse::<i64>().map_err(|e| format!("{key}: {e}"))?);
            }
            _ => {}
        }
    }
    let groups = shards
        .into_iter()
        .map(|(group, shards)| GroupShards { leader: leaders.remove(&group), group, shards })
        .collect();
    Ok((groups, applied))
}

/// The groups and topics as etcd holds them now.
pub(super) async fn read_view(client: &mut Client) -> Result<ClusterView, String> {
    let (groups, _) = read_groups(client).await?;
    let found = client.get(TOPICS_PREFIX, Some(GetOptions::new().with_prefix())).await.map_err(|e| e.to_string())?;
    let mut topics = BTreeMap::new();
    for kv in found.kvs() {
        let key = kv.key_str().map_err(|e| e.to_string())?;
        let Some(name) = key.strip_prefix(TOPICS_PREFIX) else { continue };
        let mut topic: PlacedTopic = serde_json::from_slice(kv.value()).map_err(|e| format!("{key}: {e}"))?;
        topic.created = kv.create_revision();
        topics.insert(name.to_string(), topic);
    }
    let revision = found.header().map_or(0, |h| h.revision());
    Ok(ClusterView { groups, topics, revision })
}

fn unavailable(e: impl std::fmt::Display) -> Failure {
    Failure::cluster_unavailable(e)
}

/// Stores a new topic placed over the groups `view` knows; the revision it was stored at.
pub(super) async fn create(client: &mut Client, view: &ClusterView, req: &CreateTopic) -> Result<i64, Failure> {
    let queues = place(&req.name, req.queues, &view.groups);
    if queues.is_empty() {
        return Err(unavailable("no broker group has recorded its shards yet"));
    }
    let topic = PlacedTopic { flush: req.flush, queues, created: 0 };
    let json = serde_json::to_string(&topic).expect("a topic serializes");
    let key = topic_key(&req.name);
    let txn = Txn::new()
        .when([Compare::create_revision(key.clone(), CompareOp::Equal, 0)])
        .and_then([TxnOp::put(key, json, None)]);
    let done = client.txn(txn).await.map_err(unavailable)?;
    if !done.succeeded() {
        return Err(Failure(ErrorCode::TopicExists, format!("topic {:?} already exists", req.name)));
    }
    Ok(done.header().map_or(0, |h| h.revision()))
}

/// Deletes a topic; the revision it was deleted at.
pub(super) async fn delete(client: &mut Client, name: &str) -> Result<i64, Failure> {
    let key = topic_key(name);
    let txn = Txn::new()
        .when([Compare::create_revision(key.clone(), CompareOp::Greater, 0)])
        .and_then([TxnOp::delete(key, None)]);
    let done = client.txn(txn).await.map_err(unavailable)?;
    if !done.succeeded() {
        return Err(Failure(ErrorCode::UnknownTopic, format!("unknown topic {name:?}")));
    }
    Ok(done.header().map_or(0, |h| h.revision()))
}

/// Waits until every group that has a leader applied `revision`; after
/// `APPLY_WAIT` says which have not (the change is stored: they apply it
/// when they can).
pub(super) async fn wait_applied(client: &mut Client, revision: i64) -> Result<(), String> {
    let deadline = Instant::now() + APPLY_WAIT;
    loop {
        let (groups, applied) = read_groups(client).await?;
        let behind: Vec<String> = groups
            .into_iter()
            .filter(|g| g.leader.is_some() && applied.get(&g.group).is_none_or(|a| *a < revision))
            .map(|g| g.group)
            .collect();
        if behind.is_empty() {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!("broker groups {behind:?} have not applied revision {revision} within {APPLY_WAIT:?}"));
        }
        tokio::time::sleep(APPLY_POLL).await;
    }
}

/// Records that `group`'s leader applied the topics of `revision`.
pub(super) async fn store_applied(client: &mut Client, group: &str, revision: i64) -> Result<(), String> {
    client.put(applied_key(group), revision.to_string(), None).await.map_err(|e| e.to_string())?;
    Ok(())
}
