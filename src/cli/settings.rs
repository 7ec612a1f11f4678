//! `ringmq serve`'s settings: one struct that is both the command line and
//! the `--config` file. A flag given on the command line wins over the
//! file, the file over the default clap shows in `--help`.
//!
//! One convention names every setting: the quantity, its unit, then `_max`
//! or `_min` (`frame_bytes_max`, `fetch_wait_ms_max`, `insync_min`); the old
//! names are in `renamed.rs`.

use clap::{Args, FromArgMatches, ValueEnum};
use ringmq::cluster::{BadClusterUrl, ClusterConfig};
use ringmq::objects::{Credentials, ObjectStoreConfig, UrlStyle};
use ringmq::security::sasl::SaslMechanism;
use ringmq::security::tls::{ClientAuth, ServerFiles, ServerTls, TlsError};
use ringmq::server::{self, config, ServerConfig};
use ringmq::shards::crypt::keyring::{Keyring, KeyringError};
use ringmq::shards::FlushPolicy;
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// A setting `ringmq serve` cannot start with, and what to give instead.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    #[error("reading {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{path}: {source}")]
    File { path: PathBuf, source: toml::de::Error },
    #[error("merging the flags over {path}: {source}")]
    Merge { path: PathBuf, source: serde_json::Error },
    #[error("--{0} must be at least 1")]
    Zero(&'static str),
    #[error("--compaction-cpu-percent {0} must be from 1 to 100")]
    CompactionShare(u32),
    #[error(
        "--request-bytes-per-connection-max {connection} is below --frame-bytes-max {frame}: the largest request could never be read"
    )]
    ConnectionBelowFrame { connection: usize, frame: usize },
    #[error("--request-bytes-per-shard-max {shard} is below --request-bytes-per-connection-max {connection}")]
    ShardBelowConnection { shard: usize, connection: usize },
    #[error(
        "--group-consumer-heartbeat-interval-ms {heartbeat} must be at least 1 and below --group-consumer-session-timeout-ms {session}"
    )]
    ConsumerHeartbeat { heartbeat: u64, session: u64 },
    #[error(transparent)]
    Trace(#[from] config::ConfigError),
    #[error("--delay-levels: {0}")]
    DelayLevels(String),
    #[error("--sasl-mechanisms: {0:?} is not one of SCRAM-SHA-256, SCRAM-SHA-512, PLAIN")]
    Mechanism(String),
    #[error("TLS needs both --tls-cert and --tls-key")]
    TlsPair,
    #[error("TLS: {0}")]
    Tls(#[from] TlsError),
    #[error("the data keys: {0}")]
    Keys(#[from] KeyringError),
    #[error("--admin-listen {0} is one of the shards' listen addresses (port + shard): choose another port")]
    AdminClash(SocketAddr),
    #[error("--cluster needs --{0}")]
    ClusterNeeds(&'static str),
    #[error("--cluster {0}")]
    ClusterUrl(#[from] BadClusterUrl),
    #[error("tiered storage's bucket needs --{0} too")]
    S3Needs(&'static str),
    #[error("tiered storage's bucket: {0}")]
    S3(String),
    #[error(
        "--tiered-restore restores a single node from its bucket: give --s3-endpoint and --s3-bucket, without \
         --cluster (a cluster node gets its group's data from its leader)"
    )]
    Restore,
}

/// The defaults, from `ServerConfig::new`: the one place they are set.
fn d() -> ServerConfig {
    ServerConfig::new(config::DEFAULT_DATA_DIR)
}

fn ms(t: Duration) -> u64 {
    u64::try_from(t.as_millis()).unwrap_or(u64::MAX)
}

fn us(t: Duration) -> u64 {
    u64::try_from(t.as_micros()).unwrap_or(u64::MAX)
}

/// Flags of `ringmq serve`; each may also come from the --config file (a flag wins).
#[derive(Args, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Settings {
    /// TOML file with any of these settings (keys as the flags, with _ for -).
    #[arg(long)]
    #[serde(skip)]
    config: Option<PathBuf>,
    /// Data directory (shard N keeps its files in DIR/shard-N)
    #[arg(long, default_value = config::DEFAULT_DATA_DIR)]
    data_dir: PathBuf,
    /// CPUs to run shards on, e.g. 0,1 [default: all]
    #[arg(long, value_delimiter = ',')]
    cores: Option<Vec<usize>>,
    /// Address of shard 0; shard N listens on port + N (port 0: ephemeral ports)
    #[arg(long, default_value_t = d().listen)]
    listen: SocketAddr,
    /// Default flush policy of new topics
    #[arg(long, value_enum, default_value_t = Flush::Sync)]
    flush: Flush,
    /// Commit log segment size, MiB
    #[arg(long, default_value_t = d().segment_bytes >> 20)]
    segment_mib: u64,
    /// User-space cache per shard, MiB
    #[arg(long, default_value_t = d().cache_bytes >> 20)]
    cache_mib: usize,
    /// Durable log writes in flight per shard (1: one at a time)
    #[arg(long, default_value_t = d().flush_depth)]
    flush_depth: usize,
    /// While durable writes are in flight, yield the shard's core to the kernel's completion work every this many microseconds (0: never)
    #[arg(long, default_value_t = us(d().completion_yield))]
    completion_yield_us: u64,
    /// How long an idle shard polls for work before its thread sleeps, microseconds: lower wake-up latency for CPU spent idle (0 on shared hosts and for several brokers on one machine)
    #[arg(long, default_value_t = us(d().idle_spin))]
    idle_spin_us: u64,
    /// Largest request frame, bytes, checked before the frame is read
    #[arg(long, default_value_t = d().frame_bytes_max)]
    frame_bytes_max: usize,
    /// Largest record batch, bytes
    #[arg(long, default_value_t = d().batch_bytes_max)]
    batch_bytes_max: usize,
    /// The most a compressed Kafka batch's records may inflate to, bytes (checked as the batch is stored)
    #[arg(long, default_value_t = d().inflated_bytes_max)]
    inflated_bytes_max: usize,
    /// The longest metadata string a Kafka offset commit may carry, bytes (longer: OFFSET_METADATA_TOO_LARGE)
    #[arg(long, default_value_t = d().offset_metadata_bytes_max)]
    offset_metadata_bytes_max: usize,
    /// A Kafka client's Metadata request creates a topic it names that does not exist (Kafka's auto.create.topics.enable)
    #[arg(long, default_value_t = d().auto_create_topics, action = clap::ArgAction::Set)]
    auto_create_topics: bool,
    /// Queues of a topic a Kafka client's Metadata request creates (Kafka's num.partitions)
    #[arg(long, default_value_t = d().auto_create_queues)]
    auto_create_queues: u32,
    /// How often a topic's own retention.ms and retention.bytes move its queues' starts, ms (Kafka's log.retention.check.interval.ms)
    #[arg(long, default_value_t = ms(d().retention_check_interval))]
    retention_check_ms: u64,
    /// How often the compactor looks at the queues of compacted topics (cleanup.policy compact), ms
    #[arg(long, default_value_t = ms(d().compaction_check_interval))]
    compaction_check_ms: u64,
    /// Share of a shard's core a compaction pass takes at most, percent (1-100)
    #[arg(long, default_value_t = d().compaction_cpu_percent)]
    compaction_cpu_percent: u32,
    /// Bytes a compaction pass writes per second at most (0: no bound)
    #[arg(long, default_value_t = d().compaction_bytes_per_sec)]
    compaction_bytes_per_sec: u64,
    /// Keys a compaction pass maps at most (about 40 bytes of memory each; more keys take more passes)
    #[arg(long, default_value_t = d().compaction_keys_max)]
    compaction_keys_max: usize,
    /// Bytes per second one queue moving into this broker group is copied at most (0: no bound)
    #[arg(long, default_value_t = d().move_bytes_per_sec)]
    move_bytes_per_sec: u64,
    /// With --cluster: how often a leader reports its queues' stored bytes and produce rate for `cluster rebalance`, ms
    #[arg(long, default_value_t = ms(d().load_report_interval))]
    load_report_ms: u64,
    /// Client connections per shard, over its native and Kafka listeners
    #[arg(long, default_value_t = d().connections_max)]
    connections_max: usize,
    /// Connections from one client address to the node, over both listeners (0: no limit)
    #[arg(long, default_value_t = d().connections_per_ip_max)]
    connections_per_ip_max: usize,
    /// Requests in flight per connection, for produces and for the rest each, before the broker stops reading it
    #[arg(long, default_value_t = d().inflight_per_connection_max)]
    inflight_per_connection_max: usize,
    /// Bytes of requests one connection may have read and not yet answered before the broker stops reading it (at least --frame-bytes-max)
    #[arg(long, default_value_t = d().request_bytes_per_connection_max)]
    request_bytes_per_connection_max: usize,
    /// Bytes of requests a shard's connections may hold together before the shard stops reading them (at least the per-connection bound)
    #[arg(long, default_value_t = d().request_bytes_per_shard_max)]
    request_bytes_per_shard_max: usize,
    /// Longest long-poll wait (Fetch, FetchMany, PollChecks) a client may ask for, ms; more is refused
    #[arg(long, default_value_t = ms(d().fetch_wait_max))]
    fetch_wait_ms_max: u64,
    /// Longest group wait (heartbeat park, rebalance and session timeouts) a client may ask for, ms; more is refused
    #[arg(long, default_value_t = ms(d().group_wait_max))]
    group_wait_ms_max: u64,
    /// A member of a Kafka consumer-protocol group (KIP-848) not heard from for this long leaves, ms (Kafka's group.consumer.session.timeout.ms)
    #[arg(long, default_value_t = ms(d().consumer_session_timeout))]
    group_consumer_session_timeout_ms: u64,
    /// How often a member of a Kafka consumer-protocol group is asked to heartbeat, ms; below the session timeout (Kafka's group.consumer.heartbeat.interval.ms)
    #[arg(long, default_value_t = ms(d().consumer_heartbeat_interval))]
    group_consumer_heartbeat_interval_ms: u64,
    /// Longest transaction timeout a Kafka transactional producer may ask for, ms; more is refused (Kafka's transaction.max.timeout.ms)
    #[arg(long, default_value_t = ms(d().transaction_timeout_max))]
    transaction_timeout_ms_max: u64,
    /// A shard thread held this many ms is a stall: counted by cause, and logged with where the thread was (0: not watched)
    #[arg(long, default_value_t = ms(d().stall_threshold))]
    stall_threshold_ms: u64,
    /// How long a shard's task queue runs before its tasks are asked to yield, ms
    #[arg(long, default_value_t = ms(d().task_quota))]
    task_quota_ms: u64,
    /// Serve the Kafka protocol too: shard 0 on this address, shard N on its port + N
    #[arg(long)]
    kafka_listen: Option<SocketAddr>,
    /// Tiered storage's S3 endpoint (http://host:port or https://host); with --s3-bucket, topics may set remote.storage.enable
    #[arg(long)]
    s3_endpoint: Option<String>,
    /// Tiered storage's bucket
    #[arg(long)]
    s3_bucket: Option<String>,
    /// The bucket's region
    #[arg(long, default_value = "us-east-1")]
    s3_region: String,
    /// How requests name the bucket: path (S3-compatible servers) or virtual-host (AWS S3)
    #[arg(long, default_value = "path")]
    s3_url_style: String,
    /// Put before every key, so that several clusters share a bucket
    #[arg(long, default_value = "")]
    s3_prefix: String,
    /// An AWS shared credentials file (else AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)
    #[arg(long)]
    s3_credentials_file: Option<PathBuf>,
    /// The credentials file's profile
    #[arg(long, default_value = "default")]
    s3_profile: String,
    /// Tries of an S3 call whose failure may pass (connection, timeout, 5xx), the first included
    #[arg(long, default_value_t = 5)]
    s3_attempts: u32,
    /// Longest one S3 request may take, ms
    #[arg(long, default_value_t = 30_000)]
    s3_request_timeout_ms: u64,
    /// How often the broker checks its bucket (the metric ringmq_tiered_bucket_usable), ms
    #[arg(long, default_value_t = ms(d().bucket_check_interval))]
    s3_check_ms: u64,
    /// Bytes per second the broker uploads to tiered storage's bucket, shared evenly by its shards
    #[arg(long, default_value_t = d().tiered_upload_bytes_per_sec)]
    tiered_upload_bytes_per_sec: u64,
    /// Segments the broker uploads to the bucket at once
    #[arg(long, default_value_t = d().tiered_uploads_in_flight)]
    tiered_uploads_in_flight: usize,
    /// MiB of data read back from the bucket kept for readers, apart from the shards' caches, shared by the shards
    #[arg(long, default_value_t = d().tiered_read_cache_bytes >> 20)]
    tiered_read_cache_mib: u64,
    /// A single node whose data directory holds no topics takes them from the bucket, and its tiered queues go on from what the bucket holds (a lost disk replaced)
    #[arg(long)]
    tiered_restore: bool,
    /// Serve the admin HTTP listener on this address (shard 0): /metrics and /public_metrics (Prometheus), /healthz, /readyz, the web console at /
    #[arg(long)]
    admin_listen: Option<SocketAddr>,
    /// Trace every message of these topics (comma-separated; * for all): send, store, deliver, commit, retry, dead-letter events in topic %TRACE; `ringmq trace ID` prints them
    #[arg(long, default_value = "")]
    trace_topics: String,
    /// Also trace this fraction (0..1) of every topic's messages, picked by message id
    #[arg(long, default_value_t = 0.0)]
    trace_sample_rate: f64,
    /// Batches each shard remembers so that a client's retry of one (the same bytes) is answered with where it was stored, not stored twice (0: off)
    #[arg(long, default_value_t = d().idempotence_window)]
    idempotence_window: usize,
    /// Delete log segments older than this many hours [default: keep]
    #[arg(long)]
    retention_hours: Option<u64>,
    /// Keep at most this many GiB of log per shard [default: no limit]
    #[arg(long)]
    retention_gib: Option<u64>,
    /// Segment files retention keeps per shard to recycle as new segments (a rename, no zero-fill) instead of deleting them; each takes a segment of disk
    #[arg(long, default_value_t = d().segment_pool_max)]
    segment_pool_max: usize,
    /// Delays of the 18 delay levels (retries use levels 3-18), e.g. "1s 5s 10s 30s 1m ..." [default: RocketMQ's, 1s to 2h]
    #[arg(long)]
    delay_levels: Option<String>,
    /// Time moves only through the AdvanceClock API: for tests of retries and delays.
    #[arg(long)]
    manual_clock: bool,
    /// Join a cluster whose control plane is this etcd (etcd://host:port[,host:port]); off: a single node.
    #[arg(long)]
    cluster: Option<String>,
    /// With --cluster: the broker group this node belongs to.
    #[arg(long, requires = "cluster")]
    broker_group: Option<String>,
    /// With --cluster: this node's name, unique in its group.
    #[arg(long, requires = "cluster")]
    node: Option<String>,
    /// With --cluster: the address others reach shard 0 on [default: the address it listens on].
    #[arg(long, requires = "cluster")]
    advertise: Option<String>,
    /// With --cluster: a node that stops renewing its etcd lease for this long is gone, ms.
    #[arg(long, requires = "cluster", default_value_t = ms(ringmq::cluster::DEFAULT_LEASE_TTL))]
    lease_ms: u64,
    /// With --cluster: this node is its broker group's preferred leader; Kafka's preferred-leader election (ElectLeaders) hands the group's lead to it.
    #[arg(long, requires = "cluster")]
    preferred_leader: bool,
    /// With --cluster: when a produce is acknowledged: sync (once --insync-min replicas hold it durably) or async (once the leader does).
    #[arg(long, requires = "cluster", value_enum, default_value_t = Replication::Sync)]
    replication: Replication,
    /// With --cluster and sync replication: replicas, the leader counted, that must hold a produce durably.
    #[arg(long, requires = "cluster", default_value_t = INSYNC_MIN)]
    insync_min: usize,
    /// With --cluster: a follower that has not fetched for this long leaves the in-sync set, ms.
    #[arg(long, requires = "cluster", default_value_t = ms(REPLICA_LAG_MAX))]
    replica_lag_ms_max: u64,
    /// With --cluster and sync replication: longest a produce waits for its replicas, ms.
    #[arg(long, requires = "cluster", default_value_t = ms(REPLICA_ACK_TIMEOUT))]
    replica_ack_timeout_ms: u64,
    /// Serve TLS on every listener (and use it to other nodes) with this certificate chain, PEM; SIGHUP reloads it
    #[arg(long, requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert, PEM
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// The CA (PEM) that signs clients' certificates and other nodes' [default: the system's roots]
    #[arg(long)]
    tls_ca: Option<PathBuf>,
    /// Whether clients must present a certificate --tls-ca signed
    #[arg(long, value_enum, default_value_t = TlsClientAuth::None)]
    tls_client_auth: TlsClientAuth,
    /// Clients must authenticate (SASL, or a client certificate --tls-ca signed: its CN is the user) before any request but ApiVersions
    #[arg(long)]
    auth_required: bool,
    /// SASL mechanisms offered (PLAIN only over TLS) [default: all]
    #[arg(long, value_delimiter = ',')]
    sasl_mechanisms: Option<Vec<String>>,
    /// Users every operation is allowed to
    #[arg(long, value_delimiter = ',')]
    super_users: Option<Vec<String>>,
    /// Seal every stored batch with AES-256-GCM under the newest of these data keys (a file of `ID HEX` lines; or $RINGMQ_ENCRYPTION_KEYS holds them)
    #[arg(long)]
    encryption_keys: Option<PathBuf>,
}

/// A topic's flush policy, as `serve --flush` and `topic create --flush` name it.
#[derive(Clone, Copy, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Flush {
    /// Acknowledge after fdatasync.
    Sync,
    /// Acknowledge when queued; flush by interval and size.
    Async,
}

/// `--tls-client-auth`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum TlsClientAuth {
    /// Clients present no certificate.
    None,
    /// A client may present one; it is verified when it does.
    Optional,
    /// A client without one is refused.
    Required,
}

