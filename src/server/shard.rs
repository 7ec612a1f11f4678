//! One core's shard: opens its storage, core and features, serves the
//! native protocol on its listener and the mesh, runs its background tasks,
//! and on stop shuts them down and closes its storage. Everything here runs
//! on that core's executor; this file is the only one that knows every part.

use super::core::accounts::Accounts;
use super::core::clock::Clock;
use super::core::config::ServerConfig;
use super::core::context::{Core, Parts, ShardRole};
use super::core::mesh::{Mesh, MeshMsg};
use super::core::metadata::Metadata;
use super::core::metadata_log;
use super::core::objects::ObjectLink;
use super::core::offsets::Offsets;
use super::core::part_imports;
use super::core::queue_starts;
use super::core::replication::{ClusterRole, Lead, Replication, ReplicationMode};
use super::core::stall;
use super::core::tasks::{Death, Stop};
use super::core::txn_marks::TxnMarks;
use super::core::Failure;
use super::delay::levels;
use super::delay::timer::Timer;
use super::groups::Groups;
use super::internal::retention_floor;
use super::kafka::connection::Kafka;
use super::net::admission::PerAddress;
use super::net::connection::accept_loop;
use super::net::socket;
use super::net::Net;
use super::replica::follower;
use super::tx::coordinator::Coordinator;
use super::tx::Transactions;
use super::wire::connection::Native;
use super::wire::{self, Services};
use glommio::channels::channel_mesh::FullMesh;
use glommio::net::TcpListener;
use ringmq_shards::{Shard, ShardConfig, StorageError};
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

/// How long background tasks get to return at shutdown before they are cancelled.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);
/// How often every committed offset is appended again (see `Offsets::snapshot`).
const OFFSET_SNAPSHOT_EVERY: Duration = Duration::from_secs(600);
/// How often the retention floor follows the internal queues' cursors.
const RETENTION_FLOOR_EVERY: Duration = Duration::from_secs(1);

/// What the starting thread and a shard tell each other.
pub struct Startup {
    pub index: usize,
    pub config: ServerConfig,
    pub mesh: FullMesh<MeshMsg>,
    /// The shard reports its bound address, then that it is serving (or why not).
    pub report: mpsc::Sender<(usize, Result<Option<SocketAddr>, ShardError>)>,
    /// Every shard's address, once all are bound.
    pub addrs: mpsc::Receiver<Vec<SocketAddr>>,
    pub stop: Stop,
    pub clock: Arc<Clock>,
    pub accounts: Arc<Accounts>,
    pub per_address: Arc<PerAddress>,
    /// Where each shard's log ended when it opened, by shard index.
    pub log_ends: Arc<std::sync::Mutex<Vec<u64>>>,
    /// The shard's heartbeat, which the watchdog watches.
    pub pulse: Arc<stall::Pulse>,
    /// Tiered storage's bucket, if the broker has one.
    pub objects: Option<ObjectLink>,
    /// A single node's cluster id (None in a cluster: etcd holds it).
    pub cluster_id: Option<String>,
}

