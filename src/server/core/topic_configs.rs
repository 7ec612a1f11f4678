//! A topic's own configs, under Kafka's names: the settings a topic may
//! hold for itself instead of the broker's default. Each is stored only
//! when set (in the metadata file, and in a cluster in the topic's etcd
//! key), validated when set, and read typed by what enforces it: the append
//! (`max.message.bytes`, `message.timestamp.type`, `min.insync.replicas`)
//! the topic retention of `data/` (`retention.ms`, `retention.bytes`,
//! `cleanup.policy`) and its compactor (`delete.retention.ms`,
//! `min.cleanable.dirty.ratio`, `min.compaction.lag.ms`,
//! `max.compaction.lag.ms`); tiered storage's (`remote.storage.enable`,
//! `local.retention.ms`, `local.retention.bytes`: what stays on local disk,
//! `retention.*` being the whole) are checked against each other here and
//! against the broker's bucket by `Core::check_topic_configs`.

use super::failure::{Failure, Reason};
use std::collections::BTreeMap;
use std::time::Duration;

pub const RETENTION_MS: &str = "retention.ms";
pub const RETENTION_BYTES: &str = "retention.bytes";
pub const MAX_MESSAGE_BYTES: &str = "max.message.bytes";
pub const CLEANUP_POLICY: &str = "cleanup.policy";
pub const TIMESTAMP_TYPE: &str = "message.timestamp.type";
pub const MIN_INSYNC_REPLICAS: &str = "min.insync.replicas";
pub const DELETE_RETENTION_MS: &str = "delete.retention.ms";
pub const MIN_CLEANABLE_DIRTY_RATIO: &str = "min.cleanable.dirty.ratio";
pub const MIN_COMPACTION_LAG_MS: &str = "min.compaction.lag.ms";
pub const MAX_COMPACTION_LAG_MS: &str = "max.compaction.lag.ms";
pub const REMOTE_STORAGE_ENABLE: &str = "remote.storage.enable";
pub const LOCAL_RETENTION_MS: &str = "local.retention.ms";
pub const LOCAL_RETENTION_BYTES: &str = "local.retention.bytes";

/// Every config a topic may set, in the order they are described.
pub const NAMES: [&str; 13] = [
    CLEANUP_POLICY,
    DELETE_RETENTION_MS,
    LOCAL_RETENTION_BYTES,
    LOCAL_RETENTION_MS,
    MAX_COMPACTION_LAG_MS,
    MAX_MESSAGE_BYTES,
    TIMESTAMP_TYPE,
    MIN_CLEANABLE_DIRTY_RATIO,
    MIN_COMPACTION_LAG_MS,
    MIN_INSYNC_REPLICAS,
    REMOTE_STORAGE_ENABLE,
    RETENTION_BYTES,
    RETENTION_MS,
];

/// Kafka's value of `local.retention.ms` and `local.retention.bytes` that
/// means "as `retention.ms` / `retention.bytes`" (their default).
pub const LOCAL_AS_TOTAL: i64 = -2;

/// Kafka's defaults of the compaction configs.
pub const DELETE_RETENTION_MS_DEFAULT: i64 = 86_400_000;
pub const MIN_CLEANABLE_DIRTY_RATIO_DEFAULT: f64 = 0.5;

/// Kafka topic configs ringmq has no per-topic meaning for (its shards
/// share one log, with the broker's segment and flush settings). A
/// CreateTopics that names them (Kafka Streams sets `segment.bytes` on its
/// internal topics) is served without them; altering them is refused.
pub const SHARD_WIDE: [&str; 9] = [
    "compression.type",
    "file.delete.delay.ms",
    "flush.messages",
    "flush.ms",
    "index.interval.bytes",
    "preallocate",
    "segment.bytes",
    "segment.index.bytes",
    "segment.ms",
];

