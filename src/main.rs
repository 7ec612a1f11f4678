//! The `ringmq` command: the broker (`serve`) and client commands for topics,
//! producing and consuming.

mod cli;

use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};
use ringmq::client::{
    Client, ClientConfig, ClientError, Consumer, GroupConfig, Message, Producer, ProducerConfig, SaslLogin, StartFrom,
    StartNew,
};
use ringmq::cluster::node::Role;
use ringmq::security::sasl::SaslMechanism;
use ringmq::security::tls::{ClientFiles, ClientTls, ServerTls};
use ringmq::server::{self, config, ServerConfig};
use ringmq::shards::crypt::keyring::Keyring;
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;
use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// ringmq: a durable thread-per-core message broker.
#[derive(Parser)]
#[command(name = "ringmq", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the broker: one shard per core, shard N on the listen port + N.
    Serve(Box<ServeArgs>),
    /// Create, list, describe or delete topics.
    Topic {
        #[command(subcommand)]
        action: TopicAction,
    },
    /// Send lines from stdin as messages, one per line.
    Produce(ProduceArgs),
    /// Print messages of a topic, one value per line (or JSON).
    Consume(ConsumeArgs),
    /// Check that this host can run the broker; each failure names its fix.
    Doctor(DoctorArgs),
    /// Look messages up by id or by key (every shard is asked).
    Message {
        #[command(subcommand)]
        action: MessageAction,
    },
    /// List consumer groups; describe one: members, committed offsets, queue ends and lag.
    Group {
        #[command(subcommand)]
        action: cli::groups::GroupAction,
    },
    /// A live view of a broker's topics (rates, stored messages, lag) and append latency, refreshed each second (its admin listener).
    Top(cli::top::TopArgs),
    /// A message's timeline: sent, stored, delivered, committed, retried, dead-lettered (topics the broker traces).
    Trace(cli::trace::TraceArgs),
    /// Inspect a consumer group's dead letters and send them back to their topics.
    Dlq {
        #[command(subcommand)]
        action: DlqAction,
    },
    /// Create, list and delete the users the broker authenticates, or set their passwords.
    User {
        #[command(subcommand)]
        action: cli::users::UserAction,
    },
    /// Add, remove and list the rules that allow or deny principals operations on resources.
    Acl {
        #[command(subcommand)]
        action: cli::acls::AclAction,
    },
    /// Set and list client quotas: bytes per second produced and fetched, requests per second.
    Quota {
        #[command(subcommand)]
        action: cli::quotas::QuotaAction,
    },
    /// The cluster as its etcd sees it.
    Cluster {
        #[command(subcommand)]
        action: ClusterAction,
    },
}

