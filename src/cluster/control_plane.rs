//! The control-plane thread: connects to etcd, registers this node under a
//! lease, renews the lease every third of its time to live, registers again
//! under a new lease if the old one is lost (etcd restarted, or the node was
//! cut off longer than the lease), and revokes it at a clean stop so the
//! node is gone at once rather than when the lease runs out.
//!
//! It also elects: asked, it finds the group's leader or campaigns to be it
//! (election.rs), then checks that role every renewal and whenever the
//! group's leader key changes (a follower starts the next election as soon
//! as etcd drops its leader's key). When the role is
//! lost (the leader's key is gone or has a new epoch, or this node's own
//! lease lapsed while it led) it says so, and the node restarts in the role
//! the next election gives it.
//!
//! And it keeps the cluster's view (groups, their leaders and shards, and
//! where topics live) from etcd, watched and re-read at every renewal,
//! published to the shards; it makes the topic changes they ask for. The
//! cluster's users, ACLs and quotas likewise: read at start, re-read at each
//! watched change, changed in etcd when the shards ask.

use super::accounts;
use super::cluster_id;
use super::election::{self, Campaign, EpochStart, Leadership};
use super::isr::{self, Isr, Lags, Tracker};
use super::moves;
use super::placement;
use super::rebalance;
use super::registry::{self, Node, NodeKey};
use super::store::{EtcdStore, Lease, Store, StoreError, Watch};
use super::transfer;
use super::{ClusterConfig, ETCD_TIMEOUT};
use crate::server::placement::{ClusterView, PlacementAsk, PlacementLink};
use crate::server::{Accounts, AccountsAsk, AccountsLink, Failure};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, RwLock};
use std::time::Duration;
use tokio::sync::{oneshot, watch};
use tokio::time::Instant;

/// Why the control plane could not start.
#[derive(Debug, thiserror::Error)]
pub enum ControlPlaneError {
    #[error("cannot register with etcd at {endpoints:?}: {reason}; is etcd running there (see --cluster)?")]
    Etcd { endpoints: Vec<String>, reason: Unregistered },
    #[error("cannot start the control-plane thread: {0}")]
    Thread(std::io::Error),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("the control plane stopped")]
    Stopped,
    #[error("no answer from the control plane within {0:?}")]
    NoAnswer(Duration),
    #[error("the election took longer than {0:?}")]
    ElectionTimedOut(Duration),
}

/// Why a node could not register with etcd.
#[derive(Debug, thiserror::Error)]
pub enum Unregistered {
    #[error("starting its runtime: {0}")]
    Runtime(std::io::Error),
    #[error(transparent)]
    Store(StoreError),
    #[error("no answer within {0:?}")]
    NoAnswer(Duration),
}

/// Longest an election may take before it is reported as failed.
const ELECTION_TIMEOUT: Duration = Duration::from_secs(60);
/// Longest a topic change may take, its groups applying it included.
const TOPIC_CHANGE_TIMEOUT: Duration = Duration::from_secs(20);
/// The etcd keys whose changes the control plane watches.
const WATCHED_PREFIX: &str = "/ringmq/";

/// This node's place in its group, as an election decided it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Elected {
    Leader { epoch: u64 },
    Follower(Leadership),
}

/// Called on the control-plane thread when the elected role is lost.
pub type OnLost = Box<dyn Fn(String) + Send>;

type Reply<T> = oneshot::Sender<Result<T, ControlPlaneError>>;

/// What the node asks of its control-plane thread.
enum Command {
    Elect(Reply<Elected>),
    RecordStart {
        epoch: u64,
        start: EpochStart,
        reply: Reply<()>,
    },
    EpochStarts(Reply<BTreeMap<u64, EpochStart>>),
    /// A leader's shard says how a follower does there.
    Follower(crate::server::FollowerReport),
    Placement(PlacementAsk),
    /// A change of the cluster's users, ACLs or quotas.
    Accounts(AccountsAsk),
}

/// The followers etcd lists as in sync, as the control plane publishes them.
type Confirmed = Arc<RwLock<BTreeSet<String>>>;
/// The newest report of each leader shard the control plane has acted on.
type Heard = Arc<RwLock<BTreeMap<usize, u64>>>;

/// What the control plane keeps while this node leads.
struct Leading {
    epoch: u64,
    tracker: Tracker,
    isr: Isr,
    revision: i64,
    lags: Lags,
    /// The newest topics revision this group's metadata is known to hold.
    applied: i64,
    /// When this leader first saw a request to hand over.
    transfer_seen: Option<Instant>,
    /// The members of an in-sync set write whose outcome is not known yet.
    attempted: Option<BTreeSet<String>>,
}

