//! Moving a topic's queue to another broker group, in etcd. The move lives
//! in the topic's key (`moves: {queue: {to, frozen}}`), beside the queue's
//! place, so every step is one compare-and-swap of that key:
//!
//! 1. requested (`cluster move`, `drain`, Kafka's AlterPartitionReassignments):
//!    the target group stores the queue as arriving and its leader copies it;
//! 2. frozen, by the target once its copy caught up: the source stops taking
//!    appends (the queue's end is final once the source applied it);
//! 3. switched, by the target once it holds and committed that end: `to`
//!    becomes the queue's place and the move is gone; the source deletes its copy.
//!
//! Cancelled (before the switch), the move is removed and the source serves
//! the queue as before; the target deletes its copy.

use super::placement::{change_topic, read_view, topic_key, wait_applied};
use super::registry;
use super::store::Store;
use super::ClusterError;
use crate::server::placement::{ClusterView, Move, MoveStep, Place, PlacedTopic};
use crate::server::{Failure, Reason};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// How often a waiting command looks at the moves again.
const POLL: Duration = Duration::from_millis(100);

/// Topics whose queues stay where they are: a consumer group's retry and
/// dead-letter topics hold one queue in every broker group.
const UNMOVABLE_PREFIXES: [&str; 2] = ["%RETRY%", "%DLQ%"];

/// Whether `topic`'s queues may move; why not if they may not.
pub(super) fn movable(topic: &str) -> Result<(), String> {
    if UNMOVABLE_PREFIXES.iter().any(|p| topic.starts_with(p)) {
        return Err(format!("{topic:?} has one queue in every broker group; its queues stay"));
    }
    Ok(())
}

/// Stores each of `moves`.
pub(super) async fn start_all(store: &impl Store, moves: &[QueueMove]) -> Result<(), ClusterError> {
    for m in moves {
        start(store, &m.topic, m.queue, m.to.clone()).await.map_err(refused)?;
    }
    Ok(())
}

/// Stores a move of `topic`'s `queue` to `to` (replacing one elsewhere);
/// the revision it was stored at.
pub(super) async fn start(store: &impl Store, topic: &str, queue: u32, to: Place) -> Result<i64, Failure> {
    let view = read_view(store).await.map_err(Failure::cluster_unavailable)?;
    check_target(&view, &to)?;
    change_topic(store, topic, |t| {
        let from = queue_place(topic, t, queue)?;
        movable(topic).map_err(Failure::invalid)?;
        if t.moves.get(&queue).is_some_and(|m| m.to == to) {
            return Ok(());
        }
        if from.broker_group == to.broker_group {
            return Err(Failure::invalid(format!(
                "queue {queue} of {topic:?} lives in broker group {:?} already: queues move between broker groups",
                to.broker_group
            )));
        }
        // A move elsewhere is replaced (as Kafka replaces a reassignment),
        // thawed: its target's steps are refused from now on.
        t.moves.insert(queue, Move { to: to.clone(), frozen: false });
        Ok(())
    })
    .await
}

/// Removes the move of `topic`'s `queue` before its switch; the revision.
pub(super) async fn cancel(store: &impl Store, topic: &str, queue: u32) -> Result<i64, Failure> {
    change_topic(store, topic, |t| {
        queue_place(topic, t, queue)?;
        t.moves.remove(&queue).map(drop).ok_or_else(|| no_move(topic, queue))
    })
    .await
}

/// Takes `step` of the move of `topic` (created at `created`) `queue` to
/// `to`; refused if that move is gone (cancelled, or the topic made again).
pub(super) async fn step(
    store: &impl Store,
    step: MoveStep,
    topic: &str,
    created: i64,
    queue: u32,
    to: &Place,
) -> Result<i64, Failure> {
    change_topic(store, topic, |t| {
        let ours = t.created == created && t.moves.get(&queue).is_some_and(|m| m.to == *to);
        if !ours {
            return Err(no_move(topic, queue));
        }
        match step {
            MoveStep::Freeze => t.moves.get_mut(&queue).expect("checked").frozen = true,
            MoveStep::Thaw => t.moves.get_mut(&queue).expect("checked").frozen = false,
            MoveStep::Switch => {
                if !t.moves[&queue].frozen {
                    return Err(Failure::invalid(format!("queue {queue} of {topic:?} switches only once frozen")));
                }
                t.moves.remove(&queue);
                t.queues[queue as usize] = to.clone();
            }
        }
        Ok(())
    })
    .await
}

