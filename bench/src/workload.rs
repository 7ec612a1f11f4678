//! Workload files (`run --workload FILE`, TOML), modelled on OpenMessaging
//! Benchmark's workloads: what is sent and received, at what rate, for how
//! long. Each key replaces the flag of the same name; where to run (broker,
//! cores, protocol, output) stays on the command line. `bench/workloads/`
//! ships a few.
//!
//! ```toml
//! name = "1 topic, 16 queues, 1 KiB, 50k msgs/s"
//! queues = 16               # OMB: partitionsPerTopic
//! message_size = 1024       # OMB: messageSize
//! producers = 2             # OMB: producersPerTopic
//! rate = 50000              # OMB: producerRate (msgs/s over all producers; 0: as fast as possible)
//! consumers_per_queue = 1   # OMB: subscriptionsPerTopic
//! consumers = 2             # OMB: consumerPerSubscription
//! max_outstanding = 1000    # OMB's producers' in-flight bound
//! warmup = "10s"            # OMB: warmupDurationMinutes
//! duration = "60s"          # OMB: testDurationMinutes
//! ```

use crate::run::{parse_duration, RunArgs, SendMode};
use serde::Deserialize;
use std::path::Path;

/// A workload file's keys; any may be left out (the flag's value stays).
#[derive(Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Workload {
    /// What the workload is, for the reader of the file.
    pub name: Option<String>,
    pub topic: Option<String>,
    pub queues: Option<u32>,
    pub message_size: Option<usize>,
    pub producers: Option<usize>,
    pub rate: Option<f64>,
    pub consumers: Option<usize>,
    pub consumers_per_queue: Option<u64>,
    pub max_outstanding: Option<u64>,
    /// "async", "sync" or "oneway".
    pub mode: Option<String>,
    pub batch_bytes: Option<usize>,
    pub keys: Option<u64>,
    /// Durations like "30s", "500ms", "2m".
    pub warmup: Option<String>,
    pub duration: Option<String>,
}

impl Workload {
    /// Reads and checks a workload file.
    pub fn load(path: &Path) -> Result<Workload, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
        let w: Workload = toml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        w.check().map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(w)
    }

    fn check(&self) -> Result<(), String> {
        let positive = [
            ("queues", self.queues.map(u64::from)),
            ("producers", self.producers.map(|n| n as u64)),
            ("consumers", self.consumers.map(|n| n as u64)),
            ("consumers_per_queue", self.consumers_per_queue),
            ("max_outstanding", self.max_outstanding),
        ];
        if let Some((key, _)) = positive.iter().find(|(_, v)| *v == Some(0)) {
            return Err(format!("{key} must be at least 1"));
        }
        if self.rate.is_some_and(|r| !r.is_finite() || r < 0.0) {
            return Err("rate must be a number of messages per second, 0 or more (0: as fast as possible)".into());
        }
        self.send_mode()?;
        for d in [&self.warmup, &self.duration].into_iter().flatten() {
            parse_duration(d).map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    fn send_mode(&self) -> Result<Option<SendMode>, String> {
        match self.mode.as_deref() {
            None => Ok(None),
            Some("async") => Ok(Some(SendMode::Async)),
            Some("sync") => Ok(Some(SendMode::Sync)),
            Some("oneway") => Ok(Some(SendMode::Oneway)),
            Some(other) => Err(format!("mode {other:?} is not one of async, sync, oneway")),
        }
    }

    /// `args` with this workload's keys in place of their flags.
    pub fn apply(&self, mut a: RunArgs) -> Result<RunArgs, String> {
        if self.consumers_per_queue.is_some_and(|n| n > 1) && a.group.is_some() {
            return Err("consumers_per_queue above 1 does not go with --group".into());
        }
        fn set<T: Clone>(to: &mut T, from: &Option<T>) {
            if let Some(v) = from {
                *to = v.clone();
            }
        }
        set(&mut a.topic, &self.topic);
        set(&mut a.queues, &self.queues);
        set(&mut a.message_size, &self.message_size);
        set(&mut a.producers, &self.producers);
        set(&mut a.rate, &self.rate);
        set(&mut a.consumers, &self.consumers);
        set(&mut a.consumers_per_queue, &self.consumers_per_queue);
        set(&mut a.max_outstanding, &self.max_outstanding);
        set(&mut a.batch_bytes, &self.batch_bytes);
        set(&mut a.keys, &self.keys);
        set(&mut a.mode, &self.send_mode()?);
        set(&mut a.warmup, &self.warmup.as_deref().map(parse_duration).transpose().map_err(|e| e.to_string())?);
        set(&mut a.duration, &self.duration.as_deref().map(parse_duration).transpose().map_err(|e| e.to_string())?);
        Ok(a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shipped_workload_reads_and_checks() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads");
        let mut files = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let w = Workload::load(&path).unwrap_or_else(|e| panic!("{e}"));
            assert!(w.name.is_some(), "{} names its workload", path.display());
            files += 1;
        }
        assert!(files >= 4, "{files} workloads in {}", dir.display());
    }

    #[test]
    fn bad_keys_and_values_are_refused_with_the_key() {
        let bad = [
            ("queus = 3", "unknown field"),
            ("queues = 0", "queues must be at least 1"),
            ("rate = -5.0", "rate must be"),
            ("mode = \"fast\"", "not one of async"),
            ("duration = \"soon\"", "not a duration"),
        ];
        for (text, want) in bad {
            let err = toml::from_str::<Workload>(text).map_err(|e| e.to_string()).and_then(|w| w.check());
            let err = err.expect_err(text);
            assert!(err.contains(want), "{text}: {err}");
        }
    }
}