#[derive(Subcommand)]
enum ClusterAction {
    /// Every registered node (group, name, advertised address, lease), then
    /// every broker group (leader, epoch, in-sync set) and each follower's lag (bytes, ms since its last fetch).
    Status {
        /// The cluster's etcd (etcd://host:port[,host:port]).
        #[arg(long)]
        cluster: String,
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
    /// A planned switch of a broker group's leader to another in-sync member;
    /// waits until it leads, then prints the group's leader and epoch.
    TransferLeader {
        /// The cluster's etcd (etcd://host:port[,host:port]).
        #[arg(long)]
        cluster: String,
        /// The broker group whose leader is switched.
        #[arg(long, required_unless_present = "group")]
        broker_group: Option<String>,
        /// The old name of --broker-group (accepted with a warning until the next release).
        #[arg(long, hide = true)]
        group: Option<String>,
        /// The node to lead (default: another registered member of the in-sync set).
        #[arg(long)]
        to: Option<String>,
        /// Longest wait for it to lead, ms.
        #[arg(long, default_value_t = 30_000)]
        wait_ms: u64,
    },
}

#[derive(Subcommand)]
enum MessageAction {
    /// The message with this id, as JSON with its topic, queue, offset and timestamp.
    Get {
        /// 32 hex digits, as producers report and consumers print it.
        #[arg(long)]
        id: String,
        #[command(flatten)]
        broker: BrokerArg,
    },
    /// The messages of a topic with this key, one JSON object per line.
    Find {
        #[arg(long)]
        topic: String,
        #[arg(long)]
        key: String,
        #[command(flatten)]
        broker: BrokerArg,
    },
}

#[derive(Subcommand)]
enum DlqAction {
    /// One line per dead letter: offset, message id, origin topic, tries, tag, value.
    List {
        #[arg(long)]
        group: String,
        /// First offset to list.
        #[arg(long, default_value_t = 0)]
        from: u64,
        /// Most dead letters to list.
        #[arg(long, default_value_t = 100)]
        max: usize,
        #[command(flatten)]
        broker: BrokerArg,
    },
    /// One dead letter as JSON, with its headers.
    Show {
        #[arg(long)]
        group: String,
        #[arg(long)]
        offset: u64,
        #[command(flatten)]
        broker: BrokerArg,
    },
    /// Send dead letters back to the topic they were first produced to (same message id).
    Redrive {
        #[arg(long)]
        group: String,
        /// The dead letter to redrive.
        #[arg(long, conflicts_with = "all", required_unless_present = "all")]
        offset: Option<u64>,
        /// Every dead letter of the group.
        #[arg(long)]
        all: bool,
        #[command(flatten)]
        broker: BrokerArg,
    },
}

/// Flags of `ringmq serve`; each may also come from the --config file (a flag wins).
#[derive(Args, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ServeArgs {
    /// TOML file with any of these settings (keys as the flags, with _ for -).
    #[arg(long)]
    #[serde(skip)]
    config: Option<PathBuf>,
    /// Data directory (shard N keeps its files in DIR/shard-N)
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// CPUs to run shards on, e.g. 0,1
    #[arg(long, value_delimiter = ',')]
    cores: Option<Vec<usize>>,
    /// Address of shard 0; shard N listens on port + N (port 0: ephemeral ports)
    #[arg(long)]
    listen: Option<std::net::SocketAddr>,
    /// Default flush policy of new topics
    #[arg(long, value_enum)]
    flush: Option<Flush>,
    /// Commit log segment size, MiB
    #[arg(long)]
    segment_mib: Option<u64>,
    /// User-space cache per shard, MiB
    #[arg(long)]
    cache_mib: Option<usize>,
    /// Durable log writes in flight per shard (1: one at a time)
    #[arg(long)]
    flush_depth: Option<usize>,
    /// While durable writes are in flight, yield the shard's core to the kernel's completion work every this many microseconds (0: never)
    #[arg(long)]
    completion_yield_us: Option<u64>,
    /// How long an idle shard polls for work before its thread sleeps, microseconds: lower wake-up latency for CPU spent idle (0 on shared hosts and for several brokers on one machine)
    #[arg(long)]
    idle_spin_us: Option<u64>,
    /// Largest request frame, bytes, checked before the frame is read
    #[arg(long)]
    max_frame_bytes: Option<usize>,
    /// Largest record batch, bytes
    #[arg(long)]
    max_batch_bytes: Option<usize>,
    /// Client connections per shard, over its native and Kafka listeners
    #[arg(long)]
    max_connections: Option<usize>,
    /// Connections from one client address to the node, over both listeners (0: no limit)
    #[arg(long)]
    max_connections_per_ip: Option<usize>,
    /// Requests in flight per connection, for produces and for the rest each, before the broker stops reading it
    #[arg(long)]
    max_inflight_per_connection: Option<usize>,
    /// Bytes of requests one connection may have read and not yet answered before the broker stops reading it (at least --max-frame-bytes)
    #[arg(long)]
    max_request_bytes_per_connection: Option<usize>,
    /// Bytes of requests a shard's connections may hold together before the shard stops reading them (at least the per-connection bound)
    #[arg(long)]
    max_request_bytes_per_shard: Option<usize>,
    /// Longest long-poll wait (Fetch, FetchMany, PollChecks) a client may ask for, ms; more is refused
    #[arg(long)]
    max_fetch_wait_ms: Option<u64>,
    /// Longest group wait (heartbeat park, rebalance and session timeouts) a client may ask for, ms; more is refused
    #[arg(long)]
    max_group_wait_ms: Option<u64>,
    /// A shard thread held this many ms is a stall: counted by cause, and logged with where the thread was (0: not watched)
    #[arg(long)]
    stall_threshold_ms: Option<u64>,
    /// How long a shard's task queue runs before its tasks are asked to yield, ms
    #[arg(long)]
    task_quota_ms: Option<u64>,
    /// Serve the Kafka protocol too: shard 0 on this address, shard N on its port + N (first step: ApiVersions, Metadata)
    #[arg(long)]
    kafka_listen: Option<std::net::SocketAddr>,
    /// Serve the admin HTTP listener on this address (shard 0): /metrics and /public_metrics (Prometheus), /healthz, /readyz, the web console at /
    #[arg(long)]
    admin_listen: Option<std::net::SocketAddr>,
    /// Trace every message of these topics (comma-separated; * for all): send, store, deliver, commit, retry, dead-letter events in topic %TRACE; `ringmq trace ID` prints them
    #[arg(long)]
    trace_topics: Option<String>,
    /// Also trace this fraction (0..1) of every topic's messages, picked by message id
    #[arg(long)]
    trace_sample_rate: Option<f64>,
    /// Batches each shard remembers so that a client's retry of one (the same bytes) is answered with where it was stored, not stored twice (0: off)
    #[arg(long)]
    idempotence_window: Option<usize>,
    /// Delete log segments older than this many hours
    #[arg(long)]
    retention_hours: Option<u64>,
    /// Keep at most this many GiB of log per shard
    #[arg(long)]
    retention_gib: Option<u64>,
    /// Segment files retention keeps per shard to recycle as new segments (a rename, no zero-fill) instead of deleting them; each takes a segment of disk
    #[arg(long)]
    segment_pool: Option<usize>,
    /// Delays of the 18 delay levels (retries use levels 3-18), e.g. "1s 5s 10s 30s 1m ..."
    #[arg(long)]
    delay_levels: Option<String>,
    /// Time moves only through the AdvanceClock API: for tests of retries and delays.
    #[arg(long)]
    #[serde(default)]
    manual_clock: bool,
    /// Join a cluster whose control plane is this etcd (etcd://host:port[,host:port]); off: a single node.
    #[arg(long)]
    cluster: Option<String>,
    /// With --cluster: the broker group this node belongs to.
    #[arg(long, requires = "cluster")]
    broker_group: Option<String>,
    /// The old name of --broker-group (accepted with a warning until the next release).
    #[arg(long, requires = "cluster", hide = true)]
    group: Option<String>,
    /// With --cluster: this node's name, unique in its group.
    #[arg(long, requires = "cluster")]
    node: Option<String>,
    /// With --cluster: the address others reach shard 0 on (default: the address it listens on).
    #[arg(long, requires = "cluster")]
    advertise: Option<String>,
    /// With --cluster: a node that stops renewing its etcd lease for this long is gone, ms.
    #[arg(long, requires = "cluster")]
    lease_ms: Option<u64>,
    /// With --cluster: when a produce is acknowledged: sync (once min-insync replicas hold it durably) or async (once the leader does).
    #[arg(long, requires = "cluster")]
    replication: Option<Replication>,
    /// With --cluster and sync replication: replicas, the leader counted, that must hold a produce durably.
    #[arg(long, requires = "cluster")]
    min_insync: Option<usize>,
    /// With --cluster: a follower that has not fetched for this long leaves the in-sync set, ms.
    #[arg(long, requires = "cluster")]
    replica_lag_ms: Option<u64>,
    /// With --cluster and sync replication: longest a produce waits for its replicas, ms.
    #[arg(long, requires = "cluster")]
    replica_ack_timeout_ms: Option<u64>,
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
    #[arg(long, value_enum)]
    tls_client_auth: Option<TlsClientAuth>,
    /// Clients must authenticate (SASL, or a client certificate --tls-ca signed: its CN is the user) before any request but ApiVersions
    #[arg(long)]
    #[serde(default)]
    auth_required: bool,
    /// SASL mechanisms offered (PLAIN only over TLS)
    #[arg(long, value_delimiter = ',')]
    sasl_mechanisms: Option<Vec<String>>,
    /// Users every operation is allowed to
    #[arg(long, value_delimiter = ',')]
    super_users: Option<Vec<String>>,
    /// Seal every stored batch with AES-256-GCM under the newest of these data keys (a file of `ID HEX` lines; or $RINGMQ_ENCRYPTION_KEYS holds them)
    #[arg(long)]
    encryption_keys: Option<PathBuf>,
}

/// `--tls-client-auth`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, serde::Deserialize)]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
enum Replication {
    Sync,
    Async,
}

/// Replicas that hold a sync produce durably by default (the leader and one follower).
const DEFAULT_MIN_INSYNC: usize = 2;
/// A follower that has not fetched for this long leaves the in-sync set.
const REPLICA_LAG_MAX: Duration = Duration::from_secs(10);
/// Longest a sync produce waits for its followers.
const REPLICA_ACK_TIMEOUT: Duration = Duration::from_secs(10);

impl ServeArgs {
    /// The cluster this node joins, if any (an empty `advertise`: shard 0's address, once bound).
    fn cluster(&self, file: &ServeArgs) -> Result<Option<ringmq::cluster::ClusterConfig>, String> {
        let Some(url) = self.cluster.clone().or(file.cluster.clone()) else { return Ok(None) };
        let needed = |flag: Option<String>, name: &str| flag.ok_or_else(|| format!("--cluster needs --{name}"));
        Ok(Some(ringmq::cluster::ClusterConfig {
            endpoints: ringmq::cluster::parse_endpoints(&url)?,
            broker_group: needed(
                broker_group(self.broker_group.clone(), self.group.clone())
                    .or(broker_group(file.broker_group.clone(), file.group.clone())),
                "broker-group",
            )?,
            node: needed(self.node.clone().or(file.node.clone()), "node")?,
            advertise: self.advertise.clone().or(file.advertise.clone()).unwrap_or_default(),
            lease_ttl: self
                .lease_ms
                .or(file.lease_ms)
                .map_or(ringmq::cluster::DEFAULT_LEASE_TTL, Duration::from_millis),
            shards: 0,
        }))
    }

