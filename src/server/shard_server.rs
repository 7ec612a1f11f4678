//! One core's server: its storage shard, its listener, its connections and
//! its end of the mesh. Everything here runs on that core's executor.

use super::clock::Clock;
use super::config::ServerConfig;
use super::groups::Groups;
use super::handler::{self, flush_policy};
use super::mesh::{Mesh, MeshMsg, MeshService};
use super::metadata::Metadata;
use super::offsets::Offsets;
use super::queue_locks::QueueLocks;
use super::stall::{self, StallStats};
use super::timer::Timer;
use super::transactions::{self, Transactions};
use glommio::channels::channel_mesh::FullMesh;
use glommio::net::TcpListener;
use ringmq_shards::{QueueId, Shard, ShardConfig, Signal, StorageError};
use std::cell::{Cell, RefCell};
use std::collections::HashSet;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// State of one shard's server.
pub struct ShardCtx {
    pub id: usize,
    pub config: ServerConfig,
    pub storage: Shard,
    metadata: RefCell<Rc<Metadata>>,
    /// Every shard's client address, by shard index.
    pub addrs: Vec<String>,
    pub mesh: Rc<Mesh>,
    pub offsets: Offsets,
    /// Consumer groups this shard coordinates.
    pub groups: RefCell<Groups>,
    /// A group changed: parked joins and syncs look again.
    pub group_changed: Signal,
    /// Queue locks of ordered consumers, for the groups this shard coordinates.
    pub queue_locks: RefCell<QueueLocks>,
    started: Instant,
    /// Wall clock of due times (manual in tests).
    pub clock: Arc<Clock>,
    /// Delayed messages of this shard.
    pub timer: Timer,
    /// Transactional (half) messages of this shard.
    pub transactions: Transactions,
    pub connections: Cell<usize>,
    /// Serializes metadata changes (used on shard 0).
    pub metadata_lock: glommio::sync::Semaphore,
    /// Times this shard's thread was held past the stall threshold.
    pub stalls: Rc<StallStats>,
}

impl ShardCtx {
    /// Milliseconds since this shard started: the group clock.
    pub fn now_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    /// The current metadata snapshot.
    pub fn metadata(&self) -> Rc<Metadata> {
        self.metadata.borrow().clone()
    }

    /// Creates the storage queues this shard owns in `next` and sets their
    /// flush policies, makes `next` current, then deletes the storage of the
    /// topic queues `next` no longer has (deleted topics; also at start-up,
    /// after a crash between storing metadata and deleting).
    pub async fn apply_metadata(&self, next: Metadata) -> Result<(), StorageError> {
        let existing: HashSet<QueueId> = self.storage.queues().into_iter().collect();
        let mut wanted = HashSet::new();
        let mut create = Vec::new();
        for topic in next.topics.values() {
            for slot in topic.queues.iter().filter(|s| s.shard as usize == self.id) {
                let q = QueueId(slot.storage_id);
                wanted.insert(q);
                if existing.contains(&q) {
                    self.storage.set_flush_policy(q, flush_policy(topic.flush))?;
                } else {
                    create.push((q, Some(flush_policy(topic.flush))));
                }
            }
        }
        self.storage.create_queues(&create).await?;
        // Topic queues have ids below `next_storage_id`; internal ones sit at the top of the range.
        let deleted: Vec<QueueId> =
            existing.into_iter().filter(|q| q.0 < next.next_storage_id && !wanted.contains(q)).collect();
        *self.metadata.borrow_mut() = Rc::new(next);
        self.storage.delete_queues(&deleted).await
    }
}

impl MeshService for ShardCtx {
    fn serve(self: Rc<Self>, frame: Vec<u8>) -> Pin<Box<dyn Future<Output = Vec<u8>>>> {
        Box::pin(async move { handler::handle(&self, frame).await.unwrap_or_default() })
    }

    fn apply(self: Rc<Self>, snapshot: Vec<u8>) -> Pin<Box<dyn Future<Output = ()>>> {
        Box::pin(async move {
            match Metadata::decode(&snapshot) {
                Ok(next) => {
                    if let Err(error) = self.apply_metadata(next).await {
                        tracing::error!(shard = self.id, %error, "applying metadata failed");
                    }
                }
                Err(error) => tracing::error!(shard = self.id, %error, "undecodable metadata snapshot"),
            }
        })
    }
}

/// What the starting thread and a shard tell each other.
pub struct Startup {
    pub index: usize,
    pub config: ServerConfig,
    pub mesh: FullMesh<MeshMsg>,
    /// The shard reports its bound address, then that it is serving (or why not).
    pub report: mpsc::Sender<(usize, Result<Option<SocketAddr>, String>)>,
    /// Every shard's address, once all are bound.
    pub addrs: mpsc::Receiver<Vec<SocketAddr>>,
    pub shutdown: Arc<AtomicBool>,
    pub clock: Arc<Clock>,
}

