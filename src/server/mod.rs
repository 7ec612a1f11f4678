//! The broker: one glommio executor pinned per core, each running a shard
//! server (storage, listener, connections, mesh end). Shard N listens on the
//! base port + N; metadata names every shard's address so clients reach the
//! owning core directly.

//!
//! Layers, each importing only those below it (checked by `.ci/layers`):
//! the edges `wire` (native), `kafka` and `admin` -> the features `data`,
//! `groups`, `delay`, `tx`, `replica`, `auth` (never each other) -> `net`
//! (connections: admission, TLS streams, the connection loop both client
//! protocols run) -> `core` (context, service, mesh, tasks) -> `internal`
//! (the broker's own storage queues) -> the storage engine. `shard.rs` and
//! this file assemble them.

mod admin;
mod auth;
mod core;
mod data;
mod delay;
mod groups;
mod internal;
pub mod kafka;
mod net;
mod node;
mod replica;
mod shard;
mod tx;
pub mod wire;

pub use self::core::accounts::{Accounts, AccountsAsk, AccountsLink};
pub use self::core::cluster_id;
pub use self::core::config;
pub use self::core::config::ServerConfig;
pub use self::core::metadata;
pub use self::core::placement;
pub use self::core::replication::{
    ClusterRole, FollowerReport, InSyncReport, IsrLink, Lead, ReplicatedLog, Replication, ReplicationConfig,
    ReplicationMode,
};
pub use self::core::topic_configs;
pub use self::core::topics::{check_more_queues, flush_code, NewTopic};
pub use self::core::trace::TraceConfig;
pub use self::core::{Failure, Reason};
pub use self::node::dir_lock::DataDirLock;
pub use self::node::stack_symbols;
pub use self::node::NodeError;

use self::core::clock::Clock;
use self::core::stall::Pulse;
use self::core::tasks::Stop;
use self::net::admission::PerAddress;
use self::node::object_thread::ObjectThread;
use self::node::watchdog::Watchdog;
use self::node::{data_keys, layout};
use self::shard::ShardError;
use glommio::channels::channel_mesh::MeshBuilder;
use glommio::{LocalExecutorBuilder, Placement, PoolPlacement};
use std::net::SocketAddr;
use std::sync::{mpsc, Arc};
use std::time::Duration;

/// Why the broker could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("CPU {0} does not exist on this machine ({1} CPUs); pass --cores with CPUs that exist")]
    NoSuchCpu(usize, usize),
    #[error("no cores given; pass --cores")]
    NoCores,
    #[error("cannot create the data directory {0}: {1}")]
    DataDir(String, std::io::Error),
    #[error("cannot start the executor of shard {0}: {1}")]
    Executor(usize, String),
    #[error(transparent)]
    Node(#[from] NodeError),
    #[error("loading the users, ACLs and quotas: {0}")]
    Users(crate::security::AccountsError),
    #[error("shard {0} failed to start: {1}")]
    Shard(usize, ShardError),
    #[error("tiered storage's bucket: {0}")]
    ObjectStore(String),
}

/// A running broker.
pub struct Server {
    /// Each shard's client address, by shard index.
    pub addrs: Vec<SocketAddr>,
    /// Where each shard's log ended when it opened (a new leader records it as its epoch's start).
    pub log_ends: Vec<u64>,
    stop: Stop,
    shards: Vec<glommio::ExecutorJoinHandle<()>>,
    /// Watches the shards' threads for holds; stops when the server is dropped.
    _watchdog: Option<Watchdog>,
    /// The S3 thread of tiered storage's bucket, if there is one; stops when the server is dropped.
    _objects: Option<ObjectThread>,
    /// Released once every shard has stopped.
    _lock: DataDirLock,
}

/// Longest a shard may take to open its storage and bind.
const START_TIMEOUT: Duration = Duration::from_secs(300);

/// Allocations from this size up are mapped on their own and unmapped when
/// freed (request frames run up to `frame_bytes_max`).
const MMAP_THRESHOLD_BYTES: i32 = 256 << 10;

/// Called first thing in a binary that runs a broker, before any thread
/// starts: a process started as the watchdog's stack namer names frames and
/// exits (`node/stack_symbols.rs`); any other fixes glibc's mmap threshold.
pub fn prepare_process() {
    node::stack_symbols::serve_if_asked();
    bound_large_allocations();
}

/// Fixes glibc's mmap threshold. Left dynamic, the threshold rises to
/// the size of the first large block freed, and later request frames come
/// from the threads' arenas, whose freed pages stay resident: with the same
/// request budgets the peak RSS under many large produces wandered from 76
/// to 151 MiB; fixed, it stays at 74-78 (`tests/hardening.rs`, 300
/// connections of 1 MiB produces). Set later (in `start`) it did not help.
/// The cost is a map and an unmap per large frame.
fn bound_large_allocations() {
    #[cfg(target_env = "gnu")]
    // SAFETY: mallopt only sets an allocator parameter; called before any
    // other thread of the process exists.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES);
    }
}