/// The place of `topic`'s `queue` now.
fn queue_place<'a>(topic: &str, t: &'a PlacedTopic, queue: u32) -> Result<&'a Place, Failure> {
    t.queues.get(queue as usize).ok_or_else(|| {
        Failure(Reason::UnknownQueue, format!("topic {topic:?} has queues 0..{}, not {queue}", t.queues.len()))
    })
}

/// Refuses a place no group of `view` has.
fn check_target(view: &ClusterView, to: &Place) -> Result<(), Failure> {
    let group = view.groups.iter().find(|g| g.broker_group == to.broker_group).ok_or_else(|| {
        Failure::invalid(format!(
            "no broker group {:?} has recorded its shards; start its nodes first",
            to.broker_group
        ))
    })?;
    if to.shard >= group.shards {
        let m = format!("broker group {:?} has shards 0..{}, not {}", to.broker_group, group.shards, to.shard);
        return Err(Failure::invalid(m));
    }
    Ok(())
}

fn no_move(topic: &str, queue: u32) -> Failure {
    Failure::invalid(format!("queue {queue} of {topic:?} is not moving"))
}

fn show(place: &Place) -> String {
    format!("{}/{}", place.broker_group, place.shard)
}

/// The shard of `group` that holds the fewest queues in `view` (a move's
/// target when none is named).
pub(super) fn emptiest_shard(view: &ClusterView, group: &str) -> Option<Place> {
    let shards = view.groups.iter().find(|g| g.broker_group == group)?.shards;
    let mut held: BTreeMap<u32, usize> = (0..shards).map(|s| (s, 0)).collect();
    for t in view.topics.values() {
        let places = t.queues.iter().chain(t.moves.values().map(|m| &m.to));
        for p in places.filter(|p| p.broker_group == group) {
            *held.entry(p.shard).or_default() += 1;
        }
    }
    let (shard, _) = held.into_iter().min_by_key(|(s, n)| (*n, *s))?;
    Some(Place { broker_group: group.to_string(), shard })
}

/// One queue's move as `cluster moves` lists it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct QueueMove {
    pub topic: String,
    pub queue: u32,
    pub from: Place,
    pub to: Place,
    pub frozen: bool,
}

/// Every move in `view`.
fn moves_of(view: &ClusterView) -> Vec<QueueMove> {
    let mut moves = Vec::new();
    for (name, t) in &view.topics {
        for (q, m) in &t.moves {
            let from = t.queues[*q as usize].clone();
            moves.push(QueueMove { topic: name.clone(), queue: *q, from, to: m.to.clone(), frozen: m.frozen });
        }
    }
    moves
}

/// `ringmq cluster move`: moves `topic`'s `queue` to `group` (to its
/// emptiest shard unless `shard` names one) and waits up to `wait` until
/// the switch; the queue's new place.
pub fn move_queue(
    endpoints: &[String],
    topic: &str,
    queue: u32,
    group: &str,
    shard: Option<u32>,
    wait: Duration,
) -> Result<Place, ClusterError> {
    registry::blocking(endpoints, async |store| {
        let view = read_view(store).await?;
        let to = match shard {
            Some(shard) => Place { broker_group: group.to_string(), shard },
            None => emptiest_shard(&view, group)
                .ok_or_else(|| ClusterError::Refused(format!("no broker group {group:?} has recorded its shards")))?,
        };
        let from = view.topics.get(topic).and_then(|t| t.queues.get(queue as usize)).cloned();
        start(store, topic, queue, to.clone()).await.map_err(refused)?;
        let from = from.expect("a queue the move was stored for");
        let moved = QueueMove { topic: topic.to_string(), queue, from, to: to.clone(), frozen: false };
        wait_moved(store, &[moved], wait).await?;
        Ok(to)
    })
}

