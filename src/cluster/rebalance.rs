//! Evening out the broker groups (`ringmq cluster rebalance`): each group's
//! leader reports its queues' stored bytes and recent produce bytes per
//! second (`/ringmq/broker-groups/<G>/load/<shard>`, under its lease); the
//! plan moves queues from the most loaded group to the least until every
//! group is within `EVEN` of the mean, or no move brings them closer. A
//! queue's load is its share of the cluster's stored bytes plus its share
//! of the produce rate (with nothing stored or produced, each queue counts
//! the same). The plan is then carried out as `drain` does: a few moves at
//! a time, each copy bounded by the target's `--move-bytes-per-sec`.

use super::election::BROKER_GROUPS_PREFIX;
use super::moves::{self, QueueMove};
use super::placement::read_view;
use super::registry;
use super::store::{Store, StoreError};
use super::ClusterError;
use crate::server::placement::{ClusterView, Move, Place, QueueLoad, ShardLoad};
use std::collections::BTreeMap;
use std::time::Duration;

/// A group is even once its load is within this share of the mean.
pub const EVEN: f64 = 0.10;
/// Most moves one plan makes.
const MOVES_MAX: usize = 1000;

/// The key a group's leader reports shard `shard`'s load under.
pub(super) fn load_key(group: &str, shard: u32) -> String {
    format!("{BROKER_GROUPS_PREFIX}{group}/load/{shard}")
}

/// Every reported queue load, by (topic, queue).
async fn read_loads(store: &impl Store) -> Result<BTreeMap<(String, u32), QueueLoad>, StoreError> {
    let mut loads = BTreeMap::new();
    for kv in store.list(BROKER_GROUPS_PREFIX).await?.kvs {
        if kv.key.rsplit('/').nth(1).is_none_or(|k| k != "load") {
            continue;
        }
        for (name, load) in kv.json::<ShardLoad>()? {
            let Some((topic, queue)) = name.rsplit_once('/') else { continue };
            if let Ok(queue) = queue.parse() {
                loads.insert((topic.to_string(), queue), load);
            }
        }
    }
    Ok(loads)
}

/// A group's load before and after a plan.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct GroupLoad {
    pub broker_group: String,
    pub queues: usize,
    pub bytes: u64,
    pub bytes_per_sec: f64,
    /// Its share of the cluster's load, over the mean share (1.0: even).
    pub of_mean: f64,
}

/// What `rebalance` would do or did.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Plan {
    pub moves: Vec<QueueMove>,
    pub before: Vec<GroupLoad>,
    pub after: Vec<GroupLoad>,
}

impl Plan {
    /// Whether every group ends within `EVEN` of the mean.
    pub fn even(&self) -> bool {
        self.after.iter().all(|g| (g.of_mean - 1.0).abs() <= EVEN)
    }
}

/// One movable queue with its place and load.
struct Held {
    topic: String,
    queue: u32,
    place: Place,
    load: QueueLoad,
    weight: f64,
}