    /// How the node's broker group replicates (cluster mode).
    fn replication(&self, file: &ServeArgs) -> server::ReplicationConfig {
        let mode = match self.replication.or(file.replication).unwrap_or(Replication::Sync) {
            Replication::Sync => server::ReplicationMode::Sync,
            Replication::Async => server::ReplicationMode::Async,
        };
        server::ReplicationConfig {
            mode,
            min_insync: self.min_insync.or(file.min_insync).unwrap_or(DEFAULT_MIN_INSYNC),
            lag_max: self.replica_lag_ms.or(file.replica_lag_ms).map_or(REPLICA_LAG_MAX, Duration::from_millis),
            ack_timeout: self
                .replica_ack_timeout_ms
                .or(file.replica_ack_timeout_ms)
                .map_or(REPLICA_ACK_TIMEOUT, Duration::from_millis),
        }
    }

    /// The settings file named by --config, or none.
    fn file(&self) -> Result<ServeArgs, String> {
        match &self.config {
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
                toml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
            }
            None => Ok(ServeArgs::default()),
        }
    }
}

impl ServeArgs {
    /// Flags over the config file (`file`, from --config) over the defaults.
    fn resolve(self, file: ServeArgs) -> Result<ServerConfig, String> {
        let data_dir = self.data_dir.or(file.data_dir).unwrap_or_else(|| PathBuf::from(config::DEFAULT_DATA_DIR));
        let mut cfg = ServerConfig::new(data_dir);
        if let Some(cores) = self.cores.or(file.cores) {
            cfg.cores = cores;
        }
        if let Some(listen) = self.listen.or(file.listen) {
            cfg.listen = listen;
        }
        if let Some(Flush::Async) = self.flush.or(file.flush) {
            cfg.default_flush = ringmq::shards::FlushPolicy::Async;
        }
        cfg.segment_bytes =
            self.segment_mib.or(file.segment_mib).map_or(cfg.segment_bytes, |m| m.saturating_mul(1 << 20));
        cfg.cache_bytes = self.cache_mib.or(file.cache_mib).map_or(cfg.cache_bytes, |m| m.saturating_mul(1 << 20));
        cfg.flush_depth = self.flush_depth.or(file.flush_depth).unwrap_or(cfg.flush_depth);
        if cfg.flush_depth == 0 {
            return Err("--flush-depth must be at least 1".into());
        }
        if let Some(us) = self.completion_yield_us.or(file.completion_yield_us) {
            cfg.completion_yield = Duration::from_micros(us);
        }
        if let Some(us) = self.idle_spin_us.or(file.idle_spin_us) {
            cfg.idle_spin = Duration::from_micros(us);
        }
        cfg.max_frame_bytes = self.max_frame_bytes.or(file.max_frame_bytes).unwrap_or(cfg.max_frame_bytes);
        cfg.max_batch_bytes = self.max_batch_bytes.or(file.max_batch_bytes).unwrap_or(cfg.max_batch_bytes);
        cfg.max_connections = self.max_connections.or(file.max_connections).unwrap_or(cfg.max_connections);
        cfg.max_connections_per_ip =
            self.max_connections_per_ip.or(file.max_connections_per_ip).unwrap_or(cfg.max_connections_per_ip);
        cfg.kafka_listen = self.kafka_listen.or(file.kafka_listen);
        cfg.admin_listen = self.admin_listen.or(file.admin_listen);
        let trace_topics = self.trace_topics.clone().or(file.trace_topics.clone()).unwrap_or_default();
        let sample_rate = self.trace_sample_rate.or(file.trace_sample_rate).unwrap_or(0.0);
        cfg.trace = server::TraceConfig::new(&trace_topics, sample_rate).map_err(|e| e.to_string())?;
        cfg.idempotence_window = self.idempotence_window.or(file.idempotence_window).unwrap_or(cfg.idempotence_window);
        let millis = |flag: Option<u64>, file: Option<u64>, default: Duration| {
            flag.or(file).map_or(default, Duration::from_millis)
        };
        cfg.max_fetch_wait = millis(self.max_fetch_wait_ms, file.max_fetch_wait_ms, cfg.max_fetch_wait);
        cfg.max_group_wait = millis(self.max_group_wait_ms, file.max_group_wait_ms, cfg.max_group_wait);
        cfg.stall_threshold = millis(self.stall_threshold_ms, file.stall_threshold_ms, cfg.stall_threshold);
        cfg.task_quota = millis(self.task_quota_ms, file.task_quota_ms, cfg.task_quota);
        if cfg.task_quota.is_zero() {
            return Err("--task-quota-ms must be at least 1".into());
        }
        cfg.max_inflight_per_connection = self
            .max_inflight_per_connection
            .or(file.max_inflight_per_connection)
            .unwrap_or(cfg.max_inflight_per_connection);
        cfg.max_request_bytes_per_connection = self
            .max_request_bytes_per_connection
            .or(file.max_request_bytes_per_connection)
            .unwrap_or(cfg.max_request_bytes_per_connection);
        cfg.max_request_bytes_per_shard = self
            .max_request_bytes_per_shard
            .or(file.max_request_bytes_per_shard)
            .unwrap_or(cfg.max_request_bytes_per_shard);
        if cfg.max_request_bytes_per_connection < cfg.max_frame_bytes {
            return Err(format!(
                "--max-request-bytes-per-connection {} is below --max-frame-bytes {}: the largest request could never be read",
                cfg.max_request_bytes_per_connection, cfg.max_frame_bytes
            ));
        }
        if cfg.max_request_bytes_per_shard < cfg.max_request_bytes_per_connection {
            return Err(format!(
                "--max-request-bytes-per-shard {} is below --max-request-bytes-per-connection {}",
                cfg.max_request_bytes_per_shard, cfg.max_request_bytes_per_connection
            ));
        }
        cfg.retention_age =
            self.retention_hours.or(file.retention_hours).map(|h| Duration::from_secs(h.saturating_mul(3600)));
        cfg.retention_bytes = self.retention_gib.or(file.retention_gib).map(|g| g.saturating_mul(1 << 30));
        cfg.segment_pool_max = self.segment_pool.or(file.segment_pool).unwrap_or(cfg.segment_pool_max);
        if let Some(levels) = self.delay_levels.or(file.delay_levels) {
            cfg.delay_levels = parse_delay_levels(&levels)?;
        }
        cfg.manual_clock = self.manual_clock || file.manual_clock;
        cfg.tls = server_tls(
            self.tls_cert.or(file.tls_cert),
            self.tls_key.or(file.tls_key),
            self.tls_ca.or(file.tls_ca),
            self.tls_client_auth.or(file.tls_client_auth),
        )?;
        cfg.auth.required = self.auth_required || file.auth_required;
        if let Some(names) = self.sasl_mechanisms.or(file.sasl_mechanisms) {
            cfg.auth.mechanisms = names
                .iter()
                .map(|n| {
                    SaslMechanism::from_name(n).ok_or_else(|| {
                        format!("--sasl-mechanisms: {n:?} is not one of SCRAM-SHA-256, SCRAM-SHA-512, PLAIN")
                    })
                })
                .collect::<Result<_, _>>()?;
        }
        cfg.auth.super_users = self.super_users.or(file.super_users).unwrap_or_default();
        cfg.encryption = data_keys(self.encryption_keys.or(file.encryption_keys))?;
        admin_apart(&cfg)?;
        Ok(cfg)
    }
}

