//! Where topics live over the broker groups, in etcd:
//!
//! - `/ringmq/topics/<name>`: the topic's flush policy and each queue's
//!   group and shard (created once, by compare-and-swap);
//! - `/ringmq/broker-groups/<G>/shards`: how many shards the group's nodes run
//!   (stored by every campaign);
//! - `/ringmq/broker-groups/<G>/applied`: the newest etcd revision whose topics the
//!   group's leader has made its metadata.
//!
//! A topic change is answered once every group that has a leader applied it,
//! so a client may use any queue of it at once.

use super::election::{Leadership, BROKER_GROUPS_PREFIX};
use super::store::{Compare, Op, Store, StoreError};
use super::ClusterError;
use crate::server::placement::{place, ClusterView, GroupShards, PlacedTopic};
use crate::server::topic_configs::ConfigChange;
use crate::server::{flush_code, Failure, NewTopic, Reason};
use std::collections::BTreeMap;
use std::time::Duration;
use tokio::time::Instant;

pub(super) const TOPICS_PREFIX: &str = "/ringmq/topics/";
/// Longest a topic change waits for the groups to apply it.
const APPLY_WAIT: Duration = Duration::from_secs(10);
/// How often that wait looks again.
const APPLY_POLL: Duration = Duration::from_millis(20);

pub(super) fn shards_key(group: &str) -> String {
    format!("{BROKER_GROUPS_PREFIX}{group}/shards")
}

fn applied_key(group: &str) -> String {
    format!("{BROKER_GROUPS_PREFIX}{group}/applied")
}

pub(super) fn topic_key(name: &str) -> String {
    format!("{TOPICS_PREFIX}{name}")
}

/// True if a change of `key` may change the view (a leader, a group's shards, a topic).
pub(super) fn moves_the_view(key: &str) -> bool {
    key.starts_with(TOPICS_PREFIX)
        || (key.starts_with(BROKER_GROUPS_PREFIX) && (key.ends_with("/leader") || key.ends_with("/shards")))
}

/// Every group with its shards and leader, and what each leader applied.
async fn read_groups(store: &impl Store) -> Result<(Vec<GroupShards>, BTreeMap<String, i64>), StoreError> {
    let (mut shards, mut leaders, mut applied) = (BTreeMap::new(), BTreeMap::new(), BTreeMap::new());
    for kv in store.list(BROKER_GROUPS_PREFIX).await?.kvs {
        let Some((group, what)) = kv.key.strip_prefix(BROKER_GROUPS_PREFIX).and_then(|k| k.split_once('/')) else {
            continue;
        };
        match what {
            "shards" => {
                shards.insert(group.to_string(), kv.number::<u32>()?);
            }
            "leader" => {
                leaders.insert(group.to_string(), kv.json::<Leadership>()?.advertise);
            }
            "applied" => {
                applied.insert(group.to_string(), kv.number::<i64>()?);
            }
            _ => {}
        }
    }
    let groups = shards
        .into_iter()
        .map(|(group, shards)| GroupShards { leader: leaders.remove(&group), broker_group: group, shards })
        .collect();
    Ok((groups, applied))
}

/// The groups and topics as the store holds them now.
pub(super) async fn read_view(store: &impl Store) -> Result<ClusterView, StoreError> {
    let (groups, _) = read_groups(store).await?;
    let listed = store.list(TOPICS_PREFIX).await?;
    let mut topics = BTreeMap::new();
    for kv in &listed.kvs {
        let Some(name) = kv.key.strip_prefix(TOPICS_PREFIX) else { continue };
        let mut topic: PlacedTopic = kv.json()?;
        topic.created = kv.create_revision;
        topics.insert(name.to_string(), topic);
    }
    let cluster_id = super::cluster_id::read(store).await?;
    Ok(ClusterView { groups, topics, revision: listed.revision, cluster_id })
}

fn unavailable(e: impl std::fmt::Display) -> Failure {
    Failure::cluster_unavailable(e)
}

/// Stores a new topic placed over the groups `view` knows; the revision it was stored at.
pub(super) async fn create(store: &impl Store, view: &ClusterView, req: &NewTopic) -> Result<i64, Failure> {
    let queues = place(&req.name, req.queues, &view.groups);
    if queues.is_empty() {
        return Err(unavailable("no broker group has recorded its shards yet"));
    }
    let configs = req.configs.clone();
    let topic = PlacedTopic { flush: flush_code(req.flush), queues, configs, created: 0, moves: BTreeMap::new() };
    let json = serde_json::to_string(&topic).expect("a topic serializes");
    let key = topic_key(&req.name);
    let made = store.txn(vec![Compare::Absent(key.clone())], vec![Op::put(key, json)]).await.map_err(unavailable)?;
    made.ok_or_else(|| Failure(Reason::TopicExists, format!("topic {:?} already exists", req.name)))
}

/// Deletes a topic; the revision it was deleted at.
pub(super) async fn delete(store: &impl Store, name: &str) -> Result<i64, Failure> {
    let key = topic_key(name);
    let done = store.txn(vec![Compare::Present(key.clone())], vec![Op::Delete(key)]).await.map_err(unavailable)?;
    done.ok_or_else(|| Failure(Reason::UnknownTopic, format!("unknown topic {name:?}")))
}