/// This node's link to the cluster's coordination store: etcd, through a
/// thread of its own (`start`), or a simulated store on the caller's
/// runtime (`on`).
pub struct ControlPlane {
    stop: Option<oneshot::Sender<()>>,
    commands: tokio::sync::mpsc::UnboundedSender<Command>,
    view: watch::Receiver<ClusterView>,
    deposed: Arc<AtomicBool>,
    accounts: Arc<Accounts>,
    confirmed: Confirmed,
    heard: Heard,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// The ends the control plane's loop keeps.
struct LoopEnds {
    stop: oneshot::Receiver<()>,
    commands: tokio::sync::mpsc::UnboundedReceiver<Command>,
    shared: Shared,
}

impl ControlPlane {
    /// A handle and the loop's ends, connected.
    fn parts(on_lost: OnLost) -> (ControlPlane, LoopEnds) {
        let (confirmed, heard) = (Confirmed::default(), Heard::default());
        let (stop_tx, stop) = oneshot::channel();
        let (commands_tx, commands) = tokio::sync::mpsc::unbounded_channel();
        let (view_tx, view) = watch::channel(ClusterView::default());
        let deposed = Arc::new(AtomicBool::new(false));
        // Filled from the store before the node serves; kept as the store holds them.
        let accounts = Arc::new(Accounts::new(Default::default(), Default::default(), Default::default()));
        let shared = Shared {
            confirmed: confirmed.clone(),
            heard: heard.clone(),
            on_lost,
            view: view_tx,
            deposed: deposed.clone(),
            accounts: accounts.clone(),
        };
        let handle = ControlPlane {
            stop: Some(stop_tx),
            commands: commands_tx,
            view,
            deposed,
            accounts,
            confirmed,
            heard,
            thread: None,
        };
        (handle, LoopEnds { stop, commands, shared })
    }

    /// Registers this node with the etcd `config` names and keeps its
    /// registration alive, on a thread of its own; returns once it is
    /// registered (or why it could not be).
    pub fn start(config: ClusterConfig, on_lost: OnLost) -> Result<ControlPlane, ControlPlaneError> {
        let (ready_tx, ready_rx) = mpsc::channel();
        let (mut handle, ends) = ControlPlane::parts(on_lost);
        let endpoints = config.endpoints.clone();
        let thread = std::thread::Builder::new()
            .name("ringmq-control".into())
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build();
                let Ok(runtime) = runtime.map_err(|e| ready_tx.send(Err(Unregistered::Runtime(e)))) else {
                    return;
                };
                runtime.block_on(async {
                    match EtcdStore::connect(&config.endpoints, ETCD_TIMEOUT).await {
                        Ok(store) => run(store, config, ready_tx, ends).await,
                        Err(e) => drop(ready_tx.send(Err(Unregistered::Store(e)))),
                    }
                })
            })
            .map_err(ControlPlaneError::Thread)?;
        handle.thread = Some(thread);
        let failed = |reason: Unregistered| ControlPlaneError::Etcd { endpoints: endpoints.clone(), reason };
        match ready_rx.recv_timeout(2 * ETCD_TIMEOUT) {
            Ok(Ok(())) => Ok(handle),
            Ok(Err(reason)) => Err(failed(reason)),
            Err(_) => Err(failed(Unregistered::NoAnswer(2 * ETCD_TIMEOUT))),
        }
    }

    /// The control plane of a node on `store`, and its loop for the caller
    /// to run where it likes (the simulator, on the node's own task set):
    /// it registers (retrying until it can) and an election waits for that.
    pub fn on<S: Store>(
        store: S,
        config: ClusterConfig,
        on_lost: OnLost,
    ) -> (ControlPlane, impl std::future::Future<Output = ()>) {
        let (handle, ends) = ControlPlane::parts(on_lost);
        let (ready, _) = mpsc::channel();
        (handle, run(store, config, ready, ends))
    }

    /// Finds the group's leader, or becomes it; this node's role is then
    /// watched until it is lost (`OnLost`).
    pub async fn elect(&self) -> Result<Elected, ControlPlaneError> {
        self.ask(Command::Elect, ELECTION_TIMEOUT).await
    }

    /// Records where this node's shards' logs began `epoch`, which it leads.
    pub async fn record_start(&self, epoch: u64, start: EpochStart) -> Result<(), ControlPlaneError> {
        self.ask(|reply| Command::RecordStart { epoch, start, reply }, 2 * ETCD_TIMEOUT).await
    }

    /// Every recorded epoch start of this node's group.
    pub async fn epoch_starts(&self) -> Result<BTreeMap<u64, EpochStart>, ControlPlaneError> {
        self.ask(Command::EpochStarts, 2 * ETCD_TIMEOUT).await
    }

    /// What a leader's shards share with the control plane: the in-sync
    /// set etcd confirmed, where they report their followers, whether the
    /// role is lost (or a leader's epoch not started yet), and which
    /// reports the control plane has acted on.
    pub fn isr_link(&self) -> crate::server::IsrLink {
        let commands = self.commands.clone();
        crate::server::IsrLink {
            confirmed: self.confirmed.clone(),
            report: Arc::new(move |report| {
                let _ = commands.send(Command::Follower(report));
            }),
            deposed: self.deposed.clone(),
            heard: self.heard.clone(),
        }
    }

    /// The shards' link to the cluster's view and topic changes.
    pub fn placement_link(&self) -> PlacementLink {
        let commands = self.commands.clone();
        let ask = Arc::new(move |asked| {
            if let Err(unsent) = commands.send(Command::Placement(asked)) {
                answer_stopped(unsent.0);
            }
        });
        PlacementLink { view: self.view.clone(), ask }
    }

    /// The shards' link to the cluster's users, ACLs and quotas.
    pub fn accounts_link(&self) -> AccountsLink {
        let commands = self.commands.clone();
        let ask = Arc::new(move |asked| {
            if let Err(unsent) = commands.send(Command::Accounts(asked)) {
                answer_stopped(unsent.0);
            }
        });
        AccountsLink { shared: self.accounts.clone(), ask }
    }

    /// Asks the control plane's loop (on a tokio runtime: its answer is
    /// awaited for at most `limit`).
    async fn ask<T>(&self, command: impl FnOnce(Reply<T>) -> Command, limit: Duration) -> Result<T, ControlPlaneError> {
        let (reply, answer) = oneshot::channel();
        self.commands.send(command(reply)).map_err(|_| ControlPlaneError::Stopped)?;
        match tokio::time::timeout(limit, answer).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(_)) => Err(ControlPlaneError::Stopped),
            Err(_) => Err(ControlPlaneError::NoAnswer(limit)),
        }
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