/// Why a shard could not start (or stop cleanly).
#[derive(Debug, thiserror::Error)]
pub enum ShardError {
    #[error("{what}: {source}")]
    Storage { what: &'static str, source: StorageError },
    #[error("{what} {addr}: {source}")]
    Bind { what: &'static str, addr: SocketAddr, source: std::io::Error },
    #[error("loading metadata: {0}")]
    MetadataFile(std::io::Error),
    #[error("storing the metadata its log holds: {0}")]
    Metadata(Failure),
    #[error("building the compacted parts of queues moving here: {0}")]
    PartImports(Failure),
    #[error("--tiered-restore: the queues' ends in the bucket: {0} (start again once the bucket answers)")]
    Restore(super::data::upload::UploadError),
    #[error("{0}")]
    Abandoned(String),
}

/// `ShardError::Storage` for `what`.
fn storage_failed(what: &'static str) -> impl FnOnce(StorageError) -> ShardError {
    move |source| ShardError::Storage { what, source }
}

fn abandoned() -> ShardError {
    ShardError::Abandoned("start-up was abandoned".into())
}

/// Runs one shard until stopped; returns when its storage is closed.
pub async fn run(s: Startup) {
    let index = s.index;
    let report = s.report.clone();
    if let Err(error) = serve(s).await {
        tracing::error!(shard = index, %error, "shard failed");
        let _ = report.send((index, Err(error)));
    }
}

fn storage_config(cfg: &ServerConfig, index: usize) -> ShardConfig {
    ShardConfig {
        segment_bytes: cfg.segment_bytes,
        cache_bytes: cfg.cache_bytes,
        flush_depth: cfg.flush_depth,
        completion_yield: cfg.completion_yield,
        batch_bytes_max: cfg.batch_bytes_max,
        inflated_bytes_max: cfg.inflated_bytes_max,
        recent_batches: cfg.idempotence_window,
        default_flush_policy: cfg.default_flush,
        retention_age: cfg.retention_age,
        retention_bytes: cfg.retention_bytes,
        segment_pool_max: cfg.segment_pool_max,
        compaction_cpu_percent: cfg.compaction_cpu_percent,
        compaction_bytes_per_sec: cfg.compaction_bytes_per_sec,
        compaction_keys_max: cfg.compaction_keys_max,
        ballast_bytes: super::core::config::ballast_bytes(cfg.segment_bytes),
        keyring: cfg.encryption.as_ref().map(|k| std::sync::Arc::new(k.for_shard(index as u32))),
        ..ShardConfig::new(cfg.shard_dir(index))
    }
}

async fn serve(s: Startup) -> Result<(), ShardError> {
    let cfg = &s.config;
    let lead = cfg.cluster.as_ref().map(|c| &c.lead);
    let storage = match lead {
        Some(Lead::Follower { cuts, .. }) => {
            let cut = cuts.get(s.index).copied().flatten().map(ringmq_shards::LogPos);
            Shard::open_mirror(storage_config(cfg, s.index), cut).await
        }
        _ => Shard::open(storage_config(cfg, s.index)).await,
    }
    .map_err(storage_failed("opening storage"))?;
    s.log_ends.lock().expect("no shard panics holding it")[s.index] = storage.log_positions().1;
    if s.index == 0 {
        metadata_log::open(&storage).await.map_err(storage_failed("opening the metadata log"))?;
        if !storage.is_mirror() {
            // A follower promoted to leader: its log may hold metadata its file lacks.
            metadata_log::store_newest(&storage, &cfg.data_dir).await.map_err(ShardError::Metadata)?;
        }
    }
    let role = shard_role(cfg, s.index, &storage);
    let mut addr = cfg.listen;
    if addr.port() != 0 {
        addr.set_port(addr.port() + s.index as u16);
    }
    let listener = socket::bind(addr).map_err(|source| ShardError::Bind { what: "listening", addr, source })?;
    // A follower serves no Kafka clients; a leader or a single node's shard
    // that cannot serve them stops, as it does when the native listener
    // cannot bind, instead of serving on with one listener missing.
    let kafka = match lead {
        Some(Lead::Follower { .. }) => None,
        _ => kafka_listener(cfg, s.index)?,
    };
    let bound = listener.local_addr().map_err(|e| ShardError::Abandoned(format!("the listener's address: {e}")))?;
    s.report.send((s.index, Ok(Some(bound)))).map_err(|_| abandoned())?;
    let addrs = s.addrs.recv().map_err(|_| abandoned())?;
    let (senders, receivers) =
        s.mesh.join().await.map_err(|_| ShardError::Abandoned("joining the shard mesh failed".into()))?;
    let offsets = Offsets::open(&storage).await.map_err(storage_failed("loading consumer offsets"))?;
    queue_starts::open(&storage).await.map_err(storage_failed("opening the queue starts"))?;
    part_imports::open(&storage).await.map_err(storage_failed("opening the compacted parts moving here"))?;
    let txn_marks = TxnMarks::open(&storage).await.map_err(storage_failed("loading Kafka transaction marks"))?;
    let core = Core::new(Parts {
        id: s.index,
        config: s.config.clone(),
        storage,
        addrs: addrs.iter().map(|a| a.to_string()).collect(),
        mesh: Rc::new(Mesh::new(senders)),
        clock: s.clock.clone(),
        accounts: s.accounts.clone(),
        offsets,
        txn_marks,
        role,
        pulse: s.pulse.clone(),
        objects: s.objects.clone(),
        cluster_id: s.cluster_id.clone(),
    });
    levels::open(&core).await.map_err(storage_failed("opening delay levels"))?;
    let timer = Timer::open(&core).await.map_err(storage_failed("loading delayed messages"))?;
    let transactions = Transactions::open(&core).await.map_err(storage_failed("loading transactions"))?;
    let metadata = Metadata::load(&cfg.data_dir).map_err(ShardError::MetadataFile)?;
    core.apply_metadata(metadata).await.map_err(storage_failed("creating queues"))?;
    if !matches!(lead, Some(Lead::Follower { .. })) {
        // Before the starts: a moved queue's log begins where its part ends
        // (a follower builds them as it follows).
        part_imports::build(&core).await.map_err(ShardError::PartImports)?;
        // A follower promoted at fail-over: the starts its old leader moved.
        core.restore_queue_starts().await.map_err(storage_failed("restoring queue starts"))?;
        if cfg.tiered_restore {
            super::data::restore::begin_queues(&core).await.map_err(ShardError::Restore)?;
        }
    }
    let services = Rc::new(Services { core: core.clone(), groups: Groups::new(core.clone()), timer, transactions });
    // Kafka's transaction coordinator, wherever Kafka is served (not on a follower).
    let coordinator = match kafka {
        Some(_) => Some(Coordinator::open(&core).await.map_err(storage_failed("loading Kafka transactions"))?),
        None => None,
    };
    let net = Net::new(&core, s.per_address.clone());
    let mesh_tasks = core.mesh().spawn_receivers(receivers, wire::serve_calls(&services, coordinator.clone()));
    match cfg.cluster.as_ref() {
        Some(ClusterRole { lead: Lead::Follower { addr, .. }, broker_group, node, epoch, .. }) => {
            let mut addr = *addr;
            addr.set_port(addr.port() + s.index as u16);
            let leader =
                follower::Leader { broker_group: broker_group.clone(), node: node.clone(), epoch: *epoch, addr };
            start_follower_tasks(&services, &net, listener, leader);
        }
        _ => start_tasks(&services, &net, listener, kafka.zip(coordinator)),
    }
    s.report.send((s.index, Ok(None))).map_err(|_| abandoned())?;
    let asked = async {
        s.stop.asked().await;
        "asked to stop"
    };
    let why = futures_lite::future::or(asked, core.tasks().fatal_death()).await;
    let holds = core.pulse().count();
    let longest_hold_ms = core.pulse().longest().as_secs_f64() * 1e3;
    tracing::info!(shard = s.index, why, holds, longest_hold_ms, "shutting down: flushing and closing storage");
    core.tasks().shutdown(SHUTDOWN_GRACE).await;
    // Connections answer what they read, then close (net/connection.rs).
    if !net.all_closed(SHUTDOWN_GRACE).await {
        tracing::warn!(shard = s.index, "client connections still open after the shutdown grace; closing storage");
    }
    let closed = core.storage().close().await;
    drop(mesh_tasks);
    closed.map_err(storage_failed("closing storage"))
}

/// What this shard does in its broker group (a single node: nothing more).
fn shard_role(cfg: &ServerConfig, index: usize, storage: &Shard) -> ShardRole {
    let Some(c) = cfg.cluster.as_ref() else { return ShardRole::Single };
    match &c.lead {
        Lead::Follower { leader, .. } => ShardRole::Follower { leader: leader.clone() },
        Lead::Leader => {
            let replication = Replication::new(c, index, storage, std::time::Instant::now());
            if c.replication.mode == ReplicationMode::Sync {
                storage.commit_to(Some(replication.committed()));
            }
            ShardRole::Leader(Rc::new(replication))
        }
    }
}

/// This shard's Kafka listener (`--kafka-listen`, shard N on its port + N), if one is configured.
fn kafka_listener(cfg: &ServerConfig, index: usize) -> Result<Option<TcpListener>, ShardError> {
    let Some(mut addr) = cfg.kafka_listen else { return Ok(None) };
    addr.set_port(addr.port() + index as u16);
    let kafka =
        socket::bind(addr).map_err(|source| ShardError::Bind { what: "the Kafka listener on", addr, source })?;
    Ok(Some(kafka))
}

/// Starts the listeners and every background task of the shard.
fn start_tasks(s: &Rc<Services>, net: &Rc<Net>, listener: TcpListener, kafka: Option<(TcpListener, Rc<Coordinator>)>) {
    let (core, tasks) = (&s.core, s.core.tasks());
    tasks.spawn("listener", Death::Fatal, accept_loop(Native::new(s.clone()), net.clone(), listener));
    let coordinator = kafka.as_ref().map(|(_, c)| c.clone());
    if let Some((kafka, coordinator)) = kafka {
        coordinator.start();
        let kafka_services = super::kafka::Services::new(core.clone(), s.groups.clone(), coordinator);
        tasks.spawn("kafka listener", Death::Fatal, accept_loop(Kafka::new(kafka_services), net.clone(), kafka));
    }
    start_admin(core, net);
    if core.trace().is_on() {
        tasks.spawn("trace writer", Death::Logged, core.clone().write_traces());
    }
    tasks.spawn("group sessions", Death::Fatal, s.groups.clone().tick_loop());
    levels::start(core);
    s.timer.start();
    s.transactions.start();
    tasks.spawn("retention floor", Death::Logged, retention_floor_loop(s.clone(), coordinator));
    tasks.spawn("offset snapshots", Death::Logged, offset_snapshots(core.clone()));
    tasks.spawn("topic retention", Death::Logged, super::data::retention::run(core.clone()));
    tasks.spawn("compactor", Death::Logged, super::data::compaction::run(core.clone()));
    if core.id() == 0 && core.placement().is_some() {
        tasks.spawn("topic placement", Death::Logged, core.clone().follow_placement());
    }
    start_tiered(core);
    if core.placement().is_some() && matches!(core.role(), ShardRole::Leader(_)) {
        core.set_forward(Rc::new(super::replica::forward::Produces));
        tasks.spawn("queue moves", Death::Logged, super::replica::moves::run(core.clone()));
        tasks.spawn("queue loads", Death::Logged, super::data::load::run(core.clone()));
    }
    if let ShardRole::Leader(replication) = core.role() {
        let (core, replication) = (core.clone(), replication.clone());
        let every = (core.config().cluster.as_ref().expect("a leader's role").replication.lag_max / 4)
            .max(Duration::from_millis(50));
        tasks.spawn("replica expiry", Death::Logged, async move {
            while core.tasks().sleep(every).await {
                replication.expire(core.storage(), std::time::Instant::now());
            }
        });
    }
    start_stall_probe(core);
}

/// A follower's shard: the listener (which sends clients to the leader) and
/// the fetch loop; the features' tasks start when the node leads.
fn start_follower_tasks(s: &Rc<Services>, net: &Rc<Net>, listener: TcpListener, leader: follower::Leader) {
    let (core, tasks) = (&s.core, s.core.tasks());
    tasks.spawn("listener", Death::Fatal, accept_loop(Native::new(s.clone()), net.clone(), listener));
    tasks.spawn("replication fetch", Death::Fatal, follower::follow(core.clone(), leader));
    start_admin(core, net);
    start_stall_probe(core);
    start_tiered(core);
}

/// With a tiered storage bucket: shard 0 checks it; each shard uploads (a
/// leader or single node) or follows its manifest (a follower).
fn start_tiered(core: &Rc<Core>) {
    if core.objects().is_none() {
        return;
    }
    if core.id() == 0 {
        core.tasks().spawn("bucket check", Death::Logged, super::data::bucket::run(core.clone()));
    }
    core.tasks().spawn("tiered uploads", Death::Logged, super::data::upload::run(core.clone()));
}

/// Shard 0 serves the admin listener, if one is configured.
fn start_admin(core: &Rc<Core>, net: &Rc<Net>) {
    let Some(addr) = core.config().admin_listen.filter(|_| core.id() == 0) else { return };
    match socket::bind(addr) {
        Ok(admin) => {
            let accepting = super::admin::listener::accept_loop(core.clone(), net.clone(), admin);
            core.tasks().spawn("admin listener", Death::Logged, accepting);
        }
        Err(error) => tracing::error!(%addr, %error, "the admin listener could not bind"),
    }
}

/// Beats the shard's pulse for the watchdog, if holds are watched.
fn start_stall_probe(core: &Rc<Core>) {
    let tasks = core.tasks();
    if !core.config().stall_threshold.is_zero() {
        let core = core.clone();
        tasks.spawn("stall probe", Death::Logged, async move {
            core.tasks().unless_stopping(stall::probe(core.pulse().clone())).await;
        });
    }
}

/// Every `RETENTION_FLOOR_EVERY`, keeps what the internal queues still need
/// from retention.
async fn retention_floor_loop(s: Rc<Services>, coordinator: Option<Rc<Coordinator>>) {
    let core = &s.core;
    while core.tasks().sleep(RETENTION_FLOOR_EVERY).await {
        let mut needed = vec![s.timer.cursor(), s.transactions.cursor()];
        needed.extend(coordinator.as_ref().map(|c| c.needed()));
        needed.extend(levels::cursors(core));
        match retention_floor::floor(core.storage(), &needed).await {
            Ok(floor) => core.storage().keep_from(floor),
            Err(error) => tracing::warn!(shard = core.id(), %error, "computing the retention floor failed"),
        }
    }
}

/// Appends every committed offset and every current Kafka transaction mark
/// again, every `OFFSET_SNAPSHOT_EVERY`.
async fn offset_snapshots(core: Rc<Core>) {
    while core.tasks().sleep(OFFSET_SNAPSHOT_EVERY).await {
        if let Err(error) = core.offsets().snapshot(core.storage()).await {
            tracing::error!(shard = core.id(), %error, "snapshotting consumer offsets failed");
        }
        if let Err(error) = core.snapshot_txn_marks().await {
            tracing::error!(shard = core.id(), %error, "snapshotting Kafka transaction marks failed");
        }
    }
}