/// The plan that evens out the groups of `view` that have a leader, given
/// the queues' `loads` (a queue with none reported counts as empty).
pub fn plan(view: &ClusterView, loads: &BTreeMap<(String, u32), QueueLoad>) -> Plan {
    let groups: Vec<String> =
        view.groups.iter().filter(|g| g.leader.is_some()).map(|g| g.broker_group.clone()).collect();
    let mut held = movable(view, loads, &groups);
    let before = group_loads(&groups, &held);
    let mut moves = Vec::new();
    let mut planned = view.clone();
    while moves.len() < MOVES_MAX {
        let totals = totals(&groups, &held);
        let (Some(most), Some(least)) = (extreme(&totals, true), extreme(&totals, false)) else { break };
        let gap = totals[&most] - totals[&least];
        let mean = totals.values().sum::<f64>() / totals.len() as f64;
        if most == least || totals.values().all(|t| (t - mean).abs() <= EVEN * mean) {
            break;
        }
        // The queue whose move closes the gap most: the one nearest half of it.
        let best = held
            .iter()
            .enumerate()
            .filter(|(_, h)| h.place.broker_group == most && h.weight > 0.0 && h.weight < gap)
            .min_by(|(_, a), (_, b)| (a.weight - gap / 2.0).abs().total_cmp(&(b.weight - gap / 2.0).abs()));
        let Some((i, _)) = best else { break };
        let Some(to) = moves::emptiest_shard(&planned, &least) else { break };
        let h = &mut held[i];
        planned
            .topics
            .get_mut(&h.topic)
            .expect("a held topic")
            .moves
            .insert(h.queue, Move { to: to.clone(), frozen: false });
        let from = std::mem::replace(&mut h.place, to.clone());
        moves.push(QueueMove { topic: h.topic.clone(), queue: h.queue, from, to, frozen: false });
    }
    let after = group_loads(&groups, &held);
    Plan { moves, before, after }
}

/// The queues that may move, each weighed by its share of the stored bytes
/// plus its share of the produce rate (each queue the same with neither).
fn movable(view: &ClusterView, loads: &BTreeMap<(String, u32), QueueLoad>, groups: &[String]) -> Vec<Held> {
    let mut held = Vec::new();
    for (name, t) in view.topics.iter().filter(|(n, _)| moves::movable(n).is_ok()) {
        for (q, place) in t.queues.iter().enumerate() {
            if !groups.contains(&place.broker_group) || t.moves.contains_key(&(q as u32)) {
                continue;
            }
            let load = loads.get(&(name.clone(), q as u32)).copied().unwrap_or_default();
            held.push(Held { topic: name.clone(), queue: q as u32, place: place.clone(), load, weight: 0.0 });
        }
    }
    let bytes: u64 = held.iter().map(|h| h.load.bytes).sum();
    let rate: f64 = held.iter().map(|h| h.load.bytes_per_sec).sum();
    let count = held.len() as f64;
    for h in &mut held {
        let share = |part: f64, whole: f64| if whole > 0.0 { part / whole } else { 0.0 };
        h.weight = share(h.load.bytes as f64, bytes as f64) + share(h.load.bytes_per_sec, rate);
        if bytes == 0 && rate <= 0.0 {
            h.weight = 1.0 / count;
        }
    }
    held
}

/// Each group's summed weight.
fn totals(groups: &[String], held: &[Held]) -> BTreeMap<String, f64> {
    let mut totals: BTreeMap<String, f64> = groups.iter().map(|g| (g.clone(), 0.0)).collect();
    for h in held {
        *totals.entry(h.place.broker_group.clone()).or_default() += h.weight;
    }
    totals
}

/// The most (or least) loaded group, ties to the first by name.
fn extreme(totals: &BTreeMap<String, f64>, most: bool) -> Option<String> {
    let pick = totals.iter().reduce(|a, b| if (b.1 > a.1) == most && b.1 != a.1 { b } else { a });
    pick.map(|(g, _)| g.clone())
}

fn group_loads(groups: &[String], held: &[Held]) -> Vec<GroupLoad> {
    let totals = totals(groups, held);
    let mean = totals.values().sum::<f64>() / totals.len().max(1) as f64;
    groups
        .iter()
        .map(|g| {
            let mine: Vec<&Held> = held.iter().filter(|h| h.place.broker_group == *g).collect();
            GroupLoad {
                broker_group: g.clone(),
                queues: mine.len(),
                bytes: mine.iter().map(|h| h.load.bytes).sum(),
                // An empty f64 sum is -0.0; + 0.0 prints it as 0.
                bytes_per_sec: mine.iter().map(|h| h.load.bytes_per_sec).sum::<f64>() + 0.0,
                of_mean: if mean > 0.0 { totals[g] / mean } else { 1.0 },
            }
        })
        .collect()
}

