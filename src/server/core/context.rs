//! One shard's core context: what every feature and the wire share on that
//! core. Feature state lives with its feature (groups, delay, tx); this is
//! only what all of them stand on.

use super::accounts::{Accounts, AccountsLink, Local};
use super::clock::Clock;
use super::config::ServerConfig;
use super::copied_out::CopiedOut;
use super::manifest::ShardManifest;
use super::mesh::Mesh;
use super::metadata::Metadata;
use super::metrics::Registry;
use super::objects::ObjectLink;
use super::offsets::Offsets;
use super::queue_starts::QueueStarts;
use super::remote_reads::RemoteReads;
use super::replication::Replication;
use super::stall::Pulse;
use super::tasks::Tasks;
use super::topic_configs::TopicConfigs;
use super::trace::Trace;
use super::traffic::Traffic;
use super::txn_marks::TxnMarks;
use crate::security::acl::Acls;
use crate::security::quota::Quotas;
use ringmq_shards::Shard;
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

/// The core of one shard.
pub struct Core {
    id: usize,
    config: ServerConfig,
    storage: Shard,
    /// Every shard's client address, by shard index.
    addrs: Vec<String>,
    mesh: Rc<Mesh>,
    /// Wall clock of due times (manual in tests).
    clock: Arc<Clock>,
    /// The node's users and ACLs, shared by its shards.
    accounts: Arc<Accounts>,
    acls: Local<Acls>,
    quotas: Local<Quotas>,
    started: Instant,
    /// The current snapshot; replaced whole by `apply_metadata`.
    pub(super) metadata: RefCell<Rc<Metadata>>,
    /// The configs of this shard's queues whose topics set any, by storage
    /// id; replaced with the metadata.
    pub(super) queue_configs: RefCell<Rc<HashMap<u32, TopicConfigs>>>,
    /// Serializes metadata changes (taken on shard 0).
    pub(super) metadata_lock: glommio::sync::Semaphore,
    offsets: Offsets,
    /// Kafka transactions open and aborted in this shard's queues.
    txn_marks: TxnMarks,
    /// Serializes the records of moved queue starts.
    pub(super) queue_starts: QueueStarts,
    tasks: Tasks,
    /// This shard's heartbeat and the holds of its thread the watchdog saw.
    pulse: Arc<Pulse>,
    role: ShardRole,
    /// Client produces and fetches by API and topic.
    traffic: Traffic,
    /// The features' metric probes.
    probes: Registry,
    /// Message trace events waiting to be written.
    trace: Trace,
    /// How deliveries reach a queue that moved to another broker group.
    pub(super) forward: RefCell<Option<Rc<dyn super::forward::Forward>>>,
    /// Queues being copied to another broker group.
    copied_out: CopiedOut,
    /// Tiered storage's bucket, if the broker has one.
    objects: Option<ObjectLink>,
    /// A single node's cluster id (a cluster's is in its placement view).
    pub(super) cluster_id: Option<String>,
    /// What of this shard is in the bucket.
    manifest: ShardManifest,
    /// Reads of tiered queues from the bucket.
    remote_reads: Rc<RemoteReads>,
}

/// What this shard does in its broker group.
#[derive(Clone)]
pub enum ShardRole {
    /// A single node: no replication.
    Single,
    /// Leads: produces wait for its followers as the replication mode says.
    Leader(Rc<Replication>),
    /// Mirrors the leader's shard; clients are sent to the leader.
    Follower { leader: String },
}

/// What a shard's core is made of, opened by the shard's start-up.
pub struct Parts {
    pub id: usize,
    pub config: ServerConfig,
    pub storage: Shard,
    pub addrs: Vec<String>,
    pub mesh: Rc<Mesh>,
    pub clock: Arc<Clock>,
    pub accounts: Arc<Accounts>,
    pub offsets: Offsets,
    pub txn_marks: TxnMarks,
    pub role: ShardRole,
    pub pulse: Arc<Pulse>,
    pub objects: Option<ObjectLink>,
    /// A single node's cluster id, from its data directory (None in a cluster).
    pub cluster_id: Option<String>,
}