/// What happens to a topic's old records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CleanupPolicy {
    /// Removed by retention (time and size).
    Delete,
    /// Kept per key: the compactor keeps at least each key's latest record.
    Compact,
    /// Both: kept per key, and removed past retention.
    CompactDelete,
}

impl CleanupPolicy {
    /// Whether retention by time and size removes this topic's records.
    pub fn deletes(self) -> bool {
        self != CleanupPolicy::Compact
    }

    /// Whether the topic keeps records per key (every record needs one).
    pub fn compacts(self) -> bool {
        self != CleanupPolicy::Delete
    }

    fn parse(value: &str) -> Option<CleanupPolicy> {
        let mut parts: Vec<&str> = value.split(',').map(str::trim).collect();
        parts.sort_unstable();
        parts.dedup();
        match parts.as_slice() {
            ["delete"] => Some(CleanupPolicy::Delete),
            ["compact"] => Some(CleanupPolicy::Compact),
            ["compact", "delete"] => Some(CleanupPolicy::CompactDelete),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            CleanupPolicy::Delete => "delete",
            CleanupPolicy::Compact => "compact",
            CleanupPolicy::CompactDelete => "compact,delete",
        }
    }
}

/// Which time a topic's records carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimestampType {
    /// The producer's.
    CreateTime,
    /// The broker's when it stored the batch.
    LogAppendTime,
}

impl TimestampType {
    fn parse(value: &str) -> Option<TimestampType> {
        match value {
            "CreateTime" => Some(TimestampType::CreateTime),
            "LogAppendTime" => Some(TimestampType::LogAppendTime),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            TimestampType::CreateTime => "CreateTime",
            TimestampType::LogAppendTime => "LogAppendTime",
        }
    }
}

/// One change of a topic's configs (Kafka's IncrementalAlterConfigs
/// operations; AlterConfigs is `Replace`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigChange {
    Set(String, String),
    /// Back to the broker's default.
    Unset(String),
    /// Every config as given, the rest back to their defaults.
    Replace(Vec<(String, String)>),
    /// Add items to a list config (`cleanup.policy`).
    Append(String, String),
    /// Remove items from a list config.
    Subtract(String, String),
}

/// A topic's configs: only those it set. Private: every value in it was
/// validated by `set`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TopicConfigs {
    retention_ms: Option<i64>,
    retention_bytes: Option<i64>,
    max_message_bytes: Option<u32>,
    cleanup_policy: Option<CleanupPolicy>,
    timestamp_type: Option<TimestampType>,
    min_insync_replicas: Option<u32>,
    delete_retention_ms: Option<i64>,
    /// In thousandths, so the configs stay `Eq`.
    min_cleanable_dirty_permille: Option<u16>,
    min_compaction_lag_ms: Option<i64>,
    max_compaction_lag_ms: Option<i64>,
    remote_storage: Option<bool>,
    local_retention_ms: Option<i64>,
    local_retention_bytes: Option<i64>,
}

