//! How a group's leader shares a topic's queues among the members that
//! subscribe to it. Every strategy sees the members sorted by id, so the
//! result does not depend on who leads.

use std::sync::Arc;

/// A user-supplied strategy: given the sorted member ids and the topic's
/// queue count, the queues of each member (same order as `members`).
pub type AssignFn = Arc<dyn Fn(&[String], u32) -> Vec<Vec<u32>> + Send + Sync>;

/// Queue assignment strategies.
#[derive(Clone)]
pub enum Strategy {
    /// Contiguous blocks; the first `queues % members` members get one more
    /// (RocketMQ's AllocateMessageQueueAveragely).
    Average,
    /// Queue i to member i mod members.
    RoundRobin,
    /// A user-supplied function.
    Custom(AssignFn),
}

impl Strategy {
    /// Queues per member (aligned with `members`, which must be sorted).
    pub fn assign(&self, members: &[String], queues: u32) -> Vec<Vec<u32>> {
        let m = members.len() as u32;
        if m == 0 {
            return Vec::new();
        }
        match self {
            Strategy::Average => {
                let (base, extra) = (queues / m, queues % m);
                let mut next = 0;
                (0..m)
                    .map(|i| {
                        let n = base + u32::from(i < extra);
                        let block = (next..next + n).collect();
                        next += n;
                        block
                    })
                    .collect()
            }
            Strategy::RoundRobin => (0..m).map(|i| (i..queues).step_by(m as usize).collect()).collect(),
            Strategy::Custom(f) => {
                let mut out = f(members, queues);
                out.resize(members.len(), Vec::new());
                out
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("m{i}")).collect()
    }

    #[test]
    fn average_gives_contiguous_blocks_with_the_remainder_first() {
        assert_eq!(Strategy::Average.assign(&ids(3), 8), vec![vec![0, 1, 2], vec![3, 4, 5], vec![6, 7]]);
        assert_eq!(Strategy::Average.assign(&ids(3), 2), vec![vec![0], vec![1], vec![]]);
        assert_eq!(Strategy::Average.assign(&ids(0), 8), Vec::<Vec<u32>>::new());
    }

    #[test]
    fn round_robin_deals_queues_in_turn() {
        assert_eq!(Strategy::RoundRobin.assign(&ids(3), 8), vec![vec![0, 3, 6], vec![1, 4, 7], vec![2, 5]]);
    }

    #[test]
    fn every_strategy_assigns_each_queue_once() {
        let custom = Strategy::Custom(Arc::new(|members, queues| {
            let mut out = vec![Vec::new(); members.len()];
            out[0] = (0..queues).rev().collect();
            out
        }));
        for s in [Strategy::Average, Strategy::RoundRobin, custom] {
            for members in 1..6 {
                for queues in 0..17 {
                    let mut all: Vec<u32> = s.assign(&ids(members), queues).concat();
                    all.sort_unstable();
                    assert_eq!(all, (0..queues).collect::<Vec<_>>());
                }
            }
        }
    }
}