/// `--replication`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Replication {
    Sync,
    Async,
}

/// Replicas that hold a sync produce durably by default (the leader and one follower).
const INSYNC_MIN: usize = 2;
/// A follower that has not fetched for this long leaves the in-sync set.
const REPLICA_LAG_MAX: Duration = Duration::from_secs(10);
/// Longest a sync produce waits for its followers.
const REPLICA_ACK_TIMEOUT: Duration = Duration::from_secs(10);

impl Default for Settings {
    /// Every setting at its default: the command line without flags.
    fn default() -> Self {
        let command = Settings::augment_args(clap::Command::new("serve"));
        let matches = command.try_get_matches_from(["serve"]).expect("serve needs no flag");
        Settings::from_arg_matches(&matches).expect("the defaults are valid settings")
    }
}

impl Settings {
    /// The flags over the --config file over the defaults. `on_command_line`
    /// says whether a setting (by its id, the field's name) was given as a
    /// flag: clap has filled the others with their defaults, which the
    /// file's values replace.
    pub fn merge(self, on_command_line: impl Fn(&str) -> bool) -> Result<Settings, SettingsError> {
        let Some(path) = self.config.clone() else { return Ok(self) };
        let merge_error = |source| SettingsError::Merge { path: path.clone(), source };
        let mut merged = object(Settings::read(&path)?).map_err(merge_error)?;
        merged.extend(object(self).map_err(merge_error)?.into_iter().filter(|(id, _)| on_command_line(id)));
        let mut settings: Settings = serde_json::from_value(merged.into()).map_err(merge_error)?;
        settings.config = Some(path);
        Ok(settings)
    }