/// The data keys from --encryption-keys, else from $RINGMQ_ENCRYPTION_KEYS (None: neither).
fn data_keys(file: Option<PathBuf>) -> Result<Option<std::sync::Arc<Keyring>>, String> {
    let text = match file {
        Some(path) => std::fs::read_to_string(&path).map_err(|e| format!("reading {}: {e}", path.display()))?,
        None => match std::env::var("RINGMQ_ENCRYPTION_KEYS") {
            Ok(text) => text,
            Err(_) => return Ok(None),
        },
    };
    Keyring::parse(&text).map(|k| Some(std::sync::Arc::new(k))).map_err(|e| format!("the data keys: {e}"))
}

/// The broker's TLS, loaded (None without a certificate).
fn server_tls(
    cert: Option<PathBuf>,
    key: Option<PathBuf>,
    ca: Option<PathBuf>,
    auth: Option<TlsClientAuth>,
) -> Result<Option<ServerTls>, String> {
    use ringmq::security::tls::ClientAuth;
    let client_auth = match auth.unwrap_or(TlsClientAuth::None) {
        TlsClientAuth::None => ClientAuth::None,
        TlsClientAuth::Optional => ClientAuth::Optional,
        TlsClientAuth::Required => ClientAuth::Required,
    };
    let (cert, key) = match (cert, key) {
        (Some(cert), Some(key)) => (cert, key),
        (None, None) if client_auth == ClientAuth::None => return Ok(None),
        _ => return Err("TLS needs both --tls-cert and --tls-key".into()),
    };
    let files = ringmq::security::tls::ServerFiles { cert, key, ca, client_auth };
    ServerTls::load(files).map(Some).map_err(|e| format!("TLS: {e}"))
}

/// 18 durations separated by spaces or commas, each at least the one before.
fn parse_delay_levels(text: &str) -> Result<Vec<Duration>, String> {
    let levels: Vec<Duration> = text
        .split([' ', ','])
        .filter(|t| !t.is_empty())
        .map(ringmq::duration::parse_duration)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("--delay-levels: {e}"))?;
    if levels.len() != 18 || levels.windows(2).any(|w| w[0] > w[1]) {
        return Err(format!("--delay-levels: expected 18 non-decreasing durations, got {text:?}"));
    }
    Ok(levels)
}

#[derive(Args)]
struct DoctorArgs {
    /// Data directory to check for O_DIRECT and fallocate.
    #[arg(long, default_value = config::DEFAULT_DATA_DIR)]
    data_dir: PathBuf,
    /// CPUs the broker would run on [default: all].
    #[arg(long, value_delimiter = ',')]
    cores: Vec<usize>,
    /// Connections per shard to size the open-file limit for.
    #[arg(long, default_value_t = ServerConfig::new(config::DEFAULT_DATA_DIR).max_connections)]
    max_connections: usize,
    /// Segment size the broker would use, MiB (for the free-space check).
    #[arg(long, default_value_t = ServerConfig::new(config::DEFAULT_DATA_DIR).segment_bytes >> 20)]
    segment_mib: u64,
    /// Size retention per shard the broker would use, GiB [default: none].
    #[arg(long)]
    retention_gib: Option<u64>,
    /// Segment files per shard the broker would keep for recycling.
    #[arg(long, default_value_t = ringmq_shards::config::SEGMENT_POOL_MAX)]
    segment_pool: usize,
}

#[derive(Clone, Copy, ValueEnum, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
enum Flush {
    /// Acknowledge after fdatasync.
    Sync,
    /// Acknowledge when queued; flush by interval and size.
    Async,
}

#[derive(Args, Clone)]
struct BrokerArg {
    /// Any shard's address.
    #[arg(long, default_value = "127.0.0.1:9292")]
    broker: String,
    /// Connect with TLS.
    #[arg(long)]
    tls: bool,
    /// The CA (PEM) that signs the broker's certificate (implies --tls) [default: the system's roots]
    #[arg(long)]
    tls_ca: Option<PathBuf>,
    /// A client certificate to present, PEM (implies --tls)
    #[arg(long, requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert, PEM
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Log in as this user (SASL); the password is the first line of --password-file, or $RINGMQ_PASSWORD
    #[arg(long)]
    user: Option<String>,
    #[arg(long, requires = "user")]
    password_file: Option<PathBuf>,
    /// SCRAM-SHA-256, SCRAM-SHA-512, or PLAIN (only over TLS)
    #[arg(long, default_value = "SCRAM-SHA-256", requires = "user")]
    sasl_mechanism: String,
}

impl BrokerArg {
    /// The client's settings: the broker and its TLS.
    fn client_config(&self) -> Result<ClientConfig, String> {
        let mut config = ClientConfig::new(&self.broker);
        if self.tls || self.tls_ca.is_some() || self.tls_cert.is_some() {
            let files = ClientFiles { ca: self.tls_ca.clone(), cert: self.tls_cert.clone(), key: self.tls_key.clone() };
            config.tls = Some(ClientTls::load(&files).map_err(|e| format!("TLS: {e}"))?);
        }
        if let Some(user) = &self.user {
            let mechanism = SaslMechanism::from_name(&self.sasl_mechanism).ok_or_else(|| {
                format!("--sasl-mechanism {:?}: SCRAM-SHA-256, SCRAM-SHA-512 or PLAIN", self.sasl_mechanism)
            })?;
            config.sasl = Some(SaslLogin::new(mechanism, user, self.password()?));
        }
        Ok(config)
    }

    /// The login password: the first line of --password-file, else $RINGMQ_PASSWORD.
    fn password(&self) -> Result<String, String> {
        read_password(self.password_file.as_deref())
    }
}

/// Refuses an admin address that is one of the shards' listen addresses:
/// glommio binds with SO_REUSEPORT, so both would bind and the kernel would
/// split a port's connections between the broker and the admin listener.
fn admin_apart(cfg: &ServerConfig) -> Result<(), String> {
    let Some(admin) = cfg.admin_listen else { return Ok(()) };
    let shards = cfg.cores.len() as u16;
    let clashes = |base: std::net::SocketAddr| {
        base.port() != 0
            && base.ip() == admin.ip()
            && (base.port()..base.port().saturating_add(shards)).contains(&admin.port())
    };
    if clashes(cfg.listen) || cfg.kafka_listen.is_some_and(clashes) {
        return Err(format!(
            "--admin-listen {admin} is one of the shards' listen addresses (port + shard): choose another port"
        ));
    }
    Ok(())
}