/// Changes a topic's configs; the revision it was stored at.
pub(super) async fn configure(store: &impl Store, name: &str, changes: &[ConfigChange]) -> Result<i64, Failure> {
    change_topic(store, name, |topic| {
        topic.configs = topic.configs.changed(changes)?;
        Ok(())
    })
    .await
}

/// Gives a topic `queues` queues in all, the new ones placed over the groups
/// `view` knows as a topic of that many would be; the revision it was stored at.
pub(super) async fn add_queues(
    store: &impl Store,
    view: &ClusterView,
    name: &str,
    queues: u32,
) -> Result<i64, Failure> {
    change_topic(store, name, |topic| {
        crate::server::check_more_queues(name, Some(topic.queues.len()), queues)?;
        let placed = place(name, queues, &view.groups);
        if placed.len() != queues as usize {
            return Err(unavailable("no broker group has recorded its shards yet"));
        }
        topic.queues.extend_from_slice(&placed[topic.queues.len()..]);
        Ok(())
    })
    .await
}

/// Changes a topic's key: read (with its creation), changed by `change`,
/// written back unless another change came between (then again); the
/// revision it was stored at (unchanged: the key's own).
pub(super) async fn change_topic(
    store: &impl Store,
    name: &str,
    change: impl Fn(&mut PlacedTopic) -> Result<(), Failure>,
) -> Result<i64, Failure> {
    let key = topic_key(name);
    loop {
        let kv = store.get(&key).await.map_err(unavailable)?.ok_or_else(|| Failure::unknown_topic(name))?;
        let mut before: PlacedTopic = kv.json().map_err(unavailable)?;
        before.created = kv.create_revision;
        let mut topic = before.clone();
        change(&mut topic)?;
        if topic == before {
            return Ok(kv.mod_revision);
        }
        let json = serde_json::to_string(&topic).expect("a topic serializes");
        let unchanged = Compare::ModRevision(key.clone(), kv.mod_revision);
        if let Some(revision) =
            store.txn(vec![unchanged], vec![Op::put(key.clone(), json)]).await.map_err(unavailable)?
        {
            return Ok(revision);
        }
    }
}

/// Waits until every group that has a leader applied `revision`; after
/// `APPLY_WAIT` says which have not (the change is stored: they apply it
/// when they can).
pub(super) async fn wait_applied(store: &impl Store, revision: i64) -> Result<(), ClusterError> {
    let deadline = Instant::now() + APPLY_WAIT;
    loop {
        let (groups, applied) = read_groups(store).await?;
        let behind: Vec<String> = groups
            .into_iter()
            .filter(|g| g.leader.is_some() && applied.get(&g.broker_group).is_none_or(|a| *a < revision))
            .map(|g| g.broker_group)
            .collect();
        if behind.is_empty() {
            return Ok(());
        }
        if Instant::now() > deadline {
            let m = format!("broker groups {behind:?} have not applied revision {revision} within {APPLY_WAIT:?}");
            return Err(ClusterError::Refused(m));
        }
        tokio::time::sleep(APPLY_POLL).await;
    }
}

/// Records that `group`'s leader applied the topics of `revision`.
pub(super) async fn store_applied(store: &impl Store, group: &str, revision: i64) -> Result<(), StoreError> {
    store.put(&applied_key(group), revision.to_string().into_bytes(), None).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::store::MemoryStore;
    use crate::server::topic_configs::TopicConfigs;
    use ringmq_shards::FlushPolicy;

    #[test]
    fn a_topics_configs_change_in_etcd_keeping_its_creation_and_a_bad_change_changes_nothing() {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        runtime.block_on(async {
            let store = MemoryStore::new();
            store.put(&shards_key("a"), b"2".to_vec(), None).await.unwrap();
            let view = read_view(&store).await.unwrap();
            let configs = TopicConfigs::from_entries([("retention.ms", "1000")]).unwrap();
            let topic = NewTopic { name: "t".into(), queues: 2, flush: FlushPolicy::Sync, configs };
            create(&store, &view, &topic).await.unwrap();
            let created = read_view(&store).await.unwrap().topics["t"].clone();
            assert_eq!(created.configs.retention_age(), Some(Duration::from_secs(1)));

            let set = ConfigChange::Set("max.message.bytes".into(), "2048".into());
            configure(&store, "t", &[set, ConfigChange::Unset("retention.ms".into())]).await.unwrap();
            let changed = read_view(&store).await.unwrap().topics["t"].clone();
            assert_eq!(changed.created, created.created, "the same topic, not a new one");
            assert_eq!((changed.configs.max_message_bytes(), changed.configs.retention_age()), (Some(2048), None));

            let bad = ConfigChange::Set("cleanup.policy".into(), "keep".into());
            let refused = configure(&store, "t", &[bad]).await.unwrap_err();
            assert_eq!(refused.0, Reason::InvalidConfig);
            assert_eq!(read_view(&store).await.unwrap().topics["t"], changed);
            let unknown = configure(&store, "nope", &[]).await.unwrap_err();
            assert_eq!(unknown.0, Reason::UnknownTopic);

            add_queues(&store, &view, "t", 3).await.unwrap();
            let grown = read_view(&store).await.unwrap().topics["t"].clone();
            assert_eq!(
                (grown.queues.len(), &grown.queues[..2], grown.created),
                (3, &changed.queues[..], created.created)
            );
            assert_eq!(add_queues(&store, &view, "t", 3).await.unwrap_err().0, Reason::InvalidRequest, "not more");
        });
    }
}