/// Every 10 minutes, appends every committed offset again (see `Offsets::snapshot`).
fn spawn_offset_snapshots(ctx: &Rc<ShardCtx>) -> glommio::task::JoinHandle<()> {
    let ctx = ctx.clone();
    glommio::spawn_local(async move {
        loop {
            glommio::timer::sleep(Duration::from_secs(600)).await;
            if let Err(error) = ctx.offsets.snapshot(&ctx.storage).await {
                tracing::error!(shard = ctx.id, %error, "snapshotting consumer offsets failed");
            }
        }
    })
    .detach()
}

/// Runs one shard until shutdown; returns when its storage is closed.
pub async fn run(s: Startup) {
    let index = s.index;
    let report = s.report.clone();
    if let Err(error) = serve(s).await {
        tracing::error!(shard = index, %error, "shard failed");
        let _ = report.send((index, Err(error)));
    }
}

async fn serve(s: Startup) -> Result<(), String> {
    let cfg = &s.config;
    let storage_cfg = ShardConfig {
        segment_bytes: cfg.segment_bytes,
        cache_bytes: cfg.cache_bytes,
        flush_depth: cfg.flush_depth,
        completion_yield: cfg.completion_yield,
        batch_bytes_max: cfg.max_batch_bytes,
        default_flush_policy: cfg.default_flush,
        retention_age: cfg.retention_age,
        retention_bytes: cfg.retention_bytes,
        ballast_bytes: super::config::ballast_bytes(cfg.segment_bytes),
        ..ShardConfig::new(cfg.data_dir.join(format!("shard-{}", s.index)))
    };
    let storage = Shard::open(storage_cfg).await.map_err(|e| format!("opening storage: {e}"))?;
    let mut addr = cfg.listen;
    if addr.port() != 0 {
        addr.set_port(addr.port() + s.index as u16);
    }
    let listener = TcpListener::bind(addr).map_err(|e| format!("listening on {addr}: {e}"))?;
    let bound = listener.local_addr().map_err(|e| e.to_string())?;
    s.report.send((s.index, Ok(Some(bound)))).map_err(|e| e.to_string())?;
    let addrs = s.addrs.recv().map_err(|_| "start-up was abandoned".to_string())?;
    let (senders, receivers) = s.mesh.join().await.map_err(|_| "joining the shard mesh failed".to_string())?;
    let mesh = Mesh::new(senders);
    let offsets = Offsets::open(&storage).await.map_err(|e| format!("loading consumer offsets: {e}"))?;
    super::schedule::open(&storage).await.map_err(|e| format!("opening delay levels: {e}"))?;
    let timer = Timer::open(&storage, &offsets, s.clock.now_ms())
        .await
        .map_err(|e| format!("loading delayed messages: {e}"))?;
    let tx = Transactions::open(&storage, transactions::cursor(&offsets), s.clock.now_ms(), cfg.tx_timeout)
        .await
        .map_err(|e| format!("loading transactions: {e}"))?;
    let metadata = Metadata::load(&cfg.data_dir).map_err(|e| format!("loading metadata: {e}"))?;
    let ctx = Rc::new(ShardCtx {
        id: s.index,
        config: s.config.clone(),
        storage,
        metadata: RefCell::new(Rc::new(Metadata::default())),
        addrs: addrs.iter().map(|a| a.to_string()).collect(),
        mesh: mesh.clone(),
        offsets,
        groups: RefCell::default(),
        group_changed: Signal::default(),
        queue_locks: RefCell::default(),
        started: Instant::now(),
        clock: s.clock.clone(),
        timer,
        transactions: tx,
        connections: Cell::new(0),
        metadata_lock: glommio::sync::Semaphore::new(1),
        stalls: Rc::default(),
    });
    ctx.apply_metadata(metadata).await.map_err(|e| format!("creating queues: {e}"))?;
    let mesh_tasks = mesh.spawn_receivers(receivers, ctx.clone());
    let acceptor = glommio::spawn_local(super::connection::accept_loop(ctx.clone(), listener));
    let mut schedule = super::schedule::spawn(&ctx);
    schedule.push(super::timer::spawn(&ctx));
    schedule.push(transactions::spawn(&ctx));
    schedule.push(super::internal_queue::spawn_retention_floor(&ctx));
    schedule.push(spawn_offset_snapshots(&ctx));
    if !cfg.stall_threshold.is_zero() {
        schedule.push(glommio::spawn_local(stall::probe(ctx.stalls.clone(), cfg.stall_threshold)).detach());
    }
    s.report.send((s.index, Ok(None))).map_err(|e| e.to_string())?;
    while !s.shutdown.load(Ordering::Relaxed) {
        glommio::timer::sleep(Duration::from_millis(50)).await;
        if ctx.groups.borrow_mut().tick(ctx.now_ms()) {
            ctx.group_changed.notify();
        }
    }
    drop(acceptor);
    schedule.into_iter().for_each(|t| t.cancel());
    let longest_stall_ms = ctx.stalls.longest().as_secs_f64() * 1e3;
    tracing::info!(
        shard = s.index,
        stalls = ctx.stalls.count(),
        longest_stall_ms,
        "shutting down: flushing and closing storage"
    );
    let closed = ctx.storage.close().await;
    drop(mesh_tasks);
    closed.map_err(|e| format!("closing storage: {e}"))
}