impl TopicConfigs {
    /// The configs `entries` name (as stored or as a client sent them);
    /// the first invalid one refuses them all.
    pub fn from_entries<'a>(entries: impl IntoIterator<Item = (&'a str, &'a str)>) -> Result<Self, Failure> {
        let mut configs = TopicConfigs::default();
        for (name, value) in entries {
            configs.set(name, value)?;
        }
        configs.check_together()?;
        Ok(configs)
    }

    /// The configs after `changes`, all applied or none (the first invalid refuses).
    pub fn changed(&self, changes: &[ConfigChange]) -> Result<TopicConfigs, Failure> {
        let mut next = self.clone();
        for change in changes {
            match change {
                ConfigChange::Set(name, value) => next.set(name, value)?,
                ConfigChange::Unset(name) => next.unset(name)?,
                ConfigChange::Replace(all) => {
                    next = TopicConfigs::from_entries(all.iter().map(|(n, v)| (n.as_str(), v.as_str())))?
                }
                ConfigChange::Append(name, items) => next.change_list(name, items, true)?,
                ConfigChange::Subtract(name, items) => next.change_list(name, items, false)?,
            }
        }
        next.check_together()?;
        if self.remote_storage() && !next.remote_storage() {
            return Err(invalid(format!(
                "{REMOTE_STORAGE_ENABLE} cannot be turned off once on: the topic's records in the bucket would be \
                 lost to its readers (delete the topic instead)"
            )));
        }
        Ok(next)
    }

    /// The checks across configs: local retention within the total, and
    /// no tiered storage for a compacted topic (as Kafka).
    fn check_together(&self) -> Result<(), Failure> {
        let within = |local: Option<i64>, total: Option<i64>, name: &str, total_name: &str| {
            let (local, total) = (local.unwrap_or(LOCAL_AS_TOTAL), total.unwrap_or(-1));
            if local == LOCAL_AS_TOTAL || total == -1 || (0..=total).contains(&local) {
                return Ok(());
            }
            Err(invalid(format!("{name}={local} keeps more on local disk than {total_name}={total} keeps in all")))
        };
        within(self.local_retention_ms, self.retention_ms, LOCAL_RETENTION_MS, RETENTION_MS)?;
        within(self.local_retention_bytes, self.retention_bytes, LOCAL_RETENTION_BYTES, RETENTION_BYTES)?;
        if self.remote_storage() && self.cleanup_policy().compacts() {
            return Err(invalid(format!(
                "{REMOTE_STORAGE_ENABLE}=true with {CLEANUP_POLICY}={}: a compacted topic is not tiered (as in Kafka)",
                self.cleanup_policy().name()
            )));
        }
        Ok(())
    }

    /// Sets one config, checked.
    fn set(&mut self, name: &str, value: &str) -> Result<(), Failure> {
        let bad = |expected: &str| invalid(format!("{name}={value:?} is not valid: {expected}"));
        match name {
            RETENTION_MS => self.retention_ms = Some(at_least_minus_one(value).ok_or_else(|| bad("-1 or more"))?),
            RETENTION_BYTES => self.retention_bytes = Some(at_least_minus_one(value).ok_or_else(|| bad("-1 or more"))?),
            MAX_MESSAGE_BYTES => {
                self.max_message_bytes = Some(value.parse().map_err(|_| bad("a byte count, 0 to 4294967295"))?)
            }
            CLEANUP_POLICY => {
                let policy = CleanupPolicy::parse(value).ok_or_else(|| bad("delete, compact or compact,delete"))?;
                self.cleanup_policy = Some(policy)
            }
            TIMESTAMP_TYPE => {
                self.timestamp_type =
                    Some(TimestampType::parse(value).ok_or_else(|| bad("CreateTime or LogAppendTime"))?)
            }
            MIN_INSYNC_REPLICAS => {
                let n: u32 = value.parse().map_err(|_| bad("1 or more"))?;
                self.min_insync_replicas = Some(if n == 0 { return Err(bad("1 or more")) } else { n })
            }
            DELETE_RETENTION_MS => self.delete_retention_ms = Some(at_least(value, 0).ok_or_else(|| bad("0 or more"))?),
            MIN_CLEANABLE_DIRTY_RATIO => {
                let ratio: f64 = value.parse().ok().filter(|r| (0.0..=1.0).contains(r)).ok_or_else(|| bad("0 to 1"))?;
                self.min_cleanable_dirty_permille = Some((ratio * 1000.0).round() as u16)
            }
            MIN_COMPACTION_LAG_MS => {
                self.min_compaction_lag_ms = Some(at_least(value, 0).ok_or_else(|| bad("0 or more"))?)
            }
            MAX_COMPACTION_LAG_MS => {
                self.max_compaction_lag_ms = Some(at_least(value, 1).ok_or_else(|| bad("1 or more"))?)
            }
            REMOTE_STORAGE_ENABLE => self.remote_storage = Some(value.parse().map_err(|_| bad("true or false"))?),
            LOCAL_RETENTION_MS => {
                self.local_retention_ms = Some(at_least(value, LOCAL_AS_TOTAL).ok_or_else(|| bad("-2 or more"))?)
            }
            LOCAL_RETENTION_BYTES => {
                self.local_retention_bytes = Some(at_least(value, LOCAL_AS_TOTAL).ok_or_else(|| bad("-2 or more"))?)
            }
            _ => return Err(unknown(name)),
        }
        Ok(())
    }

    /// Adds `items` to (or removes them from) a list config; only
    /// `cleanup.policy` is one, and it may not end up empty.
    fn change_list(&mut self, name: &str, items: &str, add: bool) -> Result<(), Failure> {
        if name != CLEANUP_POLICY {
            return Err(invalid(format!("{name} is not a list: set it instead of appending or subtracting")));
        }
        let mut list: Vec<&str> = self.cleanup_policy().name().split(',').collect();
        for item in items.split(',').map(str::trim) {
            if add && !list.contains(&item) {
                list.push(item);
            } else if !add {
                list.retain(|have| *have != item);
            }
        }
        self.set(name, &list.join(","))
    }

    fn unset(&mut self, name: &str) -> Result<(), Failure> {
        match name {
            RETENTION_MS => self.retention_ms = None,
            RETENTION_BYTES => self.retention_bytes = None,
            MAX_MESSAGE_BYTES => self.max_message_bytes = None,
            CLEANUP_POLICY => self.cleanup_policy = None,
            TIMESTAMP_TYPE => self.timestamp_type = None,
            MIN_INSYNC_REPLICAS => self.min_insync_replicas = None,
            DELETE_RETENTION_MS => self.delete_retention_ms = None,
            MIN_CLEANABLE_DIRTY_RATIO => self.min_cleanable_dirty_permille = None,
            MIN_COMPACTION_LAG_MS => self.min_compaction_lag_ms = None,
            MAX_COMPACTION_LAG_MS => self.max_compaction_lag_ms = None,
            REMOTE_STORAGE_ENABLE => self.remote_storage = None,
            LOCAL_RETENTION_MS => self.local_retention_ms = None,
            LOCAL_RETENTION_BYTES => self.local_retention_bytes = None,
            _ => return Err(unknown(name)),
        }
        Ok(())
    }

    /// The configs set, by name, as text (how they are stored and described).
    pub fn entries(&self) -> BTreeMap<&'static str, String> {
        let mut set = BTreeMap::new();
        let mut put = |name, value: Option<String>| {
            if let Some(v) = value {
                set.insert(name, v);
            }
        };
        put(RETENTION_MS, self.retention_ms.map(|v| v.to_string()));
        put(RETENTION_BYTES, self.retention_bytes.map(|v| v.to_string()));
        put(MAX_MESSAGE_BYTES, self.max_message_bytes.map(|v| v.to_string()));
        put(CLEANUP_POLICY, self.cleanup_policy.map(|p| p.name().to_string()));
        put(TIMESTAMP_TYPE, self.timestamp_type.map(|t| t.name().to_string()));
        put(MIN_INSYNC_REPLICAS, self.min_insync_replicas.map(|v| v.to_string()));
        put(DELETE_RETENTION_MS, self.delete_retention_ms.map(|v| v.to_string()));
        put(
            MIN_CLEANABLE_DIRTY_RATIO,
            self.min_cleanable_dirty_permille.map(|p| f64::from(p) / 1000.0).map(|r| r.to_string()),
        );
        put(MIN_COMPACTION_LAG_MS, self.min_compaction_lag_ms.map(|v| v.to_string()));
        put(MAX_COMPACTION_LAG_MS, self.max_compaction_lag_ms.map(|v| v.to_string()));
        put(REMOTE_STORAGE_ENABLE, self.remote_storage.map(|v| v.to_string()));
        put(LOCAL_RETENTION_MS, self.local_retention_ms.map(|v| v.to_string()));
        put(LOCAL_RETENTION_BYTES, self.local_retention_bytes.map(|v| v.to_string()));
        set
    }

    pub fn is_empty(&self) -> bool {
        *self == TopicConfigs::default()
    }

    /// How long records are kept (None: no limit of the topic's own).
    pub fn retention_age(&self) -> Option<Duration> {
        self.retention_ms.filter(|ms| *ms >= 0).map(|ms| Duration::from_millis(ms as u64))
    }

    /// The most bytes a queue keeps (None: no limit of the topic's own).
    pub fn retention_bytes(&self) -> Option<u64> {
        self.retention_bytes.filter(|b| *b >= 0).map(|b| b as u64)
    }

    /// The largest record batch a producer may send, as Kafka counts it.
    pub fn max_message_bytes(&self) -> Option<u32> {
        self.max_message_bytes
    }

    pub fn cleanup_policy(&self) -> CleanupPolicy {
        self.cleanup_policy.unwrap_or(CleanupPolicy::Delete)
    }

    pub fn timestamp_type(&self) -> TimestampType {
        self.timestamp_type.unwrap_or(TimestampType::CreateTime)
    }

    /// The fewest in-sync replicas a sync produce needs (None: the broker group's).
    pub fn min_insync_replicas(&self) -> Option<u32> {
        self.min_insync_replicas
    }

    /// How long a tombstone stays readable once compaction reached it.
    pub fn delete_retention(&self) -> Duration {
        Duration::from_millis(self.delete_retention_ms.unwrap_or(DELETE_RETENTION_MS_DEFAULT) as u64)
    }

    /// The share of a compacted queue's bytes not compacted yet past which it is compacted.
    pub fn min_cleanable_dirty_ratio(&self) -> f64 {
        self.min_cleanable_dirty_permille.map_or(MIN_CLEANABLE_DIRTY_RATIO_DEFAULT, |p| f64::from(p) / 1000.0)
    }

    /// How old a record is at least before compaction may remove it.
    pub fn min_compaction_lag(&self) -> Duration {
        Duration::from_millis(self.min_compaction_lag_ms.unwrap_or(0) as u64)
    }

    /// How old the oldest record not compacted yet may get before a queue
    /// is compacted whatever its dirty ratio (None: no bound).
    pub fn max_compaction_lag(&self) -> Option<Duration> {
        self.max_compaction_lag_ms.filter(|ms| *ms < i64::MAX).map(|ms| Duration::from_millis(ms as u64))
    }

    /// Whether the topic's sealed records go to the broker's bucket.
    pub fn remote_storage(&self) -> bool {
        self.remote_storage.unwrap_or(false)
    }

    /// How long records stay on local disk (a tiered topic's; None: no
    /// limit of the topic's own). As `retention.ms` unless set.
    pub fn local_retention_age(&self) -> Option<Duration> {
        match self.local_retention_ms.unwrap_or(LOCAL_AS_TOTAL) {
            LOCAL_AS_TOTAL => self.retention_age(),
            ms => u64::try_from(ms).ok().map(Duration::from_millis),
        }
    }

    /// The most bytes a queue keeps on local disk (a tiered topic's; None:
    /// no limit of the topic's own). As `retention.bytes` unless set.
    pub fn local_retention_bytes(&self) -> Option<u64> {
        match self.local_retention_bytes.unwrap_or(LOCAL_AS_TOTAL) {
            LOCAL_AS_TOTAL => self.retention_bytes(),
            bytes => u64::try_from(bytes).ok(),
        }
    }
}