/// `ringmq cluster move --cancel`: removes the move of `topic`'s `queue`.
pub fn cancel_move(endpoints: &[String], topic: &str, queue: u32) -> Result<(), ClusterError> {
    registry::blocking(endpoints, async |store| cancel(store, topic, queue).await.map(drop).map_err(refused))
}

/// `ringmq cluster moves`: every queue moving now.
pub fn list_moves(endpoints: &[String]) -> Result<Vec<QueueMove>, ClusterError> {
    registry::blocking(endpoints, async |store| Ok(moves_of(&read_view(store).await?)))
}

/// `ringmq cluster drain`: moves every queue off `group` that may move, at
/// most `in_flight` at a time, each to the emptiest shard of the other
/// groups. Gives up if one does not switch within `wait`.
pub fn drain(
    endpoints: &[String],
    group: &str,
    in_flight: usize,
    wait: Duration,
) -> Result<Vec<QueueMove>, ClusterError> {
    registry::blocking(endpoints, async |store| {
        let mut done = Vec::new();
        loop {
            let view = read_view(store).await?;
            let left = queues_on(&view, group);
            if left.is_empty() {
                return Ok(done);
            }
            let mut batch = Vec::new();
            for (topic, queue) in left.into_iter().take(in_flight.max(1)) {
                let from = view.topics[&topic].queues[queue as usize].clone();
                let to = emptiest_elsewhere(&view, group, &batch)?;
                batch.push(QueueMove { topic, queue, from, to, frozen: false });
            }
            start_all(store, &batch).await?;
            wait_moved(store, &batch, wait).await?;
            done.extend(batch);
        }
    })
}

/// The queues placed in `group` that may move (not a group's own retry or
/// dead-letter queue, which every group holds).
fn queues_on(view: &ClusterView, group: &str) -> Vec<(String, u32)> {
    let mut queues = Vec::new();
    for (name, t) in view.topics.iter().filter(|(n, _)| movable(n).is_ok()) {
        for (q, place) in t.queues.iter().enumerate() {
            if place.broker_group == group {
                queues.push((name.clone(), q as u32));
            }
        }
    }
    queues
}

/// The emptiest shard outside `group`, counting the moves `planned` too.
fn emptiest_elsewhere(view: &ClusterView, group: &str, planned: &[QueueMove]) -> Result<Place, ClusterError> {
    let mut counted = view.clone();
    for m in planned {
        let t = counted.topics.get_mut(&m.topic).expect("a planned topic");
        t.moves.insert(m.queue, Move { to: m.to.clone(), frozen: false });
    }
    let load = |p: &Place| {
        let held = counted.topics.values().flat_map(|t| t.queues.iter().chain(t.moves.values().map(|m| &m.to)));
        held.filter(|q| *q == p).count()
    };
    let others = counted.groups.iter().filter(|g| g.broker_group != group && g.leader.is_some());
    let candidates = others.filter_map(|g| emptiest_shard(&counted, &g.broker_group));
    candidates.min_by_key(|p| (load(p), p.clone())).ok_or_else(|| {
        ClusterError::Refused(format!("no other broker group with a leader can take broker group {group:?}'s queues"))
    })
}

/// Waits until each of `moves` switched and every group with a leader
/// applied the switch; fails if one was cancelled (or its topic deleted) or
/// `wait` passed first.
pub(super) async fn wait_moved(store: &impl Store, moves: &[QueueMove], wait: Duration) -> Result<(), ClusterError> {
    let deadline = Instant::now() + wait;
    loop {
        let view = read_view(store).await?;
        let mut moving = Vec::new();
        for m in moves {
            let name = format!("{}/{}", m.topic, m.queue);
            let Some(t) = view.topics.get(&m.topic) else {
                return Err(ClusterError::Refused(format!("topic {:?} was deleted while it moved", m.topic)));
            };
            if t.moves.contains_key(&m.queue) {
                moving.push(name);
            } else if t.queues[m.queue as usize] != m.to {
                return Err(ClusterError::Refused(format!("the move of {name} to {} was cancelled", show(&m.to))));
            }
        }
        if moving.is_empty() {
            // Switched in etcd; answered once the groups serve it so.
            let mut switched = 0;
            for m in moves {
                let kv = store.get(&topic_key(&m.topic)).await?;
                switched = switched.max(kv.map_or(0, |kv| kv.mod_revision));
            }
            return wait_applied(store, switched).await;
        }
        if Instant::now() > deadline {
            return Err(ClusterError::Refused(format!(
                "queues {moving:?} have not switched within {wait:?}; they go on moving (`ringmq cluster moves`)"
            )));
        }
        tokio::time::sleep(POLL).await;
    }
}

