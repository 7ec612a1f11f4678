//! The control-plane thread: connects to etcd, registers this node under a
//! lease, renews the lease every third of its time to live, registers again
//! under a new lease if the old one is lost (etcd restarted, or the node was
//! cut off longer than the lease), and revokes it at a clean stop so the
//! node is gone at once rather than when the lease runs out.
//!
//! It also elects: asked, it finds the group's leader or campaigns to be it
//! (election.rs), then watches that role every renewal. When the role is
//! lost (the leader's key is gone or has a new epoch, or this node's own
//! lease lapsed while it led) it says so, and the node restarts in the role
//! the next election gives it.

use super::election::{self, EpochStart, Leadership};
use super::registry::{self, Node, NodeKey};
use super::{ClusterConfig, ETCD_TIMEOUT};
use etcd_client::{LeaseKeepAliveStream, LeaseKeeper, PutOptions};
use std::collections::BTreeMap;
use std::sync::mpsc;
use std::time::Duration;
use tokio::sync::oneshot;

/// Why the control plane could not start.
#[derive(Debug, thiserror::Error)]
pub enum ControlPlaneError {
    #[error("cannot register with etcd at {endpoints:?}: {reason}; is etcd running there (see --cluster)?")]
    Etcd { endpoints: Vec<String>, reason: String },
    #[error("cannot start the control-plane thread: {0}")]
    Thread(String),
}

/// Longest an election may take before it is reported as failed.
const ELECTION_TIMEOUT: Duration = Duration::from_secs(60);

/// This node's place in its group, as an election decided it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Elected {
    Leader { epoch: u64 },
    Follower(Leadership),
}

/// Called on the control-plane thread when the elected role is lost.
pub type OnLost = Box<dyn Fn(String) + Send>;

type Reply<T> = mpsc::Sender<Result<T, String>>;

/// What the node asks of its control-plane thread.
enum Command {
    Elect(Reply<Elected>),
    RecordStart { epoch: u64, start: EpochStart, reply: Reply<()> },
    EpochStarts(Reply<BTreeMap<u64, EpochStart>>),
}

/// This node's link to the cluster's etcd, on a thread of its own.
pub struct ControlPlane {
    stop: Option<oneshot::Sender<()>>,
    commands: tokio::sync::mpsc::UnboundedSender<Command>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ControlPlane {
    /// Registers this node and keeps its registration alive; returns once it
    /// is registered (or why it could not be).
    pub fn start(config: ClusterConfig, on_lost: OnLost) -> Result<ControlPlane, ControlPlaneError> {
        let (ready_tx, ready_rx) = mpsc::channel();
        let (stop_tx, stop_rx) = oneshot::channel();
        let (commands_tx, commands_rx) = tokio::sync::mpsc::unbounded_channel();
        let endpoints = config.endpoints.clone();
        let thread = std::thread::Builder::new()
            .name("ringmq-control".into())
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build();
                match runtime {
                    Ok(runtime) => runtime.block_on(run(config, ready_tx, stop_rx, commands_rx, on_lost)),
                    Err(e) => {
                        let _ = ready_tx.send(Err(format!("starting its runtime: {e}")));
                    }
                }
            })
            .map_err(|e| ControlPlaneError::Thread(e.to_string()))?;
        let failed = |reason: String| ControlPlaneError::Etcd { endpoints: endpoints.clone(), reason };
        match ready_rx.recv_timeout(2 * ETCD_TIMEOUT) {
            Ok(Ok(())) => Ok(ControlPlane { stop: Some(stop_tx), commands: commands_tx, thread: Some(thread) }),
            Ok(Err(reason)) => Err(failed(reason)),
            Err(_) => Err(failed(format!("no answer within {:?}", 2 * ETCD_TIMEOUT))),
        }
    }

    /// Finds the group's leader, or becomes it; this node's role is then
    /// watched until it is lost (`OnLost`).
    pub fn elect(&self) -> Result<Elected, String> {
        self.ask(Command::Elect, ELECTION_TIMEOUT)
    }

    /// Records where this node's shards' logs began `epoch`, which it leads.
    pub fn record_start(&self, epoch: u64, start: EpochStart) -> Result<(), String> {
        self.ask(|reply| Command::RecordStart { epoch, start, reply }, 2 * ETCD_TIMEOUT)
    }

    /// Every recorded epoch start of this node's group.
    pub fn epoch_starts(&self) -> Result<BTreeMap<u64, EpochStart>, String> {
        self.ask(Command::EpochStarts, 2 * ETCD_TIMEOUT)
    }

    fn ask<T>(&self, command: impl FnOnce(Reply<T>) -> Command, limit: Duration) -> Result<T, String> {
        let (reply, answer) = mpsc::channel();
        self.commands.send(command(reply)).map_err(|_| "the control plane stopped".to_string())?;
        answer.recv_timeout(limit).map_err(|_| format!("no answer from the control plane within {limit:?}"))?
    }

    /// Revokes the registration and stops the thread.
    pub fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A registration: the client, the lease it lives under, and that lease's