/// A registration: the store, the lease it lives under, and the watch of
/// the cluster's keys (None once it ended: the view then follows the
/// renewals).
struct Registered<S> {
    store: S,
    lease: Lease,
    events: Option<Watch>,
    /// The lease runs out at the store no sooner than this: the time to live
    /// it granted, counted from before the last renewal it confirmed was sent.
    expires: Instant,
}

/// What the control-plane thread shares with the node.
struct Shared {
    confirmed: Confirmed,
    /// The newest report of each leader shard acted on.
    heard: Heard,
    on_lost: OnLost,
    view: watch::Sender<ClusterView>,
    /// Set the moment the role is lost: the shards refuse clients at once,
    /// before the node has stopped them.
    deposed: Arc<AtomicBool>,
    /// The cluster's users, ACLs and quotas, as etcd holds them.
    accounts: Arc<Accounts>,
}

async fn register<S: Store>(store: &S, config: &ClusterConfig) -> Result<Registered<S>, StoreError> {
    let asked = Instant::now();
    let (lease, ttl) = store.grant(config.lease_ttl).await?;
    let node = Node::of(config, lease);
    store.put(&NodeKey::of(config).etcd_key(), node.to_json().into_bytes(), Some(lease)).await?;
    let events = store.watch(WATCHED_PREFIX).await?;
    tracing::info!(group = %config.broker_group, node = %config.node, lease, ttl_s = ttl.as_secs(), "registered with etcd");
    if ttl > config.lease_ttl.max(Duration::from_secs(1)) {
        // etcd's floor is 1.5 election timeouts (2 s with its defaults).
        tracing::warn!(asked_ms = config.lease_ttl.as_millis() as u64, granted_s = ttl.as_secs(), "etcd granted a longer lease than --lease-ms asks: a paused or cut-off leader is replaced after the granted time");
    }
    Ok(Registered { store: store.clone(), lease, events: Some(events), expires: asked + ttl })
}