/// A user's password: the first line of `file`, or $RINGMQ_PASSWORD.
fn read_password(file: Option<&std::path::Path>) -> Result<String, String> {
    match file {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
            Ok(text.lines().next().unwrap_or_default().to_string())
        }
        None => std::env::var("RINGMQ_PASSWORD")
            .map_err(|_| "--user needs a password: --password-file FILE or RINGMQ_PASSWORD".to_string()),
    }
}

#[derive(Subcommand)]
enum TopicAction {
    /// Create a topic.
    Create {
        name: String,
        /// Number of queues (spread over all shards).
        #[arg(long, default_value_t = 8)]
        queues: u32,
        #[arg(long, value_enum, default_value_t = Flush::Sync)]
        flush: Flush,
        #[command(flatten)]
        broker: BrokerArg,
    },
    /// List topic names.
    List {
        #[command(flatten)]
        broker: BrokerArg,
    },
    /// Show a topic's queues, owning shards and offsets.
    Describe {
        name: String,
        #[command(flatten)]
        broker: BrokerArg,
    },
    /// Delete a topic.
    Delete {
        name: String,
        #[command(flatten)]
        broker: BrokerArg,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum Mode {
    /// Wait for each message to be durable.
    Sync,
    /// Batch and pipeline; wait for all at the end.
    Async,
    /// No acknowledgement.
    Oneway,
}

#[derive(Args)]
struct ProduceArgs {
    topic: String,
    /// Key of every message (messages with a key go to the queue its hash picks).
    #[arg(long)]
    key: Option<String>,
    /// Tag of every message.
    #[arg(long)]
    tag: Option<String>,
    /// Header name=value, repeatable.
    #[arg(long = "header", value_parser = parse_header)]
    headers: Vec<(String, String)>,
    #[arg(long, value_enum, default_value_t = Mode::Sync)]
    mode: Mode,
    #[command(flatten)]
    broker: BrokerArg,
}

#[derive(Args)]
struct ConsumeArgs {
    topic: String,
    /// earliest, latest, committed, or an offset.
    #[arg(long, default_value = "earliest")]
    from: String,
    /// Consumer group: start from and commit its offsets.
    #[arg(long)]
    group: Option<String>,
    /// Join the group as a member (its queues come from rebalancing; a new
    /// group starts as --from says, earliest or latest) instead of reading
    /// every queue.
    #[arg(long, requires = "group")]
    subscribe: bool,
    /// Only messages whose tag matches: `*` or tags joined by `||` (the broker filters).
    #[arg(long, default_value = "*")]
    tags: String,
    /// Stop after this many messages.
    #[arg(long)]
    count: Option<u64>,
    /// Stop after this many milliseconds without a message.
    #[arg(long)]
    idle_exit_ms: Option<u64>,
    /// Read on past batches the broker finds damaged (CorruptData) instead of
    /// stopping at them; each skip is logged and the total printed at the end.
    #[arg(long)]
    skip_corrupt: bool,
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    #[command(flatten)]
    broker: BrokerArg,
}

#[derive(Clone, Copy, ValueEnum)]
enum Format {
    /// The value, one per line.
    Text,
    /// One JSON object per line.
    Json,
}

fn parse_header(s: &str) -> Result<(String, String), String> {
    s.split_once('=')
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .ok_or_else(|| format!("header {s:?} is not name=value"))
}

/// What `ringmq serve` uses for each flag it is not given, from
/// `ServerConfig::new`: the one place defaults are set.
fn serve_defaults() -> Vec<(&'static str, String)> {
    let d = ServerConfig::new(config::DEFAULT_DATA_DIR);
    let ms = |t: Duration| t.as_millis().to_string();
    let flush = if d.default_flush == ringmq::shards::FlushPolicy::Async { "async" } else { "sync" };
    let levels: Vec<String> = d.delay_levels.iter().map(|l| ringmq::duration::format_duration(*l)).collect();
    vec![
        ("data_dir", config::DEFAULT_DATA_DIR.to_string()),
        ("cores", "all".to_string()),
        ("listen", d.listen.to_string()),
        ("flush", flush.to_string()),
        ("segment_mib", (d.segment_bytes >> 20).to_string()),
        ("cache_mib", (d.cache_bytes >> 20).to_string()),
        ("flush_depth", d.flush_depth.to_string()),
        ("completion_yield_us", d.completion_yield.as_micros().to_string()),
        ("idle_spin_us", d.idle_spin.as_micros().to_string()),
        ("max_frame_bytes", d.max_frame_bytes.to_string()),
        ("max_batch_bytes", d.max_batch_bytes.to_string()),
        ("max_connections", d.max_connections.to_string()),
        ("max_connections_per_ip", d.max_connections_per_ip.to_string()),
        ("max_inflight_per_connection", d.max_inflight_per_connection.to_string()),
        ("max_request_bytes_per_connection", d.max_request_bytes_per_connection.to_string()),
        ("max_request_bytes_per_shard", d.max_request_bytes_per_shard.to_string()),
        ("max_fetch_wait_ms", ms(d.max_fetch_wait)),
        ("max_group_wait_ms", ms(d.max_group_wait)),
        ("stall_threshold_ms", ms(d.stall_threshold)),
        ("task_quota_ms", ms(d.task_quota)),
        ("idempotence_window", d.idempotence_window.to_string()),
        ("retention_hours", d.retention_age.map_or("keep".into(), |a| (a.as_secs() / 3600).to_string())),
        ("retention_gib", d.retention_bytes.map_or("no limit".into(), |b| (b >> 30).to_string())),
        ("segment_pool", d.segment_pool_max.to_string()),
        ("delay_levels", format!("RocketMQ's, {}", levels.join(" "))),
    ]
}

/// The command line, with `serve`'s defaults appended to its flags' help.
fn cli() -> clap::Command {
    Cli::command().mut_subcommand("serve", |serve| {
        serve_defaults().into_iter().fold(serve, |serve, (id, default)| {
            serve.mut_arg(id, |arg| {
                let help = arg.get_help().map(ToString::to_string).unwrap_or_default();
                arg.help(format!("{help} [default: {default}]"))
            })
        })
    })
}

fn main() -> ExitCode {
    server::bound_large_allocations();
    let cli = match Cli::from_arg_matches(&cli().get_matches()) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()))
        .init();
    let result = match cli.command {
        Command::Serve(a) => serve(*a),
        Command::Topic { action } => topic(action),
        Command::Produce(a) => produce(a),
        Command::Consume(a) => consume(a),
        Command::Doctor(a) => doctor(a),
        Command::Message { action } => message(action),
        Command::Dlq { action } => dlq(action),
        Command::Cluster { action } => cluster(action),
        Command::User { action } => cli::users::run(action),
        Command::Acl { action } => cli::acls::run(action),
        Command::Quota { action } => cli::quotas::run(action),
        Command::Group { action } => cli::groups::run(action),
        Command::Trace(args) => cli::trace::run(args),
        Command::Top(args) => cli::top::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}

fn serve(a: ServeArgs) -> Result<(), String> {
    let file = a.file()?;
    let cluster = a.cluster(&file)?;
    let replication = a.replication(&file);
    let cfg = a.resolve(file)?;
    let failed: Vec<_> = ringmq::doctor::run(&cfg.data_dir, &cfg.cores, cfg.max_connections, disk_needs(&cfg))
        .into_iter()
        .filter(|c| !c.ok)
        .collect();
    if !failed.is_empty() {
        let lines: Vec<String> = failed.iter().map(|c| format!("  {}: {}", c.name, c.detail)).collect();
        return Err(format!("this host cannot run the broker (see `ringmq doctor`):\n{}", lines.join("\n")));
    }
    match cluster {
        None => serve_single(cfg),
        Some(c) => serve_in_cluster(cfg, c, replication),
    }
}

/// A single node: serves until a signal.
fn serve_single(cfg: ServerConfig) -> Result<(), String> {
    let cfg_tls = cfg.tls.clone();
    let server = server::start(cfg).map_err(|e| e.to_string())?;
    // Installed once serving: until then a signal ends the process at once
    // (start-up writes nothing a crash would not also leave).
    let mut signals =
        Signals::new([SIGINT, SIGTERM, SIGHUP]).map_err(|e| format!("installing signal handlers: {e}"))?;
    let addrs: Vec<String> = server.addrs.iter().map(|a| a.to_string()).collect();
    println!("ringmq listening on {} (shards: {})", addrs[0], addrs.join(" "));
    std::io::stdout().flush().map_err(|e| e.to_string())?;
    let signal = signals.forever().find(|&signal| signal != SIGHUP || !reload_tls(&cfg_tls));
    eprintln!("ringmq: shutting down (signal {})", signal.unwrap_or_default());
    server.stop();
    Ok(())
}

/// SIGHUP: the TLS files read again (new connections use them, those up
/// keep theirs); true, so the broker serves on either way.
fn reload_tls(tls: &Option<ServerTls>) -> bool {
    match tls {
        None => eprintln!("ringmq: SIGHUP: no TLS to reload"),
        Some(tls) => match tls.reload() {
            Ok(()) => eprintln!("ringmq: SIGHUP: TLS certificate and key reloaded"),
            Err(e) => eprintln!("ringmq: SIGHUP: TLS not reloaded, the files in use stay: {e}"),
        },
    }
    true
}

/// Why a cluster node's server stops.
/// A cluster node's shards, started in each role `ringmq::cluster::node::serve` gives them.
struct BrokerData {
    cfg: ServerConfig,
    /// What every role shares (group, node, replication, links); `lead` and `epoch` change.
    base: server::ClusterRole,
    server: Option<server::Server>,
    /// The role the shards serve in, as the listening line names it.
    role: String,
}

impl ringmq::cluster::node::Data for BrokerData {
    fn shards(&self) -> usize {
        self.cfg.cores.len()
    }