/// keep-alive stream (opened once, renewed through for as long as it lasts).
struct Registered {
    client: etcd_client::Client,
    lease: i64,
    keeper: LeaseKeeper,
    answers: LeaseKeepAliveStream,
}

async fn register(config: &ClusterConfig) -> Result<Registered, String> {
    let mut client = registry::connect(&config.endpoints).await?;
    let ttl = config.lease_ttl.as_secs().max(1) as i64;
    let lease = client.lease_grant(ttl, None).await.map_err(|e| e.to_string())?.id();
    let node = Node::of(config, lease);
    let key = NodeKey::of(config).etcd_key();
    client.put(key, node.to_json(), Some(PutOptions::new().with_lease(lease))).await.map_err(|e| e.to_string())?;
    let (keeper, answers) = client.lease_keep_alive(lease).await.map_err(|e| e.to_string())?;
    tracing::info!(group = %config.group, node = %config.node, lease, "registered with etcd");
    Ok(Registered { client, lease, keeper, answers })
}

async fn run(
    config: ClusterConfig,
    ready: mpsc::Sender<Result<(), String>>,
    mut stop: oneshot::Receiver<()>,
    mut commands: tokio::sync::mpsc::UnboundedReceiver<Command>,
    on_lost: OnLost,
) {
    let mut registered = match register(&config).await {
        Ok(r) => r,
        Err(reason) => {
            let _ = ready.send(Err(reason));
            return;
        }
    };
    let _ = ready.send(Ok(()));
    let renew_every = (config.lease_ttl / 3).max(Duration::from_millis(100));
    let mut role: Option<Elected> = None;
    loop {
        tokio::select! {
            _ = &mut stop => break,
            asked = commands.recv() => {
                let Some(command) = asked else { break };
                serve_command(&config, &mut registered, &mut role, renew_every, command).await;
                continue;
            }
            _ = tokio::time::sleep(renew_every) => {}
        }
        if let Err(error) = renew(&mut registered).await {
            tracing::warn!(%error, lease = registered.lease, "the etcd lease was not renewed; registering again");
            if matches!(role, Some(Elected::Leader { .. })) {
                // Fenced: another node may be elected once the lease runs out.
                role = None;
                on_lost(format!("this node's etcd lease was not renewed ({error}); it no longer leads"));
            }
            match register(&config).await {
                Ok(r) => registered = r,
                Err(error) => tracing::error!(%error, "registering with etcd again failed; retrying"),
            }
            continue;
        }
        if let Some(why) = role_lost(&config, &mut registered.client, role.as_ref()).await {
            role = None;
            on_lost(why);
        }
    }
    let Registered { mut client, lease, .. } = registered;
    match tokio::time::timeout(ETCD_TIMEOUT, client.lease_revoke(lease)).await {
        Ok(Ok(_)) => tracing::info!(lease, "left the cluster: lease revoked"),
        _ => tracing::warn!(lease, "could not revoke the etcd lease; it runs out by itself"),
    }
}