async fn run<S: Store>(store: S, config: ClusterConfig, ready: mpsc::Sender<Result<(), Unregistered>>, ends: LoopEnds) {
    let LoopEnds { mut stop, mut commands, shared } = ends;
    let renew_every = (config.lease_ttl / 3).max(Duration::from_millis(100));
    let start = async || {
        let registered = register(&store, &config).await?;
        cluster_id::ensure(&registered.store).await?;
        refresh_view(&registered.store, &shared.view).await;
        refresh_accounts(&registered.store, &shared.accounts).await?;
        Ok::<_, StoreError>(registered)
    };
    let mut registered = loop {
        match start().await {
            Ok(registered) => break registered,
            // Told to whoever waits for the start; with nobody waiting (a
            // spawned control plane) it tries again.
            Err(error) => {
                let Err(mpsc::SendError(Err(Unregistered::Store(error)))) = ready.send(Err(Unregistered::Store(error)))
                else {
                    return;
                };
                tracing::warn!(%error, "registering failed; trying again");
                tokio::time::sleep(renew_every).await;
            }
        }
    };
    let _ = ready.send(Ok(()));
    let mut role: Option<Elected> = None;
    let mut leading: Option<Leading> = None;
    // One ticker for the whole loop: commands arriving more often than the
    // renewal period must not keep putting the renewal off.
    let mut ticker = tokio::time::interval(renew_every);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticker.tick().await;
    loop {
        // Biased, in this order: the renewal is never put off by events or
        // commands, and a simulation replays the same choices.
        tokio::select! {
            biased;
            _ = &mut stop => break,
            _ = ticker.tick() => {}
            asked = commands.recv() => {
                let Some(command) = asked else { break };
                let state = (&mut role, &mut leading, &shared);
                serve_command(&config, &mut registered, renew_every, command, state).await;
                continue;
            }
            event = next_event(&mut registered.events) => {
                match event {
                    Some(keys) => {
                        if keys.iter().any(|k| placement::moves_the_view(k)) {
                            refresh_view(&registered.store, &shared.view).await;
                        }
                        if keys.iter().any(|k| accounts::moves_accounts(k)) {
                            if let Err(error) = refresh_accounts(&registered.store, &shared.accounts).await {
                                tracing::warn!(%error, "reading the cluster's users, ACLs and quotas failed");
                            }
                        }
                        // A follower learns that its leader's key went (its
                        // lease ran out) now, not at its next renewal: the
                        // election starts that much sooner.
                        if keys.contains(&election::leader_key(&config.broker_group)) {
                            let limit = registered.time_left();
                            let lost = tokio::time::timeout(limit, role_lost(&config, &registered.store, role.as_ref()));
                            if let Ok(Some(why)) = lost.await {
                                depose(&mut role, &mut leading, &shared, why);
                            }
                        }
                    }
                    None => {
                        tracing::warn!("the etcd watch ended; the cluster view follows the lease renewals");
                        registered.events = None;
                    }
                }
                continue;
            }
        }
        if let Err(error) = renew(&mut registered).await {
            tracing::warn!(%error, lease = registered.lease, "the etcd lease was not renewed; registering again");
            if matches!(role, Some(Elected::Leader { .. })) {
                // Fenced: another node may be elected once the lease runs out.
                let why = format!("this node's etcd lease was not renewed ({error}); it no longer leads");
                depose(&mut role, &mut leading, &shared, why);
            }
            match register(&store, &config).await {
                Ok(r) => registered = r,
                Err(error) => tracing::error!(%error, "registering with etcd again failed; retrying"),
            }
            continue;
        }
        // Whatever etcd does not answer in time waits for the next
        // renewal: that one must come before the lease may run out.
        let limit = registered.time_left();
        let store = &registered.store;
        let (state, lease) = ((&mut role, &mut leading, &shared), registered.lease);
        if tokio::time::timeout(limit, watch_role(&config, store, lease, state)).await.is_err() {
            tracing::warn!(?limit, "etcd did not answer in time; renewing the lease first");
        }
    }
    let Registered { store, lease, .. } = registered;
    match tokio::time::timeout(ETCD_TIMEOUT, store.revoke(lease)).await {
        Ok(Ok(_)) => tracing::info!(lease, "left the cluster: lease revoked"),
        _ => tracing::warn!(lease, "could not revoke the etcd lease; it runs out by itself"),
    }
}

/// After a renewal: the view, whether the role still holds, and while
/// leading the in-sync set, the lags and a requested hand-over.
async fn watch_role<S: Store>(config: &ClusterConfig, store: &S, lease: Lease, state: RoleState<'_>) {
    let (role, leading, shared) = state;
    refresh_view(store, &shared.view).await;
    if let Some(why) = role_lost(config, store, role.as_ref()).await {
        depose(role, leading, shared, why);
    }
    if let (Some(Elected::Leader { epoch }), None) = (role.as_ref(), leading.as_ref()) {
        // The in-sync set could not be read when this node was elected:
        // without it no follower would ever count, and no write be acknowledged.
        *leading = start_leading(config, store, *epoch).await;
    }
    if let Some(l) = leading.as_mut() {
        note_registered(config, store, l).await;
        l.lags.store(store, &config.broker_group, lease).await;
        if let Some(why) = update_isr(config, store, l, &shared.confirmed).await {
            depose(role, leading, shared, why);
        } else if let Some(why) = hand_over(config, store, lease, l).await {
            depose(role, leading, shared, why);
        }
    }
}

/// The keys of the next change (never, once the watch ended).
async fn next_event(events: &mut Option<Watch>) -> Option<Vec<String>> {
    match events {
        Some(events) => events.next().await,
        None => std::future::pending().await,
    }
}

/// Reads the cluster's users, ACLs and quotas and gives the shards those that changed.
async fn refresh_accounts<S: Store>(store: &S, held: &Accounts) -> Result<(), StoreError> {
    let read = tokio::time::timeout(ETCD_TIMEOUT, accounts::read(store)).await;
    let (users, acls, quotas) = read.map_err(|_| no_answer())??;
    held.follow(users, acls, quotas);
    Ok(())
}

/// Reads the cluster's view and publishes it if its groups or topics moved.
async fn refresh_view<S: Store>(store: &S, view: &watch::Sender<ClusterView>) {
    let next = match tokio::time::timeout(ETCD_TIMEOUT, placement::read_view(store)).await {
        Ok(Ok(next)) => next,
        Ok(Err(error)) => return tracing::warn!(%error, "reading the cluster's topics and groups failed"),
        Err(_) => return tracing::warn!("reading the cluster's topics and groups timed out"),
    };
    view.send_if_modified(|v| {
        let moved =
            v.revision == 0 || v.groups != next.groups || v.topics != next.topics || v.cluster_id != next.cluster_id;
        if moved {
            *v = next;
        }
        moved
    });
}