    fn last_epoch(&self) -> Result<u64, ringmq::cluster::node::DataError> {
        Ok(ringmq::cluster::local_epoch::load(&self.cfg.data_dir)?)
    }

    fn start(&mut self, epoch: u64, role: Role) -> Result<Vec<u64>, ringmq::cluster::node::DataError> {
        let (lead, named) = match role {
            Role::Leader => (server::Lead::Leader, "leader".to_string()),
            Role::Follower { leader, cuts } => {
                let addr = leader
                    .advertise
                    .parse()
                    .map_err(|e| format!("the leader's address {:?}: {e}", leader.advertise))?;
                let named = format!("follower of {}", leader.node);
                (server::Lead::Follower { leader: leader.node, addr, cuts }, named)
            }
        };
        let mut cfg = self.cfg.clone();
        cfg.cluster = Some(server::ClusterRole { epoch, lead, ..self.base.clone() });
        let server = server::start(cfg)?;
        let log_ends = server.log_ends.clone();
        self.server = Some(server);
        self.role = format!("{named} in epoch {epoch}");
        Ok(log_ends)
    }

    fn serving(&mut self) {
        let Some(server) = &self.server else { return };
        let addrs: Vec<String> = server.addrs.iter().map(|a| a.to_string()).collect();
        // Whoever started the node may have stopped reading (a closed pipe is no reason to stop).
        let mut out = std::io::stdout();
        let _ = writeln!(out, "ringmq listening on {} (shards: {}) as {}", addrs[0], addrs.join(" "), self.role);
        let _ = out.flush();
    }

    fn store_epoch(&mut self, epoch: u64) -> Result<(), ringmq::cluster::node::DataError> {
        Ok(ringmq::cluster::local_epoch::store(&self.cfg.data_dir, epoch)?)
    }

