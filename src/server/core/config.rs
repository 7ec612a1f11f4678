//! Broker configuration: flags of `ringmq serve` and the limits it enforces.

use crate::security::sasl::SaslMechanism;
use crate::security::tls::ServerTls;
use ringmq_shards::crypt::keyring::Keyring;
use ringmq_shards::{FlushPolicy, ShardConfig};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// A setting the broker does not take, and what to give instead.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConfigError {
    #[error("--trace-sample-rate {0} must be between 0 and 1")]
    SampleRate(f64),
}

/// Everything `ringmq serve` needs to start.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Root of the broker's data; shard N lives in `shard-N/`.
    pub data_dir: PathBuf,
    /// CPUs to run one shard each on.
    pub cores: Vec<usize>,
    /// Shard 0's address; shard N listens on port + N (or an ephemeral port when 0).
    pub listen: SocketAddr,
    /// Shard 0's Kafka-protocol address (shard N on port + N); None: off.
    pub kafka_listen: Option<SocketAddr>,
    /// The admin HTTP listener (metrics, health, console), served by shard 0; None: off.
    pub admin_listen: Option<SocketAddr>,
    /// Which messages the broker traces (off by default).
    pub trace: super::trace::TraceConfig,
    /// Longest an admin HTTP client may take to send its request, and a scrape to gather every shard's metrics.
    pub admin_timeout: Duration,
    /// Flush policy of topics created without one.
    pub default_flush: FlushPolicy,
    pub segment_bytes: u64,
    pub cache_bytes: usize,
    /// Durable log writes in flight per shard.
    pub flush_depth: usize,
    /// Largest frame accepted, checked before the frame is buffered.
    pub frame_bytes_max: usize,
    /// Largest record batch accepted.
    pub batch_bytes_max: usize,
    /// The most a compressed Kafka batch's records may inflate to.
    pub inflated_bytes_max: usize,
    /// The longest metadata string an offset commit may carry (Kafka's `offset.metadata.max.bytes`).
    pub offset_metadata_bytes_max: usize,
    /// A Kafka client's Metadata request creates a topic it names that does
    /// not exist (Kafka's `auto.create.topics.enable`, on by default as Kafka's).
    pub auto_create_topics: bool,
    /// The queues of a topic created so (Kafka's `num.partitions`, 1 as Kafka's).
    pub auto_create_queues: u32,
    /// How often a topic's own retention (`retention.ms`, `retention.bytes`)
    /// moves its queues' starts (Kafka's `log.retention.check.interval.ms`).
    pub retention_check_interval: Duration,
    /// How often the compactor looks at the queues of compacted topics
    /// (`cleanup.policy` compact): each whose dirty share or oldest dirty
    /// record says so is compacted (`data/compaction.rs`).
    pub compaction_check_interval: Duration,
    /// Share of a shard's core a compaction pass takes at most, in percent.
    pub compaction_cpu_percent: u32,
    /// Bytes a compaction pass writes per second at most (0: no bound).
    pub compaction_bytes_per_sec: u64,
    /// Keys a compaction pass maps at most (see `ShardConfig`).
    pub compaction_keys_max: usize,
    /// Bytes per second one queue moving into this broker group is copied
    /// at most (0: no bound), so that a move leaves the source's disk and
    /// the link to its clients.
    pub move_bytes_per_sec: u64,
    /// How often a cluster leader's shards report their queues' loads
    /// (stored bytes, produce bytes per second) for `cluster rebalance`.
    pub load_report_interval: Duration,
    /// Client connections per shard, over its native and Kafka listeners.
    pub connections_max: usize,
    /// Connections from one client address to the node, both listeners (0: no limit).
    pub connections_per_ip_max: usize,
    /// Batches each shard remembers to recognise a client's retry (0: off).
    pub idempotence_window: usize,
    /// Requests in flight per connection before the broker stops reading from it
    /// (produces and other requests each have this many).
    pub inflight_per_connection_max: usize,
    /// Bytes of requests one connection may have read and not yet answered;
    /// past it the connection is not read (at least `frame_bytes_max`).
    pub request_bytes_per_connection_max: usize,
    /// Bytes of requests a shard's connections may hold together; past it no
    /// connection of the shard is read (at least the per-connection bound).
    pub request_bytes_per_shard_max: usize,
    /// Longest long-poll wait a fetch may ask for.
    pub fetch_wait_max: Duration,
    /// Longest a group join or sync is parked, and the largest rebalance timeout a member may ask for.
    pub group_wait_max: Duration,
    /// Kafka consumer-protocol groups (KIP-848): a member not heard from
    /// for this long leaves (Kafka's `group.consumer.session.timeout.ms`).
    pub consumer_session_timeout: Duration,
    /// How often such a member is asked to heartbeat (Kafka's
    /// `group.consumer.heartbeat.interval.ms`); below the session timeout.
    pub consumer_heartbeat_interval: Duration,
    /// The longest transaction timeout a Kafka transactional producer may
    /// ask for (Kafka's `transaction.max.timeout.ms`); a transaction open
    /// past its own timeout is aborted by the broker.
    pub transaction_timeout_max: Duration,
    /// Delays of levels 1..=18 (retries and delayed messages).
    pub delay_levels: Vec<Duration>,
    /// Longest delay a delayed message may ask for.
    pub delay_max: Duration,
    /// A half message unresolved this long after it was stored is checked with its producer group...
    pub tx_timeout: Duration,
    /// ...again every this long...
    pub tx_check_interval: Duration,
    /// ...and rolled back after this many checks without an answer.
    pub tx_checks_max: u32,
    /// Time moves only through the AdvanceClock API (tests).
    pub manual_clock: bool,
    pub retention_age: Option<Duration>,
    pub retention_bytes: Option<u64>,
    /// Segment files retention keeps per shard to recycle as new segments
    /// instead of deleting them (see `ShardConfig::segment_pool_max`).
    pub segment_pool_max: usize,
    /// How long an idle shard polls for work before its thread sleeps: a
    /// message arriving meanwhile is served without a wake-up, and an idle
    /// broker spends CPU on it (see README, "What an idle broker costs").
    pub idle_spin: Duration,
    /// While durable writes are in flight, each shard yields its core to the
    /// kernel's completion work this often (0: never; see `ShardConfig`).
    pub completion_yield: Duration,
    /// A shard thread held longer than this is a stall: the watchdog logs
    /// where the thread was and why, and counts it (zero: not watched).
    pub stall_threshold: Duration,
    /// How long a shard's task queue runs before glommio asks its tasks to
    /// yield. glommio's 100 ms by default: 5 ms cost e2e p50 +15-20% at
    /// 175k msgs/s in 3 of 3 alternating runs.
    pub task_quota: Duration,
    /// Cluster mode: this node's role in its broker group (None: a single node).
    pub cluster: Option<super::replication::ClusterRole>,
    /// TLS on every listener and on connections to other nodes (None: in the clear).
    pub tls: Option<ServerTls>,
    /// Longest a new connection may take to complete its TLS handshake.
    pub tls_handshake_timeout: Duration,
    /// Who may connect, and how they prove it.
    pub auth: AuthConfig,
    /// Data keys: every batch is sealed (encrypted at rest) with the newest (None: in clear).
    pub encryption: Option<Arc<Keyring>>,
    /// Tiered storage's bucket (None: topics may not set remote.storage.enable).
    pub object_store: Option<crate::objects::ObjectStoreConfig>,
    /// How often shard 0 checks the bucket (`ringmq_tiered_bucket_usable`).
    pub bucket_check_interval: Duration,
    /// Bytes per second the node's shards upload to the bucket, shared
    /// evenly between them.
    pub tiered_upload_bytes_per_sec: u64,
    /// Objects the node uploads at once.
    pub tiered_uploads_in_flight: usize,
    /// Bytes of slices read from the bucket the node keeps for readers
    /// (apart from the shards' own caches), shared evenly by its shards.
    pub tiered_read_cache_bytes: u64,
    /// A single node whose data directory holds no metadata takes the
    /// bucket's, and its tiered queues begin where the bucket ends.
    pub tiered_restore: bool,
}

