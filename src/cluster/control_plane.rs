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
use super::election::{self, Campaign, EpochStart, Leadership};
use super::isr::{self, Isr, Lags, Tracker};
use super::placement;
use super::registry::{self, Node, NodeKey};
use super::transfer;
use super::{ClusterConfig, ETCD_TIMEOUT};
use crate::server::placement::{ClusterView, PlacementAsk, PlacementLink};
use crate::server::{Accounts, AccountsAsk, AccountsLink, Failure};
use etcd_client::{LeaseKeepAliveStream, LeaseKeeper, PutOptions, WatchOptions, WatchResponse, WatchStream};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, RwLock};
use std::time::Duration;
use tokio::sync::{oneshot, watch};

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

type Reply<T> = mpsc::Sender<Result<T, String>>;

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
pub type Confirmed = Arc<RwLock<BTreeSet<String>>>;

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
    transfer_seen: Option<std::time::Instant>,
}

/// This node's link to the cluster's etcd, on a thread of its own.
pub struct ControlPlane {
    stop: Option<oneshot::Sender<()>>,
    commands: tokio::sync::mpsc::UnboundedSender<Command>,
    view: watch::Receiver<ClusterView>,
    deposed: Arc<AtomicBool>,
    accounts: Arc<Accounts>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ControlPlane {
    /// Registers this node and keeps its registration alive; returns once it
    /// is registered (or why it could not be).
    pub fn start(
        config: ClusterConfig,
        on_lost: OnLost,
        confirmed: Confirmed,
    ) -> Result<ControlPlane, ControlPlaneError> {
        let (ready_tx, ready_rx) = mpsc::channel();
        let (stop_tx, stop_rx) = oneshot::channel();
        let (commands_tx, commands_rx) = tokio::sync::mpsc::unbounded_channel();
        let (view_tx, view) = watch::channel(ClusterView::default());
        let deposed = Arc::new(AtomicBool::new(false));
        // Filled from etcd before `start` returns; kept as etcd holds them.
        let accounts = Arc::new(Accounts::new(Default::default(), Default::default(), Default::default()));
        let shared = Shared { confirmed, on_lost, view: view_tx, deposed: deposed.clone(), accounts: accounts.clone() };
        let endpoints = config.endpoints.clone();
        let thread = std::thread::Builder::new()
            .name("ringmq-control".into())
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build();
                match runtime {
                    Ok(runtime) => runtime.block_on(run(config, ready_tx, stop_rx, commands_rx, shared)),
                    Err(e) => {
                        let _ = ready_tx.send(Err(format!("starting its runtime: {e}")));
                    }
                }
            })
            .map_err(|e| ControlPlaneError::Thread(e.to_string()))?;
        let failed = |reason: String| ControlPlaneError::Etcd { endpoints: endpoints.clone(), reason };
        match ready_rx.recv_timeout(2 * ETCD_TIMEOUT) {
            Ok(Ok(())) => {
                let thread = Some(thread);
                Ok(ControlPlane { stop: Some(stop_tx), commands: commands_tx, view, deposed, accounts, thread })
            }
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

    /// What a leader's shards call when a follower's in-sync state changes there.
    pub fn in_sync_reporter(&self) -> crate::server::InSyncReport {
        let commands = self.commands.clone();
        Arc::new(move |report| {
            let _ = commands.send(Command::Follower(report));
        })
    }

    /// True from the moment the elected role is lost until the next election.
    pub fn deposed(&self) -> Arc<AtomicBool> {
        self.deposed.clone()
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
/// keep-alive stream (opened once, renewed through for as long as it lasts),
/// and the watch of the cluster's keys (None once it failed: the view then
/// follows the renewals).
struct Registered {
    client: etcd_client::Client,
    lease: i64,
    keeper: LeaseKeeper,
    answers: LeaseKeepAliveStream,
    events: Option<WatchStream>,
    /// The lease runs out at etcd no sooner than this: the time to live
    /// etcd granted, counted from before the last renewal it confirmed was sent.
    expires: std::time::Instant,
}

/// What the control-plane thread shares with the node.
struct Shared {
    confirmed: Confirmed,
    on_lost: OnLost,
    view: watch::Sender<ClusterView>,
    /// Set the moment the role is lost: the shards refuse clients at once,
    /// before the node has stopped them.
    deposed: Arc<AtomicBool>,
    /// The cluster's users, ACLs and quotas, as etcd holds them.
    accounts: Arc<Accounts>,
}

async fn register(config: &ClusterConfig) -> Result<Registered, String> {
    let mut client = registry::connect(&config.endpoints).await?;
    let asked_ttl = config.lease_ttl.as_secs().max(1) as i64;
    let asked = std::time::Instant::now();
    let granted = client.lease_grant(asked_ttl, None).await.map_err(|e| e.to_string())?;
    let (lease, ttl) = (granted.id(), granted.ttl().max(1));
    let node = Node::of(config, lease);
    let key = NodeKey::of(config).etcd_key();
    client.put(key, node.to_json(), Some(PutOptions::new().with_lease(lease))).await.map_err(|e| e.to_string())?;
    let (keeper, answers) = client.lease_keep_alive(lease).await.map_err(|e| e.to_string())?;
    let watched = client.watch(WATCHED_PREFIX, Some(WatchOptions::new().with_prefix())).await;
    let events = watched.map_err(|e| e.to_string())?;
    tracing::info!(group = %config.group, node = %config.node, lease, ttl_s = ttl, "registered with etcd");
    if ttl > asked_ttl {
        // etcd's floor is 1.5 election timeouts (2 s with its defaults).
        tracing::warn!(asked_s = asked_ttl, granted_s = ttl, "etcd granted a longer lease than --lease-ms asks: a paused or cut-off leader is replaced after the granted time");
    }
    let expires = asked + Duration::from_secs(ttl as u64);
    Ok(Registered { client, lease, keeper, answers, events: Some(events), expires })
}

async fn run(
    config: ClusterConfig,
    ready: mpsc::Sender<Result<(), String>>,
    mut stop: oneshot::Receiver<()>,
    mut commands: tokio::sync::mpsc::UnboundedReceiver<Command>,
    shared: Shared,
) {
    let mut registered = match register(&config).await {
        Ok(r) => r,
        Err(reason) => {
            let _ = ready.send(Err(reason));
            return;
        }
    };
    refresh_view(&mut registered.client, &shared.view).await;
    if let Err(reason) = refresh_accounts(&mut registered.client, &shared.accounts).await {
        let _ = ready.send(Err(format!("reading the cluster's users, ACLs and quotas: {reason}")));
        return;
    }
    let _ = ready.send(Ok(()));
    let renew_every = (config.lease_ttl / 3).max(Duration::from_millis(100));
    let mut role: Option<Elected> = None;
    let mut leading: Option<Leading> = None;
    // One ticker for the whole loop: commands arriving more often than the
    // renewal period must not keep putting the renewal off.
    let mut ticker = tokio::time::interval(renew_every);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticker.tick().await;
    loop {
        tokio::select! {
            _ = &mut stop => break,
            asked = commands.recv() => {
                let Some(command) = asked else { break };
                let state = (&mut role, &mut leading, &shared);
                serve_command(&config, &mut registered, renew_every, command, state).await;
                continue;
            }
            event = next_event(&mut registered.events) => {
                match event {
                    Ok(Some(event)) => {
                        let keys: Vec<&[u8]> = event.events().iter().filter_map(|e| e.kv().map(|kv| kv.key())).collect();
                        if keys.iter().any(|k| placement::moves_the_view(k)) {
                            refresh_view(&mut registered.client, &shared.view).await;
                        }
                        if keys.iter().any(|k| accounts::moves_accounts(k)) {
                            if let Err(error) = refresh_accounts(&mut registered.client, &shared.accounts).await {
                                tracing::warn!(%error, "reading the cluster's users, ACLs and quotas failed");
                            }
                        }
                        // A follower learns that its leader's key went (its
                        // lease ran out) now, not at its next renewal: the
                        // election starts that much sooner.
                        if keys.iter().any(|k| *k == election::leader_key(&config.group).as_bytes()) {
                            let limit = registered.time_left();
                            let lost = tokio::time::timeout(limit, role_lost(&config, &mut registered.client, role.as_ref()));
                            if let Ok(Some(why)) = lost.await {
                                depose(&mut role, &mut leading, &shared, why);
                            }
                        }
                    }
                    ended => {
                        tracing::warn!(?ended, "the etcd watch ended; the cluster view follows the lease renewals");
                        registered.events = None;
                    }
                }
                continue;
            }
            _ = ticker.tick() => {}
        }
        if let Err(error) = renew(&mut registered).await {
            tracing::warn!(%error, lease = registered.lease, "the etcd lease was not renewed; registering again");
            if matches!(role, Some(Elected::Leader { .. })) {
                // Fenced: another node may be elected once the lease runs out.
                let why = format!("this node's etcd lease was not renewed ({error}); it no longer leads");
                depose(&mut role, &mut leading, &shared, why);
            }
            match register(&config).await {
                Ok(r) => registered = r,
                Err(error) => tracing::error!(%error, "registering with etcd again failed; retrying"),
            }
            continue;
        }
        // Whatever etcd does not answer in time waits for the next
        // renewal: that one must come before the lease may run out.
        let limit = registered.time_left();
        let client = &mut registered.client;
        let (state, lease) = ((&mut role, &mut leading, &shared), registered.lease);
        if tokio::time::timeout(limit, watch_role(&config, client, lease, state)).await.is_err() {
            tracing::warn!(?limit, "etcd did not answer in time; renewing the lease first");
        }
    }
    let Registered { mut client, lease, .. } = registered;
    match tokio::time::timeout(ETCD_TIMEOUT, client.lease_revoke(lease)).await {
        Ok(Ok(_)) => tracing::info!(lease, "left the cluster: lease revoked"),
        _ => tracing::warn!(lease, "could not revoke the etcd lease; it runs out by itself"),
    }
}

/// After a renewal: the view, whether the role still holds, and while
/// leading the in-sync set, the lags and a requested hand-over.
async fn watch_role(config: &ClusterConfig, client: &mut etcd_client::Client, lease: i64, state: RoleState<'_>) {
    let (role, leading, shared) = state;
    refresh_view(client, &shared.view).await;
    if let Some(why) = role_lost(config, client, role.as_ref()).await {
        depose(role, leading, shared, why);
    }
    if let Some(l) = leading.as_mut() {
        note_registered(config, client, l).await;
        l.lags.store(client, &config.group, lease).await;
        if let Some(why) = update_isr(config, client, l, &shared.confirmed).await {
            depose(role, leading, shared, why);
        } else if let Some(why) = hand_over(config, client, l).await {
            depose(role, leading, shared, why);
        }
    }
}

/// The next change of the watched keys (never, once the watch failed).
async fn next_event(events: &mut Option<WatchStream>) -> Result<Option<WatchResponse>, etcd_client::Error> {
    match events {
        Some(events) => events.message().await,
        None => std::future::pending().await,
    }
}

/// Reads the cluster's users, ACLs and quotas and gives the shards those that changed.
async fn refresh_accounts(client: &mut etcd_client::Client, held: &Accounts) -> Result<(), String> {
    let read = tokio::time::timeout(ETCD_TIMEOUT, accounts::read(client)).await;
    let (users, acls, quotas) = read.map_err(|_| format!("no answer within {ETCD_TIMEOUT:?}"))??;
    held.follow(users, acls, quotas);
    Ok(())
}

/// Reads the cluster's view and publishes it if its groups or topics moved.
async fn refresh_view(client: &mut etcd_client::Client, view: &watch::Sender<ClusterView>) {
    let next = match tokio::time::timeout(ETCD_TIMEOUT, placement::read_view(client)).await {
        Ok(Ok(next)) => next,
        Ok(Err(error)) => return tracing::warn!(%error, "reading the cluster's topics and groups failed"),
        Err(_) => return tracing::warn!("reading the cluster's topics and groups timed out"),
    };
    view.send_if_modified(|v| {
        let moved = v.revision == 0 || v.groups != next.groups || v.topics != next.topics;
        if moved {
            *v = next;
        }
        moved
    });
}

/// The role and, while leading, what the control plane keeps for it.
type RoleState<'a> = (&'a mut Option<Elected>, &'a mut Option<Leading>, &'a Shared);

async fn serve_command(
    config: &ClusterConfig,
    registered: &mut Registered,
    pause: Duration,
    command: Command,
    (role, leading, shared): RoleState<'_>,
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
            *leading = match &elected {
                Ok(Elected::Leader { epoch }) => start_leading(config, &mut registered.client, *epoch).await,
                _ => None,
            };
            // The shards start once this answers: they must see the stored
            // set from their first produce, and their group's leader in the view.
            publish_confirmed(config, leading.as_ref(), &shared.confirmed);
            refresh_view(&mut registered.client, &shared.view).await;
            shared.deposed.store(false, Ordering::Release);
            let _ = reply.send(elected);
        }
        Command::Follower(report) => {
            let limit = registered.time_left();
            if let Some(l) = leading.as_mut() {
                let changed = async {
                    if report.in_sync && !l.tracker.is_registered(&report.follower) {
                        // A follower that just started: let it join now, not at the next renewal.
                        note_registered(config, &mut registered.client, l).await;
                    }
                    l.tracker.note(report.shard, &report.follower, report.in_sync);
                    l.lags.note(&report);
                    update_isr(config, &mut registered.client, l, &shared.confirmed).await
                };
                // Not past the time the lease must be renewed by; the next report or renewal retries.
                if let Ok(Some(why)) = tokio::time::timeout(limit, changed).await {
                    depose(role, leading, shared, why);
                }
            }
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
        Command::Placement(PlacementAsk::Applied(revision)) => {
            let Some(l) = leading.as_mut().filter(|l| revision > l.applied) else { return };
            let put = placement::store_applied(&mut registered.client, &config.group, revision);
            match in_time(tokio::time::timeout(ETCD_TIMEOUT, put).await) {
                Ok(()) => l.applied = revision,
                Err(error) => tracing::warn!(%error, revision, "recording the topics this group applied failed"),
            }
        }
        Command::Placement(change) => {
            // Served on a task of its own: it waits for this group's shards,
            // which tell the control plane through this loop.
            tokio::spawn(change_topics(registered.client.clone(), change));
        }
        Command::Accounts(AccountsAsk { change, reply }) => {
            let (mut client, held) = (registered.client.clone(), shared.accounts.clone());
            tokio::spawn(async move {
                let made = tokio::time::timeout(ETCD_TIMEOUT, accounts::change(&mut client, &change)).await;
                let made = made.unwrap_or_else(|_| {
                    Err(Failure::cluster_unavailable(format!("no answer from etcd within {ETCD_TIMEOUT:?}")))
                });
                if made.is_ok() {
                    // This node sees its own change at once, not at the watch's event.
                    if let Err(error) = refresh_accounts(&mut client, &held).await {
                        tracing::warn!(%error, "reading the cluster's users, ACLs and quotas failed");
                    }
                }
                let _ = reply.send(made);
            });
        }
    }
}

/// Makes a topic change in etcd and waits for the groups to apply it.
async fn change_topics(mut client: etcd_client::Client, change: PlacementAsk) {
    let (revision, reply) = match change {
        PlacementAsk::Create { topic, reply } => {
            let made = async {
                let view = placement::read_view(&mut client).await.map_err(Failure::cluster_unavailable)?;
                placement::create(&mut client, &view, &topic).await
            };
            (tokio::time::timeout(ETCD_TIMEOUT, made).await, reply)
        }
        PlacementAsk::Delete { name, reply } => {
            (tokio::time::timeout(ETCD_TIMEOUT, placement::delete(&mut client, &name)).await, reply)
        }
        PlacementAsk::Applied(_) => unreachable!("served by the control plane's loop"),
    };
    let revision = match revision {
        Ok(Ok(revision)) => revision,
        Ok(Err(failure)) => return drop(reply.send(Err(failure))),
        Err(_) => {
            let failed = Failure::cluster_unavailable(format!("no answer within {ETCD_TIMEOUT:?}"));
            return drop(reply.send(Err(failed)));
        }
    };
    let applied = tokio::time::timeout(TOPIC_CHANGE_TIMEOUT, placement::wait_applied(&mut client, revision)).await;
    match applied {
        Ok(Ok(())) => {}
        Ok(Err(error)) => tracing::warn!(%error, "a topic change is stored in etcd but not applied everywhere yet"),
        Err(_) => tracing::warn!(revision, "a topic change is stored in etcd; its groups did not say they applied it"),
    }
    let _ = reply.send(Ok(()));
}

/// Answers a topic change the stopped control plane can no longer make.
fn answer_stopped(unsent: Command) {
    let stopped = || Err(Failure::cluster_unavailable("the control plane stopped"));
    match unsent {
        Command::Placement(PlacementAsk::Create { reply, .. } | PlacementAsk::Delete { reply, .. }) => {
            let _ = reply.send(stopped());
        }
        Command::Accounts(AccountsAsk { reply, .. }) => {
            let _ = reply.send(stopped().map(|()| 0));
        }
        _ => {}
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
                let attempt = election::campaign(
                    &mut r.client,
                    &config.group,
                    &config.node,
                    &config.advertise,
                    config.shards,
                    r.lease,
                );
                match attempt.await? {
                    Campaign::Won { epoch, isr } => {
                        let members = &isr.members;
                        tracing::info!(group = %config.group, node = %config.node, epoch, ?members, "elected leader");
                        return Ok(Elected::Leader { epoch });
                    }
                    Campaign::Lost => tokio::time::sleep(pause / 4).await,
                    Campaign::MakeWay(to) => {
                        tracing::info!(group = %config.group, node = %config.node, %to, "making way for the node a transfer names");
                        tokio::time::sleep(pause / 4).await;
                        renew(r).await?;
                    }
                    Campaign::NotInSync(members) => {
                        tracing::info!(group = %config.group, node = %config.node, ?members, "not in sync: waiting for a member of the in-sync set to lead");
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
async fn start_leading(config: &ClusterConfig, client: &mut etcd_client::Client, epoch: u64) -> Option<Leading> {
    match isr::read(client, &config.group).await {
        Ok((Some(isr), revision)) => {
            let tracker = Tracker::new(&config.node, config.shards, &isr.members);
            let lags = Lags::default();
            let mut leading = Leading { epoch, tracker, isr, revision, lags, applied: 0, transfer_seen: None };
            // A stored member whose lease is gone (the paused leader this one replaces) is out at once.
            note_registered(config, client, &mut leading).await;
            Some(leading)
        }
        Ok((None, _)) => {
            tracing::error!(group = %config.group, "the campaign stored no in-sync set");
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
async fn hand_over(config: &ClusterConfig, client: &mut etcd_client::Client, l: &mut Leading) -> Option<String> {
    let to = match transfer::make_way_for(client, &config.group, &config.node).await {
        Ok(Some(to)) if l.isr.members.contains(&to) => to,
        Ok(_) => return None,
        Err(error) => {
            tracing::warn!(%error, "reading the transfer request failed");
            return None;
        }
    };
    let seen = *l.transfer_seen.get_or_insert_with(std::time::Instant::now);
    let caught_up = l.lags.summed().get(&to).is_some_and(|lag| lag.lag_bytes == 0);
    if !caught_up && seen.elapsed() < transfer::CATCH_UP_WAIT {
        return None;
    }
    let mine = Leadership { node: config.node.clone(), advertise: config.advertise.clone(), epoch: l.epoch };
    match transfer::resign(client, &config.group, &mine).await {
        Ok(_) => {
            tracing::info!(group = %config.group, %to, caught_up, "handing the lead over");
            Some(format!("the lead of broker group {:?} goes to {to} (cluster transfer-leader)", config.group))
        }
        Err(error) => {
            tracing::warn!(%error, "giving up the lead failed; retrying");
            None
        }
    }
}

/// Tells the tracker which of the group's nodes are registered now.
async fn note_registered(config: &ClusterConfig, client: &mut etcd_client::Client, l: &mut Leading) {
    match registry::group_nodes(client, &config.group).await {
        Ok(alive) => l.tracker.set_registered(alive.into_iter().collect()),
        Err(error) => tracing::warn!(%error, "listing the group's nodes failed"),
    }
}

/// Stores the in-sync set the shards' reports call for, by compare-and-swap;
/// the shards count a follower only once etcd lists it, and stop counting it
/// only once etcd no longer does. Says why if a later epoch deposed this leader.
async fn update_isr(
    config: &ClusterConfig,
    client: &mut etcd_client::Client,
    l: &mut Leading,
    confirmed: &Confirmed,
) -> Option<String> {
    let desired = l.tracker.desired();
    if desired != l.isr.members {
        let next = Isr { epoch: l.epoch, members: desired };
        match isr::write(client, &config.group, &next, l.revision).await {
            Ok(Some(revision)) => {
                tracing::info!(group = %config.group, members = ?next.members, "in-sync set changed");
                l.isr = next;
                l.revision = revision;
            }
            Ok(None) => {
                let stored = isr::read(client, &config.group).await;
                tracing::warn!(group = %config.group, node = %config.node, epoch = l.epoch, revision = l.revision, ?stored, "the in-sync set or the epoch moved under this leader");
                match stored {
                    Ok((Some(stored), _)) if stored.epoch > l.epoch => {
                        return Some(format!("epoch {} of broker group {:?} began", stored.epoch, config.group));
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

/// Makes the followers etcd lists (none while not leading) the ones the shards count.
fn publish_confirmed(config: &ClusterConfig, leading: Option<&Leading>, confirmed: &Confirmed) {
    let members = leading.map(|l| l.isr.members.iter().filter(|m| **m != config.node).cloned().collect());
    *confirmed.write().expect("no thread panics holding it") = members.unwrap_or_default();
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
impl Registered {
    /// How long etcd calls may take before the lease must be renewed.
    fn time_left(&self) -> Duration {
        ETCD_TIMEOUT.min(self.expires.saturating_duration_since(std::time::Instant::now()))
    }
}

/// Renews the lease once; an error if etcd did not confirm it alive before
/// it may have run out: a leader cut off from etcd fences itself by then,
/// not one etcd timeout later.
async fn renew(r: &mut Registered) -> Result<(), String> {
    let asked = std::time::Instant::now();
    let limit = r.time_left();
    let renewal = async {
        r.keeper.keep_alive().await.map_err(|e| e.to_string())?;
        match r.answers.message().await.map_err(|e| e.to_string())? {
            Some(answer) if answer.ttl() > 0 => Ok(Duration::from_secs(answer.ttl() as u64)),
            _ => Err("the lease expired".to_string()),
        }
    };
    let ttl =
        tokio::time::timeout(limit, renewal).await.map_err(|_| format!("no answer from etcd within {limit:?}"))??;
    r.expires = asked + ttl;
    Ok(())
}