fn at_least_minus_one(value: &str) -> Option<i64> {
    at_least(value, -1)
}

fn at_least(value: &str, min: i64) -> Option<i64> {
    value.parse::<i64>().ok().filter(|v| *v >= min)
}

fn invalid(message: String) -> Failure {
    Failure(Reason::InvalidConfig, message)
}

fn unknown(name: &str) -> Failure {
    if SHARD_WIDE.contains(&name) {
        return invalid(format!(
            "{name} is not set per topic in ringmq: a shard's topics share one log, with the broker's segment, \
             flush and compression settings (a producer's compression is kept as sent)"
        ));
    }
    invalid(format!("unknown topic config {name:?}; a topic sets {}", NAMES.join(", ")))
}

impl serde::Serialize for TopicConfigs {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.entries())
    }
}

impl<'de> serde::Deserialize<'de> for TopicConfigs {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let stored = BTreeMap::<String, String>::deserialize(d)?;
        TopicConfigs::from_entries(stored.iter().map(|(n, v)| (n.as_str(), v.as_str())))
            .map_err(|f| serde::de::Error::custom(f.1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configs_are_checked_stored_as_text_and_read_typed() {
        let c = TopicConfigs::from_entries([
            (RETENTION_MS, "1000"),
            (CLEANUP_POLICY, "delete, compact"),
            (TIMESTAMP_TYPE, "LogAppendTime"),
            (MAX_MESSAGE_BYTES, "2048"),
        ])
        .unwrap();
        assert_eq!(c.retention_age(), Some(Duration::from_secs(1)));
        assert_eq!(c.cleanup_policy(), CleanupPolicy::CompactDelete);
        assert_eq!(c.timestamp_type(), TimestampType::LogAppendTime);
        assert_eq!((c.max_message_bytes(), c.retention_bytes(), c.min_insync_replicas()), (Some(2048), None, None));
        let text = c.entries();
        assert_eq!(text[CLEANUP_POLICY], "compact,delete");
        assert_eq!(TopicConfigs::from_entries(text.iter().map(|(n, v)| (*n, v.as_str()))).unwrap(), c);
        let json = serde_json::to_string(&c).unwrap();
        assert_eq!(serde_json::from_str::<TopicConfigs>(&json).unwrap(), c);
        assert!(TopicConfigs::default().is_empty() && TopicConfigs::default().cleanup_policy().deletes());
        assert_eq!(TopicConfigs::from_entries([(RETENTION_MS, "-1")]).unwrap().retention_age(), None);
        let compaction = TopicConfigs::from_entries([
            (DELETE_RETENTION_MS, "100"),
            (MIN_CLEANABLE_DIRTY_RATIO, "0.01"),
            (MIN_COMPACTION_LAG_MS, "5"),
            (MAX_COMPACTION_LAG_MS, "60000"),
        ])
        .unwrap();
        assert_eq!(compaction.delete_retention(), Duration::from_millis(100));
        assert_eq!(compaction.min_cleanable_dirty_ratio(), 0.01);
        assert_eq!(compaction.min_compaction_lag(), Duration::from_millis(5));
        assert_eq!(compaction.max_compaction_lag(), Some(Duration::from_secs(60)));
        assert_eq!(compaction.entries()[MIN_CLEANABLE_DIRTY_RATIO], "0.01");
        let defaults = TopicConfigs::default();
        assert_eq!((defaults.min_cleanable_dirty_ratio(), defaults.max_compaction_lag()), (0.5, None));
        assert!(!defaults.remote_storage());
    }

    #[test]
    fn tiered_storage_configs_keep_local_within_the_total_and_stay_on() {
        let tiered = TopicConfigs::from_entries([
            (REMOTE_STORAGE_ENABLE, "true"),
            (RETENTION_MS, "86400000"),
            (LOCAL_RETENTION_MS, "3600000"),
            (RETENTION_BYTES, "1000000"),
        ])
        .unwrap();
        assert!(tiered.remote_storage());
        assert_eq!(tiered.local_retention_age(), Some(Duration::from_secs(3600)));
        assert_eq!(tiered.local_retention_bytes(), Some(1_000_000), "-2 (unset): as retention.bytes");
        let unlimited = TopicConfigs::from_entries([(LOCAL_RETENTION_BYTES, "-1")]).unwrap();
        assert_eq!(unlimited.local_retention_bytes(), None);
        for (entries, why) in [
            (vec![(RETENTION_MS, "1000"), (LOCAL_RETENTION_MS, "2000")], "more on local disk"),
            (vec![(RETENTION_BYTES, "10"), (LOCAL_RETENTION_BYTES, "-1")], "more on local disk"),
            (vec![(LOCAL_RETENTION_MS, "-3")], "-2 or more"),
            (vec![(REMOTE_STORAGE_ENABLE, "yes")], "true or false"),
            (vec![(REMOTE_STORAGE_ENABLE, "true"), (CLEANUP_POLICY, "compact")], "not tiered"),
        ] {
            let Err(Failure(reason, message)) = TopicConfigs::from_entries(entries.clone()) else {
                panic!("{entries:?} taken")
            };
            assert_eq!(reason, Reason::InvalidConfig);
            assert!(message.contains(why), "{message}");
        }
        let off = tiered.changed(&[ConfigChange::Set(REMOTE_STORAGE_ENABLE.into(), "false".into())]);
        assert!(off.unwrap_err().1.contains("cannot be turned off"));
        let unset = tiered.changed(&[ConfigChange::Unset(REMOTE_STORAGE_ENABLE.into())]);
        assert!(unset.is_err(), "unset is off too");
        let shorter = tiered.changed(&[ConfigChange::Set(RETENTION_MS.into(), "60000".into())]);
        assert!(shorter.unwrap_err().1.contains("local.retention.ms=3600000"), "the total may not go below the local");
    }

    #[test]
    fn a_bad_value_or_name_refuses_the_whole_change() {
        let base = TopicConfigs::from_entries([(RETENTION_MS, "5")]).unwrap();
        for (name, value) in [
            (RETENTION_MS, "-2"),
            (RETENTION_BYTES, "x"),
            (MAX_MESSAGE_BYTES, "-1"),
            (CLEANUP_POLICY, "keep"),
            (TIMESTAMP_TYPE, "Now"),
            (MIN_INSYNC_REPLICAS, "0"),
            (DELETE_RETENTION_MS, "-1"),
            (MIN_CLEANABLE_DIRTY_RATIO, "1.5"),
            (MIN_COMPACTION_LAG_MS, "x"),
            (MAX_COMPACTION_LAG_MS, "0"),
            ("segment.bytes", "1"),
            ("no.such", "1"),
        ] {
            let changes =
                [ConfigChange::Set(RETENTION_BYTES.into(), "7".into()), ConfigChange::Set(name.into(), value.into())];
            let Err(Failure(reason, message)) = base.changed(&changes) else { panic!("{name}={value} taken") };
            assert_eq!(reason, Reason::InvalidConfig);
            assert!(message.contains(name), "{message}");
        }
        let replaced = base.changed(&[ConfigChange::Replace(vec![(MIN_INSYNC_REPLICAS.into(), "2".into())])]).unwrap();
        assert_eq!(replaced.entries().len(), 1, "a replace resets what it does not name");
        assert!(replaced.changed(&[ConfigChange::Unset(MIN_INSYNC_REPLICAS.into())]).unwrap().is_empty());
        let both = base.changed(&[ConfigChange::Append(CLEANUP_POLICY.into(), "compact".into())]).unwrap();
        assert_eq!(both.cleanup_policy(), CleanupPolicy::CompactDelete);
        let compact = both.changed(&[ConfigChange::Subtract(CLEANUP_POLICY.into(), "delete".into())]).unwrap();
        assert_eq!(compact.cleanup_policy(), CleanupPolicy::Compact);
        assert!(compact.changed(&[ConfigChange::Subtract(CLEANUP_POLICY.into(), "compact".into())]).is_err());
        assert!(base.changed(&[ConfigChange::Append(RETENTION_MS.into(), "1".into())]).is_err());
    }
}