    /// The --config file: its settings (under their current names), the
    /// defaults for the rest; a key of the wrong type or unknown is refused.
    fn read(path: &Path) -> Result<Settings, SettingsError> {
        let text =
            std::fs::read_to_string(path).map_err(|source| SettingsError::Read { path: path.to_path_buf(), source })?;
        let file_error = |source| SettingsError::File { path: path.to_path_buf(), source };
        let table = super::renamed::file_keys(toml::from_str(&text).map_err(file_error)?);
        toml::Value::Table(table).try_into().map_err(file_error)
    }
}

/// Settings as a JSON object: field name to value.
fn object(settings: Settings) -> Result<serde_json::Map<String, serde_json::Value>, serde_json::Error> {
    match serde_json::to_value(settings)? {
        serde_json::Value::Object(fields) => Ok(fields),
        _ => unreachable!("a struct serializes as an object"),
    }
}

impl Settings {
    /// Tiered storage's bucket, if --s3-endpoint names one (its credentials loaded).
    pub fn object_store(&self) -> Result<Option<ObjectStoreConfig>, SettingsError> {
        let Some(endpoint) = self.s3_endpoint.clone() else {
            return match self.s3_bucket {
                Some(_) => Err(SettingsError::S3Needs("s3-endpoint")),
                None => Ok(None),
            };
        };
        let bucket = self.s3_bucket.clone().ok_or(SettingsError::S3Needs("s3-bucket"))?;
        let url_style: UrlStyle = self.s3_url_style.parse().map_err(SettingsError::S3)?;
        let credentials = Credentials::load(self.s3_credentials_file.as_deref(), &self.s3_profile)
            .map_err(|e| SettingsError::S3(e.to_string()))?;
        Ok(Some(ObjectStoreConfig {
            endpoint,
            bucket,
            region: self.s3_region.clone(),
            url_style,
            prefix: self.s3_prefix.clone(),
            credentials,
            attempts: at_least_one(self.s3_attempts, "s3-attempts")?,
            request_timeout: Duration::from_millis(at_least_one(self.s3_request_timeout_ms, "s3-request-timeout-ms")?),
        }))
    }