/// Authentication settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthConfig {
    /// Every connection must authenticate (SASL, or a verified client
    /// certificate) before any request but ApiVersions and SASL's.
    pub required: bool,
    /// The SASL mechanisms offered (PLAIN only over TLS).
    pub mechanisms: Vec<SaslMechanism>,
    /// Principals every operation is allowed to.
    pub super_users: Vec<String>,
}

impl Default for AuthConfig {
    fn default() -> Self {
        AuthConfig { required: false, mechanisms: SaslMechanism::ALL.to_vec(), super_users: Vec::new() }
    }
}

/// Space each shard holds back in its ballast (released when the disk
/// fills, so checkpoints and retention still find room): a sixteenth of a
/// segment, 4-64 MiB.
pub fn ballast_bytes(segment_bytes: u64) -> u64 {
    (segment_bytes / 16).clamp(4 << 20, 64 << 20)
}

/// RocketMQ's default delays of levels 1..=18.
pub fn default_delay_levels() -> Vec<Duration> {
    [1, 5, 10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800, 3600, 7200]
        .into_iter()
        .map(Duration::from_secs)
        .collect()
}

/// Where `ringmq serve` keeps its data unless told otherwise.
pub const DEFAULT_DATA_DIR: &str = "./data";
/// Shard 0's address unless told otherwise.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:9292";