impl Core {
    /// A core with empty metadata (`apply_metadata` sets the stored one).
    pub fn new(p: Parts) -> Rc<Core> {
        assert_eq!(p.addrs.len(), p.mesh.peers(), "one address per shard");
        assert!(p.id < p.mesh.peers(), "shard {} of {}", p.id, p.mesh.peers());
        let trace = Trace::new(p.config.trace.clone());
        let shards = p.mesh.peers().max(1) as u64;
        let remote_reads = Rc::new(RemoteReads::new((p.config.tiered_read_cache_bytes / shards) as usize));
        let core = Rc::new(Core {
            id: p.id,
            config: p.config,
            storage: p.storage,
            addrs: p.addrs,
            mesh: p.mesh,
            clock: p.clock,
            acls: Local::new(&p.accounts.acls),
            quotas: Local::new(&p.accounts.quotas),
            accounts: p.accounts,
            started: Instant::now(),
            metadata: RefCell::new(Rc::new(Metadata::default())),
            queue_configs: RefCell::default(),
            metadata_lock: glommio::sync::Semaphore::new(1),
            offsets: p.offsets,
            txn_marks: p.txn_marks,
            queue_starts: QueueStarts::default(),
            tasks: Tasks::default(),
            pulse: p.pulse,
            role: p.role,
            traffic: Traffic::default(),
            probes: Registry::default(),
            trace,
            forward: RefCell::default(),
            copied_out: CopiedOut::default(),
            objects: p.objects,
            cluster_id: p.cluster_id,
            manifest: ShardManifest::default(),
            remote_reads,
        });
        core.probes.register(&(core.remote_reads.clone() as Rc<dyn super::metrics::Probe>));
        core
    }

    /// This shard's index.
    pub fn id(&self) -> usize {
        self.id
    }

    pub fn config(&self) -> &ServerConfig {
        &self.config
    }

    /// Client produces and fetches by API and topic.
    pub fn traffic(&self) -> &Traffic {
        &self.traffic
    }

    /// Message trace of this shard.
    pub fn trace(&self) -> &Trace {
        &self.trace
    }

    /// The features' metric probes (each registers its own).
    pub fn probes(&self) -> &Registry {
        &self.probes
    }

    /// Cluster mode: how this node changes the cluster's users, ACLs and quotas.
    pub fn accounts_link(&self) -> Option<&AccountsLink> {
        self.config.cluster.as_ref().map(|c| &c.accounts)
    }

    /// The node's users and ACLs.
    pub fn accounts(&self) -> &Accounts {
        &self.accounts
    }

    /// The ACLs as of now (this shard's handle, one atomic load when unchanged).
    pub fn acls(&self) -> Arc<Acls> {
        self.acls.get(&self.accounts.acls)
    }

    /// The client quotas as of now (as the ACLs).
    pub fn quotas(&self) -> Arc<Quotas> {
        self.quotas.get(&self.accounts.quotas)
    }

    /// Tiered storage's bucket, if the broker has one.
    pub fn objects(&self) -> Option<&ObjectLink> {
        self.objects.as_ref()
    }

    /// This shard's manifest of tiered storage, as far as it is known.
    pub fn manifest(&self) -> &ShardManifest {
        &self.manifest
    }

    /// Reads of tiered queues from the bucket.
    pub fn remote_reads(&self) -> &Rc<RemoteReads> {
        &self.remote_reads
    }

    /// Queues of this shard being copied to another broker group.
    pub fn copied_out(&self) -> &CopiedOut {
        &self.copied_out
    }

    /// This shard's storage engine.
    pub fn storage(&self) -> &Shard {
        &self.storage
    }

    /// Every shard's client address, by shard index.
    pub fn addrs(&self) -> &[String] {
        &self.addrs
    }

    pub fn mesh(&self) -> &Rc<Mesh> {
        &self.mesh
    }

    /// Number of shards.
    pub fn shards(&self) -> usize {
        self.mesh.peers()
    }

    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    /// Milliseconds since this shard started: the group clock.
    pub fn now_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    /// The current metadata snapshot.
    pub fn metadata(&self) -> Rc<Metadata> {
        self.metadata.borrow().clone()
    }

    /// The committed offsets and cursors this shard stores.
    pub fn offsets(&self) -> &Offsets {
        &self.offsets
    }

    /// The Kafka transactions open and aborted in this shard's queues.
    pub fn txn_marks(&self) -> &TxnMarks {
        &self.txn_marks
    }

    /// This shard's background tasks.
    pub fn tasks(&self) -> &Tasks {
        &self.tasks
    }

    pub fn pulse(&self) -> &Arc<Pulse> {
        &self.pulse
    }

    pub fn role(&self) -> &ShardRole {
        &self.role
    }
}