/// The role and, while leading, what the control plane keeps for it.
type RoleState<'a> = (&'a mut Option<Elected>, &'a mut Option<Leading>, &'a Shared);

async fn serve_command<S: Store>(
    config: &ClusterConfig,
    registered: &mut Registered<S>,
    pause: Duration,
    command: Command,
    (role, leading, shared): RoleState<'_>,
) {
    let in_time =
        |e: Result<Result<(), StoreError>, tokio::time::error::Elapsed>| e.unwrap_or_else(|_| Err(no_answer()));
    match command {
        Command::Elect(reply) => {
            let elected =
                tokio::time::timeout(ELECTION_TIMEOUT, find_or_become_leader(config, registered, pause)).await;
            let elected = match elected {
                Ok(elected) => elected.map_err(ControlPlaneError::from),
                Err(_) => Err(ControlPlaneError::ElectionTimedOut(ELECTION_TIMEOUT)),
            };
            *role = elected.as_ref().ok().cloned();
            *leading = match &elected {
                Ok(Elected::Leader { epoch }) => start_leading(config, &registered.store, *epoch).await,
                _ => None,
            };
            // The shards start once this answers: they must see the stored
            // set from their first produce, and their group's leader in the view.
            publish_confirmed(config, leading.as_ref(), &shared.confirmed);
            refresh_view(&registered.store, &shared.view).await;
            // A leader's shards take writes once its epoch's start is recorded (RecordStart).
            shared.deposed.store(matches!(elected, Ok(Elected::Leader { .. })), Ordering::Release);
            let _ = reply.send(elected);
        }
        Command::Follower(report) => {
            let limit = registered.time_left();
            if let Some(l) = leading.as_mut() {
                let changed = async {
                    if report.in_sync && !l.tracker.is_registered(&report.follower) {
                        // A follower that just started: let it join now, not at the next renewal.
                        note_registered(config, &registered.store, l).await;
                    }
                    l.tracker.note(report.shard, &report.follower, report.in_sync);
                    l.lags.note(&report);
                    update_isr(config, &registered.store, l, &shared.confirmed).await
                };
                // Not past the time the lease must be renewed by; the next report or renewal retries.
                match tokio::time::timeout(limit, changed).await {
                    Ok(Some(why)) => depose(role, leading, shared, why),
                    // Acted on: the set etcd may list is published (a follower
                    // this report takes out stops counting on its shard now).
                    Ok(None) => {
                        let mut heard = shared.heard.write().expect("no thread panics holding it");
                        let seen = heard.entry(report.shard).or_default();
                        *seen = (*seen).max(report.seq);
                    }
                    Err(_) => {}
                }
            }
        }
        Command::RecordStart { epoch, start, reply } => {
            let put = election::record_start(&registered.store, &config.broker_group, epoch, &start);
            let recorded = in_time(tokio::time::timeout(ETCD_TIMEOUT, put).await);
            if recorded.is_ok() && *role == Some(Elected::Leader { epoch }) {
                shared.deposed.store(false, Ordering::Release);
            }
            let _ = reply.send(recorded.map_err(Into::into));
        }
        Command::EpochStarts(reply) => {
            let got =
                tokio::time::timeout(ETCD_TIMEOUT, election::epoch_starts(&registered.store, &config.broker_group));
            let got = got.await.unwrap_or_else(|_| Err(no_answer()));
            let _ = reply.send(got.map_err(Into::into));
        }
        Command::Placement(PlacementAsk::Applied(revision)) => {
            let Some(l) = leading.as_mut().filter(|l| revision > l.applied) else { return };
            let put = placement::store_applied(&registered.store, &config.broker_group, revision);
            match in_time(tokio::time::timeout(ETCD_TIMEOUT, put).await) {
                Ok(()) => l.applied = revision,
                Err(error) => tracing::warn!(%error, revision, "recording the topics this group applied failed"),
            }
        }
        Command::Placement(PlacementAsk::Load { shard, loads }) => {
            if leading.is_none() {
                return;
            }
            let (store, key) = (registered.store.clone(), rebalance::load_key(&config.broker_group, shard));
            let (json, lease) = (serde_json::to_vec(&loads).expect("loads serialize"), registered.lease);
            tokio::spawn(async move {
                // A status, as the lags: a failed write is only logged.
                if let Err(error) = store.put(&key, json, Some(lease)).await {
                    tracing::warn!(%error, "storing the queues' loads failed");
                }
            });
        }
        Command::Placement(PlacementAsk::ElectPreferred { broker_group, reply }) => {
            let store = registered.store.clone();
            tokio::spawn(async move {
                let elected = tokio::time::timeout(ETCD_TIMEOUT, transfer::elect_preferred(&store, &broker_group));
                let elected = elected.await.unwrap_or_else(|_| Err(no_answer()));
                let _ = reply.send(elected.map_err(Failure::cluster_unavailable));
            });
        }
        Command::Placement(change) => {
            // Served on a task of its own: it waits for this group's shards,
            // which tell the control plane through this loop.
            tokio::spawn(change_topics(registered.store.clone(), change));
        }
        Command::Accounts(AccountsAsk { change, reply }) => {
            let (store, held) = (registered.store.clone(), shared.accounts.clone());
            tokio::spawn(async move {
                let made = tokio::time::timeout(ETCD_TIMEOUT, accounts::change(&store, &change)).await;
                let made = made.unwrap_or_else(|_| {
                    Err(Failure::cluster_unavailable(format!("no answer from etcd within {ETCD_TIMEOUT:?}")))
                });
                if made.is_ok() {
                    // This node sees its own change at once, not at the watch's event.
                    if let Err(error) = refresh_accounts(&store, &held).await {
                        tracing::warn!(%error, "reading the cluster's users, ACLs and quotas failed");
                    }
                }
                let _ = reply.send(made);
            });
        }
    }
}

