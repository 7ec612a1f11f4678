//! A shard's metrics. A family appears once it has a sample (labelled
//! families, per topic or group, as their first one comes). Each part of the broker owns its counters beside its
//! code (the storage engine's probe, `traffic.rs`, each feature's state) and
//! turns them into samples when asked; nothing is shared or atomic on the
//! data path. A scrape asks every shard over the mesh for its samples (plain
//! values, sent whole), and the admin listener merges and exposes them.

use ringmq_shards::HistogramSnapshot;
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::{Rc, Weak};

/// What a metric family counts, as Prometheus types it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Only goes up (from the broker's start); exposed with `_total`.
    Counter,
    /// A value now.
    Gauge,
    /// Values counted into buckets.
    Histogram,
}

/// One labelled value of a family.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub labels: Vec<(&'static str, String)>,
    pub value: Value,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Number(f64),
    Histogram(HistogramSnapshot),
}

impl Sample {
    /// The value of label `key`, if the sample has it.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels.iter().find(|(k, _)| *k == key).map(|(_, v)| v.as_str())
    }

    /// A counter's or gauge's value (0 for a histogram).
    pub fn number(&self) -> f64 {
        match self.value {
            Value::Number(n) => n,
            Value::Histogram(_) => 0.0,
        }
    }
}

/// Every sample of the families named `name`.
pub fn samples<'a>(families: &'a [Family], name: &'a str) -> impl Iterator<Item = &'a Sample> {
    families.iter().filter(move |f| f.name == name).flat_map(|f| &f.samples)
}

/// A metric family: its name (a counter's without `_total`), help, kind and samples.
#[derive(Debug, Clone, PartialEq)]
pub struct Family {
    pub name: &'static str,
    pub help: &'static str,
    pub kind: Kind,
    pub samples: Vec<Sample>,
}

/// The families one shard reports, in the order first reported.
#[derive(Debug, Default)]
pub struct Samples {
    families: Vec<Family>,
    by_name: HashMap<&'static str, usize>,
}

impl Samples {
    /// Adds a counter's value.
    pub fn counter(&mut self, name: &'static str, help: &'static str, labels: &[(&'static str, &str)], value: u64) {
        self.push(name, help, Kind::Counter, labels, Value::Number(value as f64));
    }

    /// Adds a counter of seconds.
    pub fn counter_seconds(
        &mut self,
        name: &'static str,
        help: &'static str,
        labels: &[(&'static str, &str)],
        value: std::time::Duration,
    ) {
        self.push(name, help, Kind::Counter, labels, Value::Number(value.as_secs_f64()));
    }

    /// Adds a gauge's value.
    pub fn gauge(&mut self, name: &'static str, help: &'static str, labels: &[(&'static str, &str)], value: f64) {
        self.push(name, help, Kind::Gauge, labels, Value::Number(value));
    }

    /// Adds a histogram's counts.
    pub fn histogram(
        &mut self,
        name: &'static str,
        help: &'static str,
        labels: &[(&'static str, &str)],
        value: HistogramSnapshot,
    ) {
        self.push(name, help, Kind::Histogram, labels, Value::Histogram(value));
    }

    fn push(&mut self, name: &'static str, help: &'static str, kind: Kind, labels: &[(&'static str, &str)], v: Value) {
        let labels = labels.iter().map(|(k, v)| (*k, v.to_string())).collect();
        self.family(name, help, kind).samples.push(Sample { labels, value: v });
    }

    fn family(&mut self, name: &'static str, help: &'static str, kind: Kind) -> &mut Family {
        let at = *self.by_name.entry(name).or_insert_with(|| {
            self.families.push(Family { name, help, kind, samples: Vec::new() });
            self.families.len() - 1
        });
        let family = &mut self.families[at];
        assert_eq!(family.kind, kind, "metric {name} is reported as one kind");
        family
    }

    /// The families, in the order first reported.
    pub fn into_families(self) -> Vec<Family> {
        self.families
    }
}

/// A part of the broker that reports metrics.
pub trait Probe {
    /// Adds this part's samples.
    fn collect(&self, out: &mut Samples);
}

/// The probes of one shard's features, which register themselves when they
/// start. Held weakly: a feature owns its probe, the registry only asks it.
#[derive(Default)]
pub struct Registry {
    probes: RefCell<Vec<Weak<dyn Probe>>>,
}

impl Registry {
    /// Asks `probe` for its samples at every scrape while it lives.
    pub fn register(&self, probe: &Rc<dyn Probe>) {
        self.probes.borrow_mut().push(Rc::downgrade(probe));
    }

    /// Every live probe's samples.
    pub fn collect(&self, out: &mut Samples) {
        let probes: Vec<Rc<dyn Probe>> = {
            let mut probes = self.probes.borrow_mut();
            probes.retain(|p| p.strong_count() > 0);
            probes.iter().filter_map(Weak::upgrade).collect()
        };
        probes.iter().for_each(|p| p.collect(out));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_of_a_family_are_kept_together_in_first_reported_order() {
        let mut s = Samples::default();
        s.counter("a", "A.", &[("topic", "x")], 1);
        s.gauge("b", "B.", &[], 2.0);
        s.counter("a", "A.", &[("topic", "y")], 3);
        let families = s.into_families();
        let names: Vec<_> = families.iter().map(|f| (f.name, f.samples.len())).collect();
        assert_eq!(names, vec![("a", 2), ("b", 1)]);
        assert_eq!(families[0].samples[1].labels, vec![("topic", "y".to_string())]);
    }

    struct Fixed(u64);

    impl Probe for Fixed {
        fn collect(&self, out: &mut Samples) {
            out.counter("fixed", "Fixed.", &[], self.0);
        }
    }

    #[test]
    fn a_dropped_probe_is_no_longer_asked() {
        let registry = Registry::default();
        let kept: Rc<dyn Probe> = Rc::new(Fixed(1));
        let dropped: Rc<dyn Probe> = Rc::new(Fixed(2));
        registry.register(&kept);
        registry.register(&dropped);
        drop(dropped);
        let mut s = Samples::default();
        registry.collect(&mut s);
        assert_eq!(s.into_families()[0].samples.len(), 1);
    }
}