/// `ringmq cluster rebalance`: the plan for the cluster as its etcd holds
/// it; unless `dry_run`, carried out `in_flight` moves at a time, each
/// round waited for up to `wait`.
pub fn rebalance(endpoints: &[String], dry_run: bool, in_flight: usize, wait: Duration) -> Result<Plan, ClusterError> {
    registry::blocking(endpoints, async |store| {
        let view = read_view(store).await?;
        let plan = plan(&view, &read_loads(store).await?);
        if !dry_run {
            for round in plan.moves.chunks(in_flight.max(1)) {
                moves::start_all(store, round).await?;
                moves::wait_moved(store, round, wait).await?;
            }
        }
        Ok(plan)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::placement::{GroupShards, PlacedTopic};

    fn group(name: &str, shards: u32) -> GroupShards {
        GroupShards { broker_group: name.into(), shards, leader: Some(format!("{name}:9000")) }
    }

    /// Twelve queues of uneven sizes and rates, all in group a; b and c empty.
    fn skewed() -> (ClusterView, BTreeMap<(String, u32), QueueLoad>) {
        let mut view = ClusterView { groups: vec![group("a", 2), group("b", 2), group("c", 1)], ..Default::default() };
        let queues = (0..12).map(|q| Place { broker_group: "a".into(), shard: q % 2 }).collect();
        view.topics.insert("t".into(), PlacedTopic { queues, ..Default::default() });
        view.topics.insert(
            "%DLQ%g".into(),
            PlacedTopic { queues: vec![Place { broker_group: "a".into(), shard: 0 }], ..Default::default() },
        );
        let loads = (0..12u32)
            .map(|q| {
                let load =
                    QueueLoad { bytes: 1_000_000 + 150_000 * u64::from(q), bytes_per_sec: f64::from(q % 3) * 500.0 };
                (("t".to_string(), q), load)
            })
            .collect();
        (view, loads)
    }

    #[test]
    fn a_skewed_cluster_is_planned_within_a_tenth_of_the_mean() {
        let (view, loads) = skewed();
        let plan = plan(&view, &loads);
        assert!(!plan.before.iter().all(|g| (g.of_mean - 1.0).abs() <= EVEN), "skewed to begin with");
        assert!(plan.even(), "{:#?}", plan.after);
        assert_eq!(plan.after.iter().map(|g| g.queues).sum::<usize>(), 12, "the dead-letter queue stays");
        for m in &plan.moves {
            assert_eq!((m.topic.as_str(), m.from.broker_group.as_str()), ("t", "a"));
            assert_ne!(m.to.broker_group, "a");
        }
        let on = |g: &str, shard| plan.moves.iter().filter(|m| m.to.broker_group == g && m.to.shard == shard).count();
        assert!(on("b", 0).abs_diff(on("b", 1)) <= 1, "spread over the target's shards");
        let bytes: u64 = plan.after.iter().map(|g| g.bytes).sum();
        assert_eq!(bytes, plan.before.iter().map(|g| g.bytes).sum::<u64>(), "moves keep the bytes");
    }

    #[test]
    fn an_even_or_empty_cluster_plans_nothing_but_what_counts_queues() {
        let (mut view, loads) = skewed();
        let even = plan(&view, &loads);
        let mut moved = view.clone();
        for m in &even.moves {
            moved.topics.get_mut(&m.topic).unwrap().queues[m.queue as usize] = m.to.clone();
        }
        assert!(plan(&moved, &loads).moves.is_empty(), "an even cluster stays");
        // Nothing reported: each queue counts the same, 12 over 3 groups.
        let counted = plan(&view, &BTreeMap::new());
        assert!(counted.even() && counted.after.iter().all(|g| g.queues == 4), "{:?}", counted.after);
        // A group without a leader takes nothing.
        view.groups[2].leader = None;
        let two = plan(&view, &BTreeMap::new());
        assert!(two.moves.iter().all(|m| m.to.broker_group == "b") && two.after.len() == 2);
    }
}