fn refused(f: Failure) -> ClusterError {
    ClusterError::Refused(f.1)
}

#[cfg(test)]
mod tests {
    use super::super::placement::{create, shards_key};
    use super::*;
    use crate::cluster::store::MemoryStore;
    use crate::server::NewTopic;
    use ringmq_shards::FlushPolicy;

    /// A store with `groups` (name, shards) and `topic` placed over them.
    async fn store_with(groups: &[(&str, u32)], topic: &NewTopic) -> MemoryStore {
        let store = MemoryStore::new();
        for (group, shards) in groups {
            store.put(&shards_key(group), shards.to_string().into_bytes(), None).await.unwrap();
        }
        create(&store, &read_view(&store).await.unwrap(), topic).await.unwrap();
        store
    }

    fn at(group: &str, shard: u32) -> Place {
        Place { broker_group: group.into(), shard }
    }

    #[test]
    fn a_move_is_checked_frozen_and_switched_in_the_topics_key_and_a_cancelled_one_takes_no_step() {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        runtime.block_on(async {
            let topic = NewTopic { name: "t".into(), queues: 3, flush: FlushPolicy::Sync, configs: Default::default() };
            let store = store_with(&[("a", 2), ("b", 1)], &topic).await;
            let placed = read_view(&store).await.unwrap().topics["t"].clone();
            let q = placed.queues.iter().position(|p| p.broker_group == "a").unwrap() as u32;

            let refused = |f: Failure| f.0;
            assert_eq!(refused(start(&store, "t", 9, at("b", 0)).await.unwrap_err()), Reason::UnknownQueue);
            assert_eq!(refused(start(&store, "nope", 0, at("b", 0)).await.unwrap_err()), Reason::UnknownTopic);
            assert_eq!(refused(start(&store, "t", q, at("b", 1)).await.unwrap_err()), Reason::InvalidRequest);
            assert_eq!(refused(start(&store, "t", q, at("c", 0)).await.unwrap_err()), Reason::InvalidRequest);
            let same_group = start(&store, "t", q, at("a", 1 - placed.queues[q as usize].shard)).await;
            assert_eq!(refused(same_group.unwrap_err()), Reason::InvalidRequest, "moves go between groups");
            let unchanged = read_view(&store).await.unwrap().topics["t"].clone();
            assert_eq!(unchanged.moves, BTreeMap::new(), "nothing refused is stored");

            start(&store, "t", q, at("b", 0)).await.unwrap();
            start(&store, "t", q, at("b", 0)).await.expect("asking again is no change");
            let created = unchanged.created;
            let switch = step(&store, MoveStep::Switch, "t", created, q, &at("b", 0)).await;
            assert_eq!(refused(switch.unwrap_err()), Reason::InvalidRequest, "not before the freeze");
            let other_topic = step(&store, MoveStep::Freeze, "t", created + 1, q, &at("b", 0)).await;
            assert_eq!(refused(other_topic.unwrap_err()), Reason::InvalidRequest, "a topic made again has no move");
            step(&store, MoveStep::Freeze, "t", created, q, &at("b", 0)).await.unwrap();
            let listed = moves_of(&read_view(&store).await.unwrap());
            assert_eq!(listed.len(), 1);
            assert_eq!((listed[0].to.clone(), listed[0].frozen), (at("b", 0), true));
            step(&store, MoveStep::Switch, "t", created, q, &at("b", 0)).await.unwrap();
            let switched = read_view(&store).await.unwrap().topics["t"].clone();
            assert_eq!((switched.queues[q as usize].clone(), switched.moves.len()), (at("b", 0), 0));
            assert_eq!(switched.created, created, "the same topic");

            // Replaced while frozen: thawed, and the old target's steps are refused.
            start(&store, "t", q, at("a", 0)).await.unwrap();
            step(&store, MoveStep::Freeze, "t", created, q, &at("a", 0)).await.unwrap();
            start(&store, "t", q, at("a", 1)).await.unwrap();
            let replaced = read_view(&store).await.unwrap().topics["t"].moves[&q].clone();
            assert_eq!(replaced, Move { to: at("a", 1), frozen: false });
            let stale = step(&store, MoveStep::Switch, "t", created, q, &at("a", 0)).await;
            assert_eq!(refused(stale.unwrap_err()), Reason::InvalidRequest);
            cancel(&store, "t", q).await.unwrap();

            // Back again, cancelled: the freeze is refused and the queue stays.
            start(&store, "t", q, at("a", 0)).await.unwrap();
            cancel(&store, "t", q).await.unwrap();
            assert_eq!(refused(cancel(&store, "t", q).await.unwrap_err()), Reason::InvalidRequest);
            let frozen = step(&store, MoveStep::Freeze, "t", created, q, &at("a", 0)).await;
            assert_eq!(refused(frozen.unwrap_err()), Reason::InvalidRequest);
            assert_eq!(read_view(&store).await.unwrap().topics["t"], switched);
        });
    }