impl ServerConfig {
    /// Shard `index`'s storage directory.
    pub fn shard_dir(&self, index: usize) -> std::path::PathBuf {
        self.data_dir.join(format!("shard-{index}"))
    }

    /// The largest Kafka record batch a ringmq batch holds within `batch_bytes_max`.
    pub fn kafka_batch_bytes_max(&self) -> usize {
        self.batch_bytes_max.saturating_sub(ringmq_shards::batch::KAFKA_WRAPPER_BYTES)
    }

    /// What a client's batch is checked against.
    pub fn batch_limits(&self) -> ringmq_shards::batch::Limits {
        ringmq_shards::batch::Limits { batch_bytes: self.batch_bytes_max, inflated_bytes: self.inflated_bytes_max }
    }

    /// The defaults of every setting (the storage engine's come from
    /// `ShardConfig::new`): all CPUs, 127.0.0.1:9292, sync flush, 1 GiB
    /// segments, 256 MiB cache per shard. The CLI's help shows these.
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let data_dir = data_dir.into();
        let storage = ShardConfig::new(&data_dir);
        ServerConfig {
            data_dir,
            cores: (0..cpus).collect(),
            listen: DEFAULT_LISTEN.parse().expect("valid address"),
            kafka_listen: None,
            admin_listen: None,
            admin_timeout: Duration::from_secs(10),
            trace: super::trace::TraceConfig::default(),
            default_flush: storage.default_flush_policy,
            segment_bytes: storage.segment_bytes,
            cache_bytes: storage.cache_bytes,
            flush_depth: storage.flush_depth,
            frame_bytes_max: 8 << 20,
            batch_bytes_max: storage.batch_bytes_max,
            inflated_bytes_max: storage.inflated_bytes_max,
            offset_metadata_bytes_max: 4096,
            auto_create_topics: true,
            auto_create_queues: 1,
            retention_check_interval: Duration::from_secs(30),
            compaction_check_interval: Duration::from_secs(15),
            compaction_cpu_percent: storage.compaction_cpu_percent,
            compaction_bytes_per_sec: storage.compaction_bytes_per_sec,
            compaction_keys_max: storage.compaction_keys_max,
            move_bytes_per_sec: 64 << 20,
            load_report_interval: Duration::from_secs(30),
            connections_max: 1024,
            connections_per_ip_max: 0,
            idempotence_window: storage.recent_batches,
            inflight_per_connection_max: 256,
            request_bytes_per_connection_max: 32 << 20,
            request_bytes_per_shard_max: 128 << 20,
            fetch_wait_max: Duration::from_secs(60),
            group_wait_max: Duration::from_secs(300),
            consumer_session_timeout: Duration::from_secs(45),
            consumer_heartbeat_interval: Duration::from_secs(5),
            transaction_timeout_max: Duration::from_secs(900),
            delay_levels: default_delay_levels(),
            delay_max: Duration::from_secs(7 * 24 * 3600),
            tx_timeout: Duration::from_secs(6),
            tx_check_interval: Duration::from_secs(60),
            tx_checks_max: 15,
            manual_clock: false,
            retention_age: None,
            retention_bytes: None,
            segment_pool_max: storage.segment_pool_max,
            idle_spin: Duration::from_micros(50),
            completion_yield: storage.completion_yield,
            stall_threshold: Duration::from_millis(10),
            task_quota: Duration::from_millis(100),
            cluster: None,
            tls: None,
            tls_handshake_timeout: Duration::from_secs(10),
            auth: AuthConfig::default(),
            encryption: None,
            object_store: None,
            bucket_check_interval: Duration::from_secs(60),
            tiered_upload_bytes_per_sec: 64 << 20,
            tiered_uploads_in_flight: 4,
            tiered_read_cache_bytes: 64 << 20,
            tiered_restore: false,
        }
    }
}