    /// The broker's configuration, each setting checked.
    pub fn server_config(&self) -> Result<ServerConfig, SettingsError> {
        let mut cfg = ServerConfig::new(&self.data_dir);
        if let Some(cores) = &self.cores {
            cfg.cores = cores.clone();
        }
        cfg.listen = self.listen;
        cfg.default_flush = match self.flush {
            Flush::Sync => FlushPolicy::Sync,
            Flush::Async => FlushPolicy::Async,
        };
        cfg.segment_bytes = self.segment_mib.saturating_mul(1 << 20);
        cfg.cache_bytes = self.cache_mib.saturating_mul(1 << 20);
        cfg.flush_depth = at_least_one(self.flush_depth, "flush-depth")?;
        cfg.completion_yield = Duration::from_micros(self.completion_yield_us);
        cfg.idle_spin = Duration::from_micros(self.idle_spin_us);
        cfg.frame_bytes_max = self.frame_bytes_max;
        cfg.batch_bytes_max = self.batch_bytes_max;
        cfg.inflated_bytes_max = self.inflated_bytes_max;
        cfg.offset_metadata_bytes_max = self.offset_metadata_bytes_max;
        cfg.auto_create_topics = self.auto_create_topics;
        cfg.auto_create_queues = at_least_one(self.auto_create_queues, "auto-create-queues")?;
        let every = at_least_one(self.retention_check_ms, "retention-check-ms")?;
        cfg.retention_check_interval = Duration::from_millis(every);
        let every = at_least_one(self.compaction_check_ms, "compaction-check-ms")?;
        cfg.compaction_check_interval = Duration::from_millis(every);
        if !(1..=100).contains(&self.compaction_cpu_percent) {
            return Err(SettingsError::CompactionShare(self.compaction_cpu_percent));
        }
        cfg.compaction_cpu_percent = self.compaction_cpu_percent;
        cfg.compaction_bytes_per_sec = self.compaction_bytes_per_sec;
        cfg.move_bytes_per_sec = self.move_bytes_per_sec;
        cfg.load_report_interval = Duration::from_millis(at_least_one(self.load_report_ms, "load-report-ms")?);
        cfg.compaction_keys_max = self.compaction_keys_max.max(1024);
        cfg.connections_max = self.connections_max;
        cfg.connections_per_ip_max = self.connections_per_ip_max;
        cfg.inflight_per_connection_max = self.inflight_per_connection_max;
        cfg.request_bytes_per_connection_max = self.request_bytes_per_connection_max;
        cfg.request_bytes_per_shard_max = self.request_bytes_per_shard_max;
        self.request_bounds_nest()?;
        cfg.fetch_wait_max = Duration::from_millis(self.fetch_wait_ms_max);
        cfg.group_wait_max = Duration::from_millis(self.group_wait_ms_max);
        let (session, heartbeat) = (self.group_consumer_session_timeout_ms, self.group_consumer_heartbeat_interval_ms);
        if heartbeat == 0 || heartbeat >= session {
            return Err(SettingsError::ConsumerHeartbeat { heartbeat, session });
        }
        cfg.consumer_session_timeout = Duration::from_millis(session);
        cfg.consumer_heartbeat_interval = Duration::from_millis(heartbeat);
        cfg.transaction_timeout_max =
            Duration::from_millis(at_least_one(self.transaction_timeout_ms_max, "transaction-timeout-ms-max")?);
        cfg.stall_threshold = Duration::from_millis(self.stall_threshold_ms);
        cfg.task_quota = Duration::from_millis(at_least_one(self.task_quota_ms, "task-quota-ms")?);
        cfg.kafka_listen = self.kafka_listen;
        cfg.admin_listen = self.admin_listen;
        cfg.object_store = self.object_store()?;
        cfg.bucket_check_interval = Duration::from_millis(at_least_one(self.s3_check_ms, "s3-check-ms")?);
        cfg.tiered_upload_bytes_per_sec =
            at_least_one(self.tiered_upload_bytes_per_sec, "tiered-upload-bytes-per-sec")?;
        cfg.tiered_uploads_in_flight = at_least_one(self.tiered_uploads_in_flight, "tiered-uploads-in-flight")?;
        cfg.tiered_read_cache_bytes = at_least_one(self.tiered_read_cache_mib, "tiered-read-cache-mib")? << 20;
        if self.tiered_restore && (cfg.object_store.is_none() || self.cluster.is_some()) {
            return Err(SettingsError::Restore);
        }
        cfg.tiered_restore = self.tiered_restore;
        cfg.trace = server::TraceConfig::new(&self.trace_topics, self.trace_sample_rate)?;
        cfg.idempotence_window = self.idempotence_window;
        cfg.retention_age = self.retention_hours.map(|h| Duration::from_secs(h.saturating_mul(3600)));
        cfg.retention_bytes = self.retention_gib.map(|g| g.saturating_mul(1 << 30));
        cfg.segment_pool_max = self.segment_pool_max;
        if let Some(levels) = &self.delay_levels {
            cfg.delay_levels = delay_levels(levels)?;
        }
        cfg.manual_clock = self.manual_clock;
        cfg.tls = self.tls()?;
        cfg.auth.required = self.auth_required;
        if let Some(names) = &self.sasl_mechanisms {
            cfg.auth.mechanisms = names
                .iter()
                .map(|n| SaslMechanism::from_name(n).ok_or_else(|| SettingsError::Mechanism(n.clone())))
                .collect::<Result<_, _>>()?;
        }
        cfg.auth.super_users = self.super_users.clone().unwrap_or_default();
        cfg.encryption = self.data_keys()?;
        admin_apart(&cfg)?;
        Ok(cfg)
    }