/// Makes a topic change in etcd and waits for the groups to apply it.
async fn change_topics<S: Store>(store: S, change: PlacementAsk) {
    let (revision, reply) = match change {
        PlacementAsk::Create { topic, reply } => {
            let made = async {
                let view = placement::read_view(&store).await.map_err(Failure::cluster_unavailable)?;
                placement::create(&store, &view, &topic).await
            };
            (tokio::time::timeout(ETCD_TIMEOUT, made).await, reply)
        }
        PlacementAsk::Delete { name, reply } => {
            (tokio::time::timeout(ETCD_TIMEOUT, placement::delete(&store, &name)).await, reply)
        }
        PlacementAsk::AddQueues { name, queues, reply } => {
            let made = async {
                let view = placement::read_view(&store).await.map_err(Failure::cluster_unavailable)?;
                placement::add_queues(&store, &view, &name, queues).await
            };
            (tokio::time::timeout(ETCD_TIMEOUT, made).await, reply)
        }
        PlacementAsk::Configure { name, changes, reply } => {
            (tokio::time::timeout(ETCD_TIMEOUT, placement::configure(&store, &name, &changes)).await, reply)
        }
        PlacementAsk::Move { topic, queue, to: Some(to), reply } => {
            (tokio::time::timeout(ETCD_TIMEOUT, moves::start(&store, &topic, queue, to)).await, reply)
        }
        PlacementAsk::Move { topic, queue, to: None, reply } => {
            (tokio::time::timeout(ETCD_TIMEOUT, moves::cancel(&store, &topic, queue)).await, reply)
        }
        PlacementAsk::MoveStep { step, topic, created, queue, to, reply } => {
            // The target's own step: it learns the outcome from its copy, not from the groups' application.
            let stepped = tokio::time::timeout(ETCD_TIMEOUT, moves::step(&store, step, &topic, created, queue, &to));
            let stepped = stepped.await.unwrap_or_else(|_| Err(no_answer_within()));
            return drop(reply.send(stepped.map(drop)));
        }
        PlacementAsk::Applied(_) | PlacementAsk::ElectPreferred { .. } | PlacementAsk::Load { .. } => {
            unreachable!("served by the control plane's loop")
        }
    };
    let revision = match revision {
        Ok(Ok(revision)) => revision,
        Ok(Err(failure)) => return drop(reply.send(Err(failure))),
        Err(_) => return drop(reply.send(Err(no_answer_within()))),
    };
    let applied = tokio::time::timeout(TOPIC_CHANGE_TIMEOUT, placement::wait_applied(&store, revision)).await;
    match applied {
        Ok(Ok(())) => {}
        Ok(Err(error)) => tracing::warn!(%error, "a topic change is stored in etcd but not applied everywhere yet"),
        Err(_) => tracing::warn!(revision, "a topic change is stored in etcd; its groups did not say they applied it"),
    }
    let _ = reply.send(Ok(()));
}

fn no_answer_within() -> Failure {
    Failure::cluster_unavailable(format!("no answer within {ETCD_TIMEOUT:?}"))
}

/// Answers a topic change the stopped control plane can no longer make.
fn answer_stopped(unsent: Command) {
    let stopped = || Err(Failure::cluster_unavailable("the control plane stopped"));
    match unsent {
        Command::Placement(
            PlacementAsk::Create { reply, .. }
            | PlacementAsk::Delete { reply, .. }
            | PlacementAsk::Configure { reply, .. }
            | PlacementAsk::AddQueues { reply, .. }
            | PlacementAsk::Move { reply, .. }
            | PlacementAsk::MoveStep { reply, .. },
        ) => {
            let _ = reply.send(stopped());
        }
        Command::Accounts(AccountsAsk { reply, .. }) => {
            let _ = reply.send(stopped().map(|()| 0));
        }
        Command::Placement(PlacementAsk::ElectPreferred { reply, .. }) => {
            let _ = reply.send(Err(Failure::cluster_unavailable("the control plane stopped")));
        }
        _ => {}
    }
}