    fn stop(&mut self) {
        if let Some(server) = self.server.take() {
            server.stop();
        }
    }
}

/// A cluster node: registers, then serves in the role each election gives
/// it, starting over in a new role whenever the control plane says the old
/// one is lost, until a signal.
fn serve_in_cluster(
    cfg: ServerConfig,
    mut c: ringmq::cluster::ClusterConfig,
    replication: server::ReplicationConfig,
) -> Result<(), String> {
    use ringmq::cluster::node::Wake;
    if cfg.listen.port() == 0 {
        return Err("cluster mode needs a fixed --listen port: followers reach shard k at its port + k".into());
    }
    if c.advertise.is_empty() {
        if cfg.listen.ip().is_unspecified() {
            return Err(format!("--listen {} is every address: name the one peers reach with --advertise", cfg.listen));
        }
        c.advertise = cfg.listen.to_string();
    }
    let (wake, mut woken) = tokio::sync::mpsc::unbounded_channel();
    let lost = wake.clone();
    let on_lost: ringmq::cluster::OnLost = Box::new(move |why| {
        let _ = lost.send(Wake::RoleLost(why));
    });
    let (group, node) = (c.broker_group.clone(), c.node.clone());
    c.shards = cfg.cores.len();
    let control = ringmq::cluster::ControlPlane::start(c, on_lost).map_err(|e| e.to_string())?;
    let isr = control.isr_link();
    let mut signals =
        Signals::new([SIGINT, SIGTERM, SIGHUP]).map_err(|e| format!("installing signal handlers: {e}"))?;
    let tls = cfg.tls.clone();
    std::thread::Builder::new()
        .name("ringmq-signals".into())
        .spawn(move || {
            for signal in signals.forever().filter(|&signal| signal != SIGHUP || !reload_tls(&tls)) {
                let _ = wake.send(Wake::Stop(format!("signal {signal}")));
            }
        })
        .map_err(|e| format!("starting the signal thread: {e}"))?;
    let base = server::ClusterRole {
        broker_group: group,
        node: node.clone(),
        epoch: 0,
        replication,
        lead: server::Lead::Leader,
        isr,
        placement: control.placement_link(),
        accounts: control.accounts_link(),
    };
    let mut data = BrokerData { cfg, base, server: None, role: String::new() };
    // The node's life is a few awaits on the control plane: a runtime of its own on this thread.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .map_err(|e| format!("starting the node's runtime: {e}"))?;
    let result = runtime.block_on(ringmq::cluster::node::serve(&control, &node, &mut data, &mut woken));
    control.stop();
    result.map_err(|e| e.to_string())
}

/// The broker group `--broker-group` names, or the old `--group` (warned:
/// "group" alone means a consumer group everywhere else).
fn broker_group(named: Option<String>, old: Option<String>) -> Option<String> {
    if old.is_some() && named.is_none() {
        eprintln!("warning: --group (and `group` in a config file) is the old name of --broker-group; it goes in the next release");
    }
    named.or(old)
}

fn cluster(action: ClusterAction) -> Result<(), String> {
    let (cluster, format) = match action {
        ClusterAction::Status { cluster, format } => (cluster, format),
        ClusterAction::TransferLeader { cluster, broker_group: named, group: old, to, wait_ms } => {
            let group = broker_group(named, old).ok_or("--broker-group names the broker group")?;
            let endpoints = ringmq::cluster::parse_endpoints(&cluster)?;
            let wait = Duration::from_millis(wait_ms);
            let leader =
                ringmq::cluster::transfer_leader(&endpoints, &group, to.as_deref(), wait).map_err(|e| e.to_string())?;
            println!("broker_group={group} leader={} epoch={}", leader.node, leader.epoch);
            return Ok(());
        }
    };
    let endpoints = ringmq::cluster::parse_endpoints(&cluster)?;
    let nodes = ringmq::cluster::list_nodes(&endpoints).map_err(|e| e.to_string())?;
    for n in &nodes {
        match format {
            Format::Text => {
                println!(
                    "broker_group={} node={} advertise={} lease={:x}",
                    n.broker_group, n.node, n.advertise, n.lease
                )
            }
            Format::Json => println!("{}", n.to_json()),
        }
    }
    if nodes.is_empty() {
        eprintln!("no node is registered");
    }
    for g in ringmq::cluster::list_groups(&endpoints).map_err(|e| e.to_string())? {
        match format {
            Format::Text => {
                let (leader, epoch) = g.leader.as_ref().map_or(("-", 0), |l| (l.node.as_str(), l.epoch));
                let isr = g.isr.as_ref().map(|i| i.members.iter().cloned().collect::<Vec<_>>().join(","));
                println!(
                    "broker_group={} leader={leader} epoch={epoch} isr={}",
                    g.broker_group,
                    isr.unwrap_or_default()
                );
                for (follower, lag) in &g.lags {
                    let (bytes, ms) = (lag.lag_bytes, lag.since_fetch_ms);
                    println!(
                        "broker_group={} follower={follower} lag_bytes={bytes} since_fetch_ms={ms}",
                        g.broker_group
                    );
                }
            }
            Format::Json => println!("{}", serde_json::to_string(&g).expect("a group serializes")),
        }
    }
    Ok(())
}

fn disk_needs(cfg: &ServerConfig) -> ringmq::doctor::DiskNeeds {
    ringmq::doctor::DiskNeeds {
        segment_bytes: cfg.segment_bytes,
        retention_bytes: cfg.retention_bytes,
        pooled_segments: cfg.segment_pool_max as u64,
    }
}

fn doctor(a: DoctorArgs) -> Result<(), String> {
    let cores = if a.cores.is_empty() { ServerConfig::new(&a.data_dir).cores } else { a.cores };
    let disk = ringmq::doctor::DiskNeeds {
        segment_bytes: a.segment_mib.saturating_mul(1 << 20),
        retention_bytes: a.retention_gib.map(|g| g.saturating_mul(1 << 30)),
        pooled_segments: a.segment_pool as u64,
    };
    let checks = ringmq::doctor::run(&a.data_dir, &cores, a.max_connections, disk);
    for c in &checks {
        println!("{} {:<18} {}", if c.ok { "ok  " } else { "FAIL" }, c.name, c.detail);
    }
    match checks.iter().filter(|c| !c.ok).count() {
        0 => Ok(()),
        n => Err(format!("{n} check(s) failed")),
    }
}

pub(crate) fn connect(b: &BrokerArg) -> Result<std::sync::Arc<Client>, String> {
    Client::connect(b.client_config()?).map_err(|e| e.to_string())
}

fn topic(action: TopicAction) -> Result<(), String> {
    match action {
        TopicAction::Create { name, queues, flush, broker } => {
            connect(&broker)?.create_topic(&name, queues, flush as u8).map_err(|e| e.to_string())?;
            println!("created topic {name} with {queues} queues");
        }
        TopicAction::List { broker } => {
            for name in connect(&broker)?.list_topics().map_err(|e| e.to_string())? {
                println!("{name}");
            }
        }
        TopicAction::Describe { name, broker } => {
            let client = connect(&broker)?;
            let t = client.topic(&name).map_err(|e| e.to_string())?;
            println!("topic {} flush {}", t.name, if t.flush == 1 { "async" } else { "sync" });
            println!("{:>6} {:>6} {:>22} {:>12} {:>12}", "queue", "shard", "address", "start", "end");
            for (q, shard) in t.queue_shards.iter().enumerate() {
                let (start, end) = client.list_offsets(&name, q as u32).map_err(|e| e.to_string())?;
                let addr = client.owner(&name, q as u32).map_err(|e| e.to_string())?;
                println!("{q:>6} {shard:>6} {addr:>22} {start:>12} {end:>12}");
            }
        }
        TopicAction::Delete { name, broker } => {
            connect(&broker)?.delete_topic(&name).map_err(|e| e.to_string())?;
            println!("deleted topic {name}");
        }
    }
    Ok(())
}

fn produce(a: ProduceArgs) -> Result<(), String> {
    let client = connect(&a.broker)?;
    let selector = if a.key.is_some() { ringmq::client::QueueSelector::KeyHash } else { Default::default() };
    let producer = Producer::new(client, ProducerConfig { selector, ..Default::default() });
    let mut pending = Vec::new();
    let mut sent = 0u64;
    for line in std::io::stdin().lock().lines() {
        let line = line.map_err(|e| e.to_string())?;
        let mut m = Message::new(line.into_bytes());
        m.key = a.key.clone().map(String::into_bytes);
        m.tag = a.tag.clone();
        m.headers = a.headers.iter().map(|(k, v)| (k.clone(), v.clone().into_bytes())).collect();
        match a.mode {
            Mode::Sync => {
                let r = producer.send(&a.topic, &m).map_err(|e| e.to_string())?;
                eprintln!("sent {} to queue {} offset {}", r.message_id, r.queue, r.offset);
            }
            Mode::Async => pending.push(producer.send_async(&a.topic, m)),
            Mode::Oneway => {
                producer.send_oneway(&a.topic, &m).map_err(|e| e.to_string())?;
            }
        }
        sent += 1;
    }
    for p in pending {
        p.wait().map_err(|e| e.to_string())?;
    }
    eprintln!("sent {sent} messages");
    Ok(())
}

fn consume(a: ConsumeArgs) -> Result<(), String> {
    let client = connect(&a.broker)?;
    let start = match a.from.as_str() {
        "earliest" => StartFrom::Earliest,
        "latest" => StartFrom::Latest,
        "committed" => StartFrom::Committed,
        n => StartFrom::Offset(
            n.parse().map_err(|_| format!("--from {n:?}: expected earliest, latest, committed or an offset"))?,
        ),
    };
    let mut consumer = match (&a.group, a.subscribe) {
        (Some(group), true) => {
            let start_new = if start == StartFrom::Latest { StartNew::Latest } else { StartNew::Earliest };
            let mut config =
                GroupConfig { start_new, client_id: "ringmq-cli".into(), ..GroupConfig::new(group, &[&a.topic]) };
            config.tags.insert(a.topic.clone(), a.tags.clone());
            Consumer::subscribe(client.clone(), config)
        }
        _ => {
            let mut consumer = Consumer::new(client.clone(), a.group.clone());
            consumer.filter_tags(&a.topic, &a.tags);
            consumer.assign_all(&a.topic, start).map_err(|e: ClientError| e.to_string())?;
            consumer
        }
    };
    consumer.set_skip_corrupt(a.skip_corrupt);
    let mut seen = 0u64;
    let mut last = Instant::now();
    // Next offset per queue of what was printed: only that is committed, so a
    // message fetched but not printed (past --count) is not skipped by the group.
    let mut printed: std::collections::BTreeMap<u32, u64> = Default::default();
    let mut out = std::io::stdout().lock();
    while a.count.is_none_or(|c| seen < c) {
        if a.idle_exit_ms.is_some_and(|ms| last.elapsed() >= Duration::from_millis(ms)) {
            break;
        }
        let messages = consumer.poll(Duration::from_millis(500)).map_err(|e| e.to_string())?;
        if !messages.is_empty() {
            last = Instant::now();
        }
        for m in messages.iter().take(a.count.map_or(usize::MAX, |c| (c - seen) as usize)) {
            match a.format {
                Format::Text => writeln!(out, "{}", String::from_utf8_lossy(&m.value)),
                Format::Json => writeln!(out, "{}", message_json(m, false)),
            }
            .map_err(|e| e.to_string())?;
            printed.insert(m.queue, m.offset + 1);
            seen += 1;
        }
    }
    out.flush().map_err(|e| e.to_string())?;
    if consumer.skipped_corrupt() > 0 {
        eprintln!("ringmq: skipped {} damaged offsets (--skip-corrupt)", consumer.skipped_corrupt());
    }
    if a.group.is_some() {
        // As a member, or (without --subscribe) from outside the group, which
        // the broker takes while the group has no members.
        let positions: Vec<_> = printed.into_iter().map(|(q, next)| (a.topic.clone(), q, next)).collect();
        consumer.commit_offsets(&positions).map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// A message as one JSON object; `full` adds its topic, tries and headers.
fn message_json(m: &ringmq::client::ConsumedMessage, full: bool) -> String {
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let full = full.then(|| FullJson {
        topic: &m.topic,
        origin_topic: m.origin_topic(),
        reconsume_times: m.reconsume_times(),
        headers: HeadersJson(&m.headers),
    });
    let json = MessageJson {
        queue: m.queue,
        offset: m.offset,
        id: m.message_id.to_string(),
        key: text(&m.key),
        tag: &m.tag,
        timestamp_ms: m.timestamp_ms,
        value: text(&m.value),
        full,
    };
    serde_json::to_string(&json).expect("a message serializes")
}

/// The fields of a message every JSON line has.
#[derive(serde::Serialize)]
struct MessageJson<'a> {
    queue: u32,
    offset: u64,
    id: String,
    key: String,
    tag: &'a str,
    timestamp_ms: i64,
    value: String,
    #[serde(flatten)]
    full: Option<FullJson<'a>>,
}

/// What `message get`, `message find` and `dlq show` add.
#[derive(serde::Serialize)]
struct FullJson<'a> {
    topic: &'a str,
    origin_topic: String,
    reconsume_times: u32,
    headers: HeadersJson<'a>,
}

/// Headers as an object, in their order (a repeated name repeats).
struct HeadersJson<'a>(&'a [(String, Vec<u8>)]);