async fn serve_command(
    config: &ClusterConfig,
    registered: &mut Registered,
    role: &mut Option<Elected>,
    pause: Duration,
    command: Command,
) {
    let in_time = |e: Result<Result<(), String>, tokio::time::error::Elapsed>| {
        e.unwrap_or_else(|_| Err(format!("no answer from etcd within {ETCD_TIMEOUT:?}")))
    };
    match command {
        Command::Elect(reply) => {
            let elected =
                tokio::time::timeout(ELECTION_TIMEOUT, find_or_become_leader(config, registered, pause)).await;
            let elected = elected.unwrap_or_else(|_| Err("the election timed out".into()));
            *role = elected.as_ref().ok().cloned();
            let _ = reply.send(elected);
        }
        Command::RecordStart { epoch, start, reply } => {
            let put = election::record_start(&mut registered.client, &config.group, epoch, &start);
            let _ = reply.send(in_time(tokio::time::timeout(ETCD_TIMEOUT, put).await));
        }
        Command::EpochStarts(reply) => {
            let got = tokio::time::timeout(ETCD_TIMEOUT, election::epoch_starts(&mut registered.client, &config.group));
            let got = got.await.unwrap_or_else(|_| Err(format!("no answer from etcd within {ETCD_TIMEOUT:?}")));
            let _ = reply.send(got);
        }
    }
}

/// The group's leader, or this node once it wins a campaign; renews the
/// lease while it waits for a stale leader key of its own to run out.
async fn find_or_become_leader(config: &ClusterConfig, r: &mut Registered, pause: Duration) -> Result<Elected, String> {
    loop {
        match election::current(&mut r.client, &config.group).await? {
            Some(leader) if leader.node != config.node => return Ok(Elected::Follower(leader)),
            Some(_) => {
                // This node's key from an earlier life: it goes when that lease runs out.
                tokio::time::sleep(pause).await;
                renew(r).await?;
            }
            None => {
                let won = election::campaign(&mut r.client, &config.group, &config.node, &config.advertise, r.lease);
                if let Some(epoch) = won.await? {
                    tracing::info!(group = %config.group, node = %config.node, epoch, "elected leader");
                    return Ok(Elected::Leader { epoch });
                }
            }
        }
    }
}

/// Why the elected role no longer holds, if it does not.
async fn role_lost(config: &ClusterConfig, client: &mut etcd_client::Client, role: Option<&Elected>) -> Option<String> {
    let role = role?;
    let current = match election::current(client, &config.group).await {
        Ok(current) => current,
        Err(error) => {
            tracing::warn!(%error, "reading the group's leader failed");
            return None;
        }
    };
    match (role, current) {
        (Elected::Leader { epoch }, Some(l)) if l.node == config.node && l.epoch == *epoch => None,
        (Elected::Follower(mine), Some(l)) if l == *mine => None,
        (_, Some(l)) => Some(format!("broker group {:?} is led by {} in epoch {} now", config.group, l.node, l.epoch)),
        (_, None) => Some(format!("broker group {:?} lost its leader", config.group)),
    }
}

/// Renews the lease once; an error if etcd did not confirm it alive.
async fn renew(r: &mut Registered) -> Result<(), String> {
    let renewal = async {
        r.keeper.keep_alive().await.map_err(|e| e.to_string())?;
        match r.answers.message().await.map_err(|e| e.to_string())? {
            Some(answer) if answer.ttl() > 0 => Ok(()),
            _ => Err("the lease expired".to_string()),
        }
    };
    tokio::time::timeout(ETCD_TIMEOUT, renewal).await.map_err(|_| "no answer from etcd".to_string())?
}
