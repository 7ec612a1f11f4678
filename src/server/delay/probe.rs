//! The delay feature's metrics: messages waiting per delay level and in the
//! timer (arbitrary due times), and send-backs per consumer group: retries
//! scheduled and messages moved to the dead-letter topic.

use super::levels;
use super::timer::Timer;
use crate::server::core::metrics::{Probe, Samples};
use std::cell::RefCell;
use std::collections::HashMap;

/// Send-backs served on this shard, per consumer group: (retries, dead letters).
#[derive(Default)]
pub struct SendBacks {
    by_group: RefCell<HashMap<String, (u64, u64)>>,
}

impl SendBacks {
    /// Counts one send-back of `group`'s: a retry, or a dead letter.
    pub fn count(&self, group: &str, dead_lettered: bool) {
        let mut by_group = self.by_group.borrow_mut();
        let counts = match by_group.get_mut(group) {
            Some(counts) => counts,
            None => by_group.entry(group.to_string()).or_default(),
        };
        if dead_lettered {
            counts.1 += 1;
        } else {
            counts.0 += 1;
        }
    }

    fn collect(&self, out: &mut Samples) {
        let retries = "Messages a consumer group sent back for a later retry.";
        let dead = "Messages moved to a consumer group's dead-letter topic (retries used up, or asked for).";
        for (group, (retried, dead_lettered)) in self.by_group.borrow().iter() {
            out.counter("ringmq_retries", retries, &[("group", group)], *retried);
            out.counter("ringmq_dead_letters", dead, &[("group", group)], *dead_lettered);
        }
    }
}

impl Probe for Timer {
    fn collect(&self, out: &mut Samples) {
        let help = "Delayed messages (and retries) stored and not yet delivered, per delay level; level 0 is the timer of arbitrary due times.";
        for (level, pending) in levels::pending(self.core()) {
            out.gauge("ringmq_delayed_pending", help, &[("level", &level.to_string())], pending as f64);
        }
        out.gauge("ringmq_delayed_pending", help, &[("level", "0")], self.pending() as f64);
        self.send_backs().collect(out);
    }
}