impl serde::Serialize for HeadersJson<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.0.iter().map(|(k, v)| (k, String::from_utf8_lossy(v))))
    }
}

fn message(action: MessageAction) -> Result<(), String> {
    let (found, what) = match action {
        MessageAction::Get { id, broker } => {
            let id: ringmq::client::MessageId = id.parse().map_err(|e: ringmq::client::BadMessageId| e.to_string())?;
            (connect(&broker)?.find_by_id(id).map_err(|e| e.to_string())?, format!("message id {id}"))
        }
        MessageAction::Find { topic, key, broker } => {
            let client = connect(&broker)?;
            (client.find_by_key(&topic, key.as_bytes()).map_err(|e| e.to_string())?, format!("key {key:?} in {topic}"))
        }
    };
    for m in &found.messages {
        println!("{}", message_json(m, true));
    }
    match (found.messages.is_empty(), found.removed) {
        (true, 0) => Err(format!("no message with {what}: never stored, or removed by retention")),
        (true, n) => Err(format!("{n} message(s) with {what} were removed by retention")),
        (false, _) => Ok(()),
    }
}

fn dlq(action: DlqAction) -> Result<(), String> {
    let e = |e: ClientError| e.to_string();
    match action {
        DlqAction::List { group, from, max, broker } => {
            for m in ringmq::dlq::list(&connect(&broker)?, &group, from, max).map_err(e)? {
                println!(
                    "offset={} id={} origin={} tries={} tag={} value={}",
                    m.offset,
                    m.message_id,
                    m.origin_topic(),
                    m.reconsume_times(),
                    json_string(&m.tag),
                    json_string(&String::from_utf8_lossy(&m.value)),
                );
            }
        }
        DlqAction::Show { group, offset, broker } => {
            println!("{}", message_json(&ringmq::dlq::show(&connect(&broker)?, &group, offset).map_err(e)?, true));
        }
        // `--all` is what clap requires when no offset is given.
        DlqAction::Redrive { group, offset, all: _, broker } => {
            let client = connect(&broker)?;
            let letters = match offset {
                Some(o) => vec![ringmq::dlq::show(&client, &group, o).map_err(e)?],
                None => ringmq::dlq::list(&client, &group, 0, usize::MAX).map_err(e)?,
            };
            let origin: Vec<String> = letters.iter().map(|m| m.origin_topic()).collect();
            for ((offset, sent), topic) in ringmq::dlq::redrive(&client, &letters).map_err(e)?.into_iter().zip(origin) {
                println!(
                    "redrove offset={offset} id={} to {topic}/{} at offset {}",
                    sent.message_id, sent.queue, sent.offset
                );
            }
        }
    }
    Ok(())
}

/// `s` as a JSON string literal.
fn json_string(s: &str) -> String {
    serde_json::to_string(s).expect("a string serializes")
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// --delay-levels and --header take any text without panicking.
        #[test]
        fn no_flag_text_makes_a_parser_panic(text in "\\PC{0,120}") {
            let _ = parse_delay_levels(&text);
            let _ = parse_header(&text);
        }
    }

    #[test]
    fn delay_levels_must_be_eighteen_rising_durations() {
        let levels = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h";
        assert_eq!(parse_delay_levels(levels).unwrap().len(), 18);
        assert!(parse_delay_levels("1s 2s").unwrap_err().contains("18"));
        assert!(parse_delay_levels(&levels.replace("1s", "-1s")).unwrap_err().contains("negative"));
    }
}