/// The group's leader, or this node once it wins a campaign; renews the
/// lease while it waits for a stale leader key of its own to run out.
async fn find_or_become_leader<S: Store>(
    config: &ClusterConfig,
    r: &mut Registered<S>,
    pause: Duration,
) -> Result<Elected, StoreError> {
    loop {
        match election::current(&r.store, &config.broker_group).await? {
            Some(leader) if leader.node != config.node => return Ok(Elected::Follower(leader)),
            // Won under this registration (the answer to an election that
            // took too long, or the node asking again): it leads that epoch.
            Some(leader) if leader.lease == r.lease => return Ok(Elected::Leader { epoch: leader.epoch }),
            Some(_) => {
                // This node's key from an earlier life: it goes when that lease runs out.
                tokio::time::sleep(pause).await;
                renew(r).await?;
            }
            None => {
                let attempt = election::campaign(
                    &r.store,
                    &config.broker_group,
                    &config.node,
                    &config.advertise,
                    config.shards,
                    r.lease,
                );
                match attempt.await? {
                    Campaign::Won { epoch, isr } => {
                        let members = &isr.members;
                        tracing::info!(group = %config.broker_group, node = %config.node, epoch, ?members, "elected leader");
                        return Ok(Elected::Leader { epoch });
                    }
                    Campaign::Lost => tokio::time::sleep(pause / 4).await,
                    Campaign::MakeWay(to) => {
                        tracing::info!(group = %config.broker_group, node = %config.node, %to, "making way for the node a transfer names");
                        tokio::time::sleep(pause / 4).await;
                        renew(r).await?;
                    }
                    Campaign::NotInSync(members) => {
                        tracing::info!(group = %config.broker_group, node = %config.node, ?members, "not in sync: waiting for a member of the in-sync set to lead");
                        tokio::time::sleep(pause).await;
                        renew(r).await?;
                    }
                }
            }
        }
    }
}

/// This node no longer leads: the shards count no follower and the node restarts in a new role.
fn depose(role: &mut Option<Elected>, leading: &mut Option<Leading>, shared: &Shared, why: String) {
    *role = None;
    *leading = None;
    shared.deposed.store(true, Ordering::Release);
    *shared.confirmed.write().expect("no thread panics holding it") = BTreeSet::new();
    (shared.on_lost)(why);
}

/// The in-sync set as this node begins to lead `epoch` (stored by its campaign).
async fn start_leading<S: Store>(config: &ClusterConfig, store: &S, epoch: u64) -> Option<Leading> {
    match isr::read(store, &config.broker_group).await {
        Ok((Some(isr), revision)) => {
            let tracker = Tracker::new(&config.node, config.shards, &isr.members);
            let lags = Lags::default();
            let (applied, transfer_seen, attempted) = (0, None, None);
            let mut leading = Leading { epoch, tracker, isr, revision, lags, applied, transfer_seen, attempted };
            // A stored member whose lease is gone (the paused leader this one replaces) is out at once.
            note_registered(config, store, &mut leading).await;
            Some(leading)
        }
        Ok((None, _)) => {
            tracing::error!(group = %config.broker_group, "the campaign stored no in-sync set");
            None
        }
        Err(error) => {
            tracing::error!(%error, "reading the in-sync set failed");
            None
        }
    }
}

/// Hands the lead over if a transfer asks for it and its target is in
/// sync and caught up (or has had `CATCH_UP_WAIT`): says why once this
/// node no longer leads.
async fn hand_over<S: Store>(config: &ClusterConfig, store: &S, lease: Lease, l: &mut Leading) -> Option<String> {
    let to = match transfer::make_way_for(store, &config.broker_group, &config.node).await {
        Ok(Some(to)) if l.isr.members.contains(&to) => to,
        Ok(_) => return None,
        Err(error) => {
            tracing::warn!(%error, "reading the transfer request failed");
            return None;
        }
    };
    let seen = *l.transfer_seen.get_or_insert_with(Instant::now);
    let caught_up = l.lags.summed().get(&to).is_some_and(|lag| lag.lag_bytes == 0);
    if !caught_up && seen.elapsed() < transfer::CATCH_UP_WAIT {
        return None;
    }
    let (node, advertise) = (config.node.clone(), config.advertise.clone());
    let mine = Leadership { node, advertise, epoch: l.epoch, lease };
    match transfer::resign(store, &config.broker_group, &mine).await {
        Ok(_) => {
            tracing::info!(group = %config.broker_group, %to, caught_up, "handing the lead over");
            Some(format!("the lead of broker group {:?} goes to {to} (cluster transfer-leader)", config.broker_group))
        }
        Err(error) => {
            tracing::warn!(%error, "giving up the lead failed; retrying");
            None
        }
    }
}