    /// The per-connection bound holds the largest frame, the per-shard one
    /// the per-connection one: otherwise a request could never be read.
    fn request_bounds_nest(&self) -> Result<(), SettingsError> {
        let (frame, connection, shard) =
            (self.frame_bytes_max, self.request_bytes_per_connection_max, self.request_bytes_per_shard_max);
        if connection < frame {
            return Err(SettingsError::ConnectionBelowFrame { connection, frame });
        }
        if shard < connection {
            return Err(SettingsError::ShardBelowConnection { shard, connection });
        }
        Ok(())
    }

    /// The cluster this node joins, if any (an empty `advertise`: shard 0's address, once bound).
    pub fn cluster(&self) -> Result<Option<ClusterConfig>, SettingsError> {
        let Some(url) = &self.cluster else { return Ok(None) };
        let needed = |value: &Option<String>, name| value.clone().ok_or(SettingsError::ClusterNeeds(name));
        Ok(Some(ClusterConfig {
            endpoints: ringmq::cluster::parse_endpoints(url)?,
            broker_group: needed(&self.broker_group, "broker-group")?,
            node: needed(&self.node, "node")?,
            advertise: self.advertise.clone().unwrap_or_default(),
            lease_ttl: Duration::from_millis(self.lease_ms),
            shards: 0,
            preferred_leader: self.preferred_leader,
        }))
    }