/// Starts one shard per configured core and returns once all serve.
pub fn start(config: ServerConfig) -> Result<Server, ServerError> {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if config.cores.is_empty() {
        return Err(ServerError::NoCores);
    }
    if let Some(&bad) = config.cores.iter().find(|c| **c >= cpus) {
        return Err(ServerError::NoSuchCpu(bad, cpus));
    }
    std::fs::create_dir_all(&config.data_dir)
        .map_err(|e| ServerError::DataDir(config.data_dir.display().to_string(), e))?;
    let lock = DataDirLock::acquire(&config.data_dir)?;
    data_keys::check_and_record(&config.data_dir, config.encryption.as_deref())?;
    let n = config.cores.len();
    layout::check_or_record(&config.data_dir, layout::Layout { shards: n, segment_bytes: config.segment_bytes })?;
    let cluster_id = match config.cluster {
        Some(_) => None,
        None => Some(node::cluster_id::read_or_create(&config.data_dir)?),
    };
    let mesh = MeshBuilder::full(n, 1024);
    let stop = Stop::default();
    let clock = Arc::new(if config.manual_clock { Clock::manual() } else { Clock::system() });
    let accounts = match &config.cluster {
        // The control plane keeps them as etcd holds them.
        Some(role) => role.accounts.shared.clone(),
        None => Arc::new(local_accounts(&config.data_dir)?),
    };
    let per_address = Arc::new(PerAddress::new(config.connections_per_ip_max));
    let (report_tx, report_rx) = mpsc::channel();
    let log_ends = Arc::new(std::sync::Mutex::new(vec![0; n]));
    let mut addr_txs = Vec::new();
    let pulses: Vec<_> =
        config.cores.iter().enumerate().map(|(i, &cpu)| Arc::new(Pulse::new(i, cpu, config.stall_threshold))).collect();
    let watchdog = match config.stall_threshold.is_zero() {
        true => None,
        false => Some(Watchdog::start(pulses.clone(), config.stall_threshold)?),
    };
    let (objects_thread, objects) = match config.object_store.clone() {
        Some(bucket) => ObjectThread::start(bucket, config.tiered_uploads_in_flight)
            .map(|(t, link)| (Some(t), Some(link)))
            .map_err(ServerError::ObjectStore)?,
        None => (None, None),
    };
    if let Some(link) = objects.as_ref().filter(|_| config.tiered_restore) {
        node::restore::take_metadata(&config.data_dir, n, link)?;
    }
    let mut shards = Vec::new();
    for (index, &cpu) in config.cores.iter().enumerate() {
        let (addr_tx, addr_rx) = mpsc::channel();
        addr_txs.push(addr_tx);
        let startup = shard::Startup {
            index,
            config: config.clone(),
            mesh: mesh.clone(),
            report: report_tx.clone(),
            addrs: addr_rx,
            stop: stop.clone(),
            clock: clock.clone(),
            accounts: accounts.clone(),
            per_address: per_address.clone(),
            log_ends: log_ends.clone(),
            pulse: pulses[index].clone(),
            objects: objects.clone(),
            cluster_id: cluster_id.clone(),
        };
        let builder = LocalExecutorBuilder::new(Placement::Fixed(cpu))
            .name(&format!("ringmq-shard-{index}"))
            .spin_before_park(config.idle_spin)
            .preempt_timer(config.task_quota)
            // File system calls the shard hands off run where the kernel finds room.
            .blocking_thread_pool_placement(PoolPlacement::Unbound(1));
        let handle =
            builder.spawn(move || shard::run(startup)).map_err(|e| ServerError::Executor(index, e.to_string()))?;
        shards.push(handle);
    }
    let addrs = vec![SocketAddr::from(([0, 0, 0, 0], 0)); n];
    let mut server = Server {
        addrs,
        log_ends: Vec::new(),
        stop,
        shards,
        _watchdog: watchdog,
        _objects: objects_thread,
        _lock: lock,
    };
    match wait_until_serving(&report_rx, &addr_txs, &mut server.addrs) {
        Ok(()) => {
            server.log_ends = log_ends.lock().expect("no shard panics holding it").clone();
            Ok(server)
        }
        Err((index, e)) => {
            // Shards still waiting for the address list give up when it cannot come.
            drop(addr_txs);
            server.stop();
            Err(ServerError::Shard(index, e))
        }
    }
}

/// A single node's users, ACLs and quotas, from its data directory.
fn local_accounts(data_dir: &std::path::Path) -> Result<Accounts, ServerError> {
    let users = crate::security::users::Users::load(data_dir).map_err(ServerError::Users)?;
    let acls = crate::security::acl::Acls::load(data_dir).map_err(ServerError::Users)?;
    let quotas = crate::security::quota::Quotas::load(data_dir).map_err(ServerError::Users)?;
    Ok(Accounts::new(users, acls, quotas))
}

/// Collects every shard's bound address, hands the list to all, and waits
/// until each serves; the first failure (shard, reason) ends the wait.
fn wait_until_serving(
    report_rx: &mpsc::Receiver<(usize, Result<Option<SocketAddr>, ShardError>)>,
    addr_txs: &[mpsc::Sender<Vec<SocketAddr>>],
    addrs: &mut [SocketAddr],
) -> Result<(), (usize, ShardError)> {
    for _ in 0..addrs.len() {
        match report_rx.recv_timeout(START_TIMEOUT) {
            Ok((i, Ok(Some(addr)))) => addrs[i] = addr,
            Ok((i, Ok(None))) => return Err((i, ShardError::Abandoned("reported ready before binding".into()))),
            Ok((i, Err(e))) => return Err((i, e)),
            Err(_) => return Err((0, ShardError::Abandoned("did not bind in time".into()))),
        }
    }
    for tx in addr_txs {
        let _ = tx.send(addrs.to_vec());
    }
    for _ in 0..addrs.len() {
        match report_rx.recv_timeout(START_TIMEOUT) {
            Ok((_, Ok(_))) => {}
            Ok((i, Err(e))) => return Err((i, e)),
            Err(_) => return Err((0, ShardError::Abandoned("did not become ready in time".into()))),
        }
    }
    Ok(())
}

impl Server {
    /// Stops accepting, flushes and closes every shard's storage, and waits.
    pub fn stop(self) {
        self.stop.stop();
        for handle in self.shards {
            let _ = handle.join();
        }
    }
}