/// Tells the tracker which of the group's nodes are registered now.
async fn note_registered<S: Store>(config: &ClusterConfig, store: &S, l: &mut Leading) {
    match registry::group_nodes(store, &config.broker_group).await {
        Ok(alive) => l.tracker.set_registered(alive.into_iter().collect()),
        Err(error) => tracing::warn!(%error, "listing the group's nodes failed"),
    }
}

/// Stores the in-sync set the shards' reports call for, by compare-and-swap;
/// the shards count a follower only once etcd lists it, and stop counting it
/// only once etcd no longer does. Says why if a later epoch deposed this leader.
async fn update_isr<S: Store>(
    config: &ClusterConfig,
    store: &S,
    l: &mut Leading,
    confirmed: &Confirmed,
) -> Option<String> {
    if l.attempted.is_some() {
        // A write whose outcome is unknown (its answer lost, or cut short):
        // what etcd holds is read before anything else is decided.
        match isr::read(store, &config.broker_group).await {
            Ok((Some(stored), _)) if stored.epoch > l.epoch => {
                return Some(format!("epoch {} of broker group {:?} began", stored.epoch, config.broker_group));
            }
            Ok((Some(stored), revision)) => {
                (l.isr, l.revision, l.attempted) = (stored, revision, None);
            }
            _ => {}
        }
    }
    let desired = l.tracker.desired();
    if desired != l.isr.members && l.attempted.is_none() {
        let next = Isr { epoch: l.epoch, members: desired };
        // Until its outcome is known, the shards count the members of both sets.
        l.attempted = Some(next.members.clone());
        publish_confirmed(config, Some(l), confirmed);
        match isr::write(store, &config.broker_group, &next, l.revision).await {
            Ok(Some(revision)) => {
                tracing::info!(group = %config.broker_group, members = ?next.members, "in-sync set changed");
                (l.isr, l.revision, l.attempted) = (next, revision, None);
            }
            Ok(None) => {
                l.attempted = None;
                let stored = isr::read(store, &config.broker_group).await;
                tracing::warn!(group = %config.broker_group, node = %config.node, epoch = l.epoch, revision = l.revision, ?stored, "the in-sync set or the epoch moved under this leader");
                match stored {
                    Ok((Some(stored), _)) if stored.epoch > l.epoch => {
                        return Some(format!("epoch {} of broker group {:?} began", stored.epoch, config.broker_group));
                    }
                    Ok((Some(stored), revision)) => {
                        l.isr = stored;
                        l.revision = revision;
                    }
                    _ => {}
                }
            }
            Err(error) => tracing::warn!(%error, "storing the in-sync set failed; retrying"),
        }
    }
    publish_confirmed(config, Some(l), confirmed);
    None
}

/// Makes the followers etcd lists (none while not leading), and those of
/// a write whose outcome is unknown, the ones the shards count.
fn publish_confirmed(config: &ClusterConfig, leading: Option<&Leading>, confirmed: &Confirmed) {
    let listed = |l: &Leading| l.isr.members.iter().chain(l.attempted.iter().flatten()).cloned().collect::<Vec<_>>();
    let members = leading.map(|l| listed(l).into_iter().filter(|m| *m != config.node).collect());
    *confirmed.write().expect("no thread panics holding it") = members.unwrap_or_default();
}

/// Why the elected role no longer holds, if it does not.
async fn role_lost<S: Store>(config: &ClusterConfig, store: &S, role: Option<&Elected>) -> Option<String> {
    let role = role?;
    let current = match election::current(store, &config.broker_group).await {
        Ok(current) => current,
        Err(error) => {
            tracing::warn!(%error, "reading the group's leader failed");
            return None;
        }
    };
    match (role, current) {
        (Elected::Leader { epoch }, Some(l)) if l.node == config.node && l.epoch == *epoch => None,
        (Elected::Follower(mine), Some(l)) if l == *mine => None,
        (_, Some(l)) => {
            Some(format!("broker group {:?} is led by {} in epoch {} now", config.broker_group, l.node, l.epoch))
        }
        (_, None) => Some(format!("broker group {:?} lost its leader", config.broker_group)),
    }
}

/// Renews the lease once; an error if etcd did not confirm it alive.
impl<S> Registered<S> {
    /// How long store calls may take before the lease must be renewed.
    fn time_left(&self) -> Duration {
        ETCD_TIMEOUT.min(self.expires.saturating_duration_since(Instant::now()))
    }
}

fn no_answer() -> StoreError {
    StoreError::Unavailable(format!("no answer within {ETCD_TIMEOUT:?}"))
}

/// Renews the lease once; an error if the store did not confirm it alive
/// before it may have run out: a leader cut off from the store fences
/// itself by then, not one store timeout later.
async fn renew<S: Store>(r: &mut Registered<S>) -> Result<(), StoreError> {
    let asked = Instant::now();
    let limit = r.time_left();
    let renewal = tokio::time::timeout(limit, r.store.keep_alive(r.lease)).await;
    let ttl = renewal.map_err(|_| StoreError::Unavailable(format!("no answer within {limit:?}")))??;
    r.expires = asked + ttl;
    Ok(())
}