    /// How the node's broker group replicates (cluster mode).
    pub fn replication(&self) -> server::ReplicationConfig {
        let mode = match self.replication {
            Replication::Sync => server::ReplicationMode::Sync,
            Replication::Async => server::ReplicationMode::Async,
        };
        server::ReplicationConfig {
            mode,
            insync_min: self.insync_min,
            lag_max: Duration::from_millis(self.replica_lag_ms_max),
            ack_timeout: Duration::from_millis(self.replica_ack_timeout_ms),
        }
    }

    /// The broker's TLS, loaded (None without a certificate).
    fn tls(&self) -> Result<Option<ServerTls>, SettingsError> {
        let client_auth = match self.tls_client_auth {
            TlsClientAuth::None => ClientAuth::None,
            TlsClientAuth::Optional => ClientAuth::Optional,
            TlsClientAuth::Required => ClientAuth::Required,
        };
        let (cert, key) = match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => (cert.clone(), key.clone()),
            (None, None) if client_auth == ClientAuth::None => return Ok(None),
            _ => return Err(SettingsError::TlsPair),
        };
        let files = ServerFiles { cert, key, ca: self.tls_ca.clone(), client_auth };
        Ok(Some(ServerTls::load(files)?))
    }

    /// The data keys from --encryption-keys, else from $RINGMQ_ENCRYPTION_KEYS (None: neither).
    fn data_keys(&self) -> Result<Option<Arc<Keyring>>, SettingsError> {
        let text = match &self.encryption_keys {
            Some(path) => {
                std::fs::read_to_string(path).map_err(|source| SettingsError::Read { path: path.clone(), source })?
            }
            None => match std::env::var("RINGMQ_ENCRYPTION_KEYS") {
                Ok(text) => text,
                Err(_) => return Ok(None),
            },
        };
        Ok(Some(Arc::new(Keyring::parse(&text)?)))
    }
}