    #[test]
    fn a_retry_topics_queues_stay_while_a_compacted_topics_move() {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        runtime.block_on(async {
            let retry =
                NewTopic { name: "%RETRY%g".into(), queues: 1, flush: FlushPolicy::Sync, configs: Default::default() };
            let store = store_with(&[("a", 1)], &retry).await;
            store.put(&shards_key("b"), b"1".to_vec(), None).await.unwrap();
            let refused = start(&store, "%RETRY%g", 0, at("b", 0)).await.unwrap_err();
            assert_eq!(refused.0, Reason::InvalidRequest);
            assert!(refused.1.contains("every broker group"), "{}", refused.1);
            assert!(queues_on(&read_view(&store).await.unwrap(), "a").is_empty(), "drain does not try it");

            let configs = crate::server::topic_configs::TopicConfigs::from_entries([("cleanup.policy", "compact")]);
            let compacted =
                NewTopic { name: "c".into(), queues: 1, flush: FlushPolicy::Sync, configs: configs.unwrap() };
            create(&store, &read_view(&store).await.unwrap(), &compacted).await.unwrap();
            let other =
                if read_view(&store).await.unwrap().topics["c"].queues[0].broker_group == "a" { "b" } else { "a" };
            start(&store, "c", 0, at(other, 0)).await.unwrap();
            assert_eq!(read_view(&store).await.unwrap().topics["c"].moves[&0].to, at(other, 0));
        });
    }

    #[test]
    fn the_emptiest_shard_counts_queues_and_moves_bound_there() {
        let mut view = ClusterView {
            groups: vec![
                crate::server::placement::GroupShards { broker_group: "a".into(), shards: 2, leader: Some("x".into()) },
                crate::server::placement::GroupShards { broker_group: "b".into(), shards: 2, leader: Some("y".into()) },
            ],
            ..ClusterView::default()
        };
        let t = PlacedTopic { queues: vec![at("a", 0), at("a", 1), at("b", 0)], ..Default::default() };
        view.topics.insert("t".into(), t);
        assert_eq!(emptiest_shard(&view, "b"), Some(at("b", 1)));
        view.topics.get_mut("t").unwrap().moves.insert(0, Move { to: at("b", 1), frozen: false });
        assert_eq!(emptiest_shard(&view, "b"), Some(at("b", 0)), "ties go to the lower shard");
        assert_eq!(emptiest_shard(&view, "c"), None);
        assert_eq!(queues_on(&view, "a"), [("t".to_string(), 0), ("t".to_string(), 1)]);
        let planned = [QueueMove { topic: "t".into(), queue: 1, from: at("a", 1), to: at("b", 0), frozen: false }];
        assert_eq!(emptiest_elsewhere(&view, "a", &planned).unwrap(), at("b", 1), "b/0 holds one and is planned one");
        assert!(emptiest_elsewhere(&view, "b", &[]).is_ok() && emptiest_elsewhere(&view, "z", &[]).is_ok());
        view.groups[1].leader = None;
        assert!(emptiest_elsewhere(&view, "a", &[]).is_err(), "no other group with a leader");
    }
}