fn at_least_one<T: PartialOrd + From<u8>>(value: T, flag: &'static str) -> Result<T, SettingsError> {
    if value < T::from(1) {
        return Err(SettingsError::Zero(flag));
    }
    Ok(value)
}

/// 18 durations separated by spaces or commas, each at least the one before.
fn delay_levels(text: &str) -> Result<Vec<Duration>, SettingsError> {
    let levels: Vec<Duration> = text
        .split([' ', ','])
        .filter(|t| !t.is_empty())
        .map(ringmq::duration::parse_duration)
        .collect::<Result<_, _>>()
        .map_err(|e| SettingsError::DelayLevels(e.to_string()))?;
    if levels.len() != 18 || levels.windows(2).any(|w| w[0] > w[1]) {
        return Err(SettingsError::DelayLevels(format!("expected 18 non-decreasing durations, got {text:?}")));
    }
    Ok(levels)
}

/// Refuses an admin address that is one of the shards' listen addresses:
/// glommio binds with SO_REUSEPORT, so both would bind and the kernel would
/// split a port's connections between the broker and the admin listener.
fn admin_apart(cfg: &ServerConfig) -> Result<(), SettingsError> {
    let Some(admin) = cfg.admin_listen else { return Ok(()) };
    let shards = cfg.cores.len() as u16;
    let clashes = |base: SocketAddr| {
        base.port() != 0
            && base.ip() == admin.ip()
            && (base.port()..base.port().saturating_add(shards)).contains(&admin.port())
    };
    if clashes(cfg.listen) || cfg.kafka_listen.is_some_and(clashes) {
        return Err(SettingsError::AdminClash(admin));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::parser::ValueSource;

    /// `ringmq serve ARGS`, merged with the --config file as main does.
    fn serve(args: &[&str]) -> Result<Settings, SettingsError> {
        let command = Settings::augment_args(clap::Command::new("serve"));
        let matches = command.try_get_matches_from([&["serve"], args].concat()).unwrap();
        let flags = Settings::from_arg_matches(&matches).unwrap();
        flags.merge(|id| matches.value_source(id) == Some(ValueSource::CommandLine))
    }

    fn file(text: &str) -> tempfile::NamedTempFile {
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), text).unwrap();
        file
    }

    #[test]
    fn a_flag_wins_over_the_file_and_the_file_over_the_default() {
        let f = file("frame_bytes_max = 1000\nconnections_max = 7\nmanual_clock = true\ncores = [0]\n");
        let path = f.path().to_str().unwrap();
        let s = serve(&["--config", path, "--connections-max", "9", "--request-bytes-per-connection-max", "2000"]);
        let cfg = s.unwrap().server_config().unwrap();
        assert_eq!(cfg.connections_max, 9, "the flag");
        assert_eq!(cfg.frame_bytes_max, 1000, "the file");
        assert_eq!(cfg.request_bytes_per_connection_max, 2000, "the flag");
        assert!(cfg.manual_clock, "the file");
        assert_eq!(cfg.cores, [0], "the file");
        assert_eq!(cfg.flush_depth, ServerConfig::new("x").flush_depth, "the default");
    }

    #[test]
    fn a_flag_given_at_its_default_value_still_wins_over_the_file() {
        let default = d().connections_max.to_string();
        let f = file("connections_max = 7\n");
        let s = serve(&["--config", f.path().to_str().unwrap(), "--connections-max", &default]).unwrap();
        assert_eq!(s.server_config().unwrap().connections_max, d().connections_max);
    }

    #[test]
    fn an_old_key_in_the_file_is_read_under_its_new_name() {
        let f = file("min_insync = 3\nmax_fetch_wait_ms = 5\n");
        let s = serve(&["--config", f.path().to_str().unwrap()]).unwrap();
        assert_eq!(s.replication().insync_min, 3);
        assert_eq!(s.server_config().unwrap().fetch_wait_max, Duration::from_millis(5));
    }

    #[test]
    fn an_unknown_key_or_a_value_of_the_wrong_type_is_refused_with_its_name() {
        let f = file("conections_max = 7\n");
        let e = serve(&["--config", f.path().to_str().unwrap()]).err().unwrap().to_string();
        assert!(e.contains("conections_max") && e.contains("connections_max"), "{e}");
        let f = file("connections_max = \"many\"\n");
        let e = serve(&["--config", f.path().to_str().unwrap()]).err().unwrap().to_string();
        assert!(e.contains("connections_max"), "{e}");
    }

    #[test]
    fn without_a_file_the_defaults_are_the_broker_defaults() {
        let cfg = serve(&[]).unwrap().server_config().unwrap();
        let d = d();
        assert_eq!(
            (cfg.listen, cfg.segment_bytes, cfg.fetch_wait_max, cfg.segment_pool_max, cfg.delay_levels),
            (d.listen, d.segment_bytes, d.fetch_wait_max, d.segment_pool_max, d.delay_levels)
        );
    }

    #[test]
    fn bounds_that_could_never_serve_a_request_are_refused() {
        let e = serve(&["--flush-depth", "0"]).unwrap().server_config().err().unwrap();
        assert_eq!(e.to_string(), "--flush-depth must be at least 1");
        let e = serve(&["--frame-bytes-max", "100", "--request-bytes-per-connection-max", "99"]);
        assert!(matches!(e.unwrap().server_config(), Err(SettingsError::ConnectionBelowFrame { .. })));
        let e =
            serve(&["--group-consumer-session-timeout-ms", "3000", "--group-consumer-heartbeat-interval-ms", "3000"]);
        assert!(matches!(e.unwrap().server_config(), Err(SettingsError::ConsumerHeartbeat { .. })));
    }

    proptest::proptest! {
        /// --delay-levels takes any text without panicking.
        #[test]
        fn no_delay_levels_text_makes_the_parser_panic(text in "\\PC{0,120}") {
            let _ = delay_levels(&text);
        }
    }

    #[test]
    fn delay_levels_must_be_eighteen_rising_durations() {
        let levels = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h";
        assert_eq!(delay_levels(levels).unwrap().len(), 18);
        assert!(delay_levels("1s 2s").unwrap_err().to_string().contains("18"));
        assert!(delay_levels(&levels.replace("1s", "-1s")).unwrap_err().to_string().contains("negative"));
    }
}
