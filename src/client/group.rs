//! A consumer's membership in a group: join and sync with the group's
//! coordinator (the leader computes everyone's queues with the configured
//! strategy), and a heartbeat thread that keeps the session alive and flags
//! a rebalance, upon which the consumer gives up its queues and joins again.

use super::assignment::Strategy;
use super::client::Client;
use super::error::ClientError;
use ringmq_protocol::messages::{Assignment, JoinGroup, Joined, Membership, SyncGroup};
use ringmq_protocol::time::millis_u32;
use ringmq_protocol::{ApiKey, ErrorCode, Reader, Writer};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Where a queue the group never committed starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartNew {
    Earliest,
    Latest,
}

/// How a group shares messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsumeMode {
    /// Each message to one member: queues are shared out by rebalancing.
    Clustering,
    /// Each message to every member: every member reads every queue, and its
    /// progress is kept per `instance` (so it survives that member's restart).
    Broadcast,
}

/// A group consumer's settings.
#[derive(Clone)]
pub struct GroupConfig {
    pub group: String,
    pub mode: ConsumeMode,
    /// Broadcast: this member's stable name, under which its progress is kept.
    pub instance: Option<String>,
    /// Topics to consume.
    pub topics: Vec<String>,
    /// Tag expression per topic (`*` or `TagA || TagB`; none: every message).
    pub tags: HashMap<String, String>,
    pub strategy: Strategy,
    /// Without a heartbeat for this long the member is evicted.
    pub session_timeout: Duration,
    pub heartbeat_interval: Duration,
    /// How long a rebalance waits for members to rejoin.
    pub rebalance_timeout: Duration,
    pub start_new: StartNew,
    /// Commit positions on this interval (and before giving up queues);
    /// None: the application commits after processing (at-least-once).
    pub auto_commit: Option<Duration>,
    /// Prefix of the member id the coordinator hands out.
    pub client_id: String,
}

impl GroupConfig {
    /// A broadcast member named `instance` (stable across its restarts).
    pub fn broadcast(group: impl Into<String>, topics: &[&str], instance: impl Into<String>) -> Self {
        GroupConfig { mode: ConsumeMode::Broadcast, instance: Some(instance.into()), ..GroupConfig::new(group, topics) }
    }

    /// Where a broadcast member keeps its offsets: a group of its own per
    /// instance, which never has members.
    pub fn broadcast_offsets_group(&self) -> Result<String, ClientError> {
        match self.instance.as_deref() {
            Some(i) if !i.is_empty() => Ok(format!("{}%{i}", self.group)),
            _ => Err(ClientError::Invalid("a broadcast consumer needs an instance name".into())),
        }
    }

    /// Defaults: clustering, average strategy, 10 s session, 1 s heartbeats, 30 s
    /// rebalance timeout, new queues from the latest offset, manual commits.
    pub fn new(group: impl Into<String>, topics: &[&str]) -> Self {
        GroupConfig {
            group: group.into(),
            mode: ConsumeMode::Clustering,
            instance: None,
            topics: topics.iter().map(|t| t.to_string()).collect(),
            tags: HashMap::new(),
            strategy: Strategy::Average,
            session_timeout: Duration::from_secs(10),
            heartbeat_interval: Duration::from_secs(1),
            rebalance_timeout: Duration::from_secs(30),
            start_new: StartNew::Latest,
            auto_commit: None,
            client_id: "consumer".into(),
        }
    }
}

/// What the heartbeat thread and the consumer share.
struct Session {
    who: Membership,
    /// Heartbeats are sent (joined and synced, or syncing).
    active: bool,
    /// A heartbeat or commit said the member must join again.
    rejoin: bool,
}

/// One consumer's membership.
pub struct GroupMember {
    client: Arc<Client>,
    pub config: GroupConfig,
    session: Arc<Mutex<Session>>,
    stop: Arc<AtomicBool>,
    heartbeat: Option<JoinHandle<()>>,
}

impl GroupMember {
    /// Starts the heartbeat thread; the member joins on [`GroupMember::join`].
    pub fn start(client: Arc<Client>, config: GroupConfig) -> GroupMember {
        let who = Membership { group: config.group.clone(), generation: 0, member: String::new() };
        let session = Arc::new(Mutex::new(Session { who, active: false, rejoin: false }));
        let stop = Arc::new(AtomicBool::new(false));
        let (c, s, st, every) = (client.clone(), session.clone(), stop.clone(), config.heartbeat_interval);
        let heartbeat = std::thread::Builder::new()
            .name("ringmq-heartbeat".into())
            .spawn(move || heartbeat_loop(&c, &s, &st, every))
            .expect("spawn heartbeat thread");
        GroupMember { client, config, session, stop, heartbeat: Some(heartbeat) }
    }

    /// True until joined, and after the group said to rejoin.
    pub fn needs_join(&self) -> bool {
        let s = self.session.lock().expect("session lock");
        !s.active || s.rejoin
    }

    /// The member's current generation and id.
    pub fn membership(&self) -> Membership {
        self.session.lock().expect("session lock").who.clone()
    }

    /// Flags a rejoin (a commit was refused as fenced).
    pub fn mark_rejoin(&self) {
        self.session.lock().expect("session lock").rejoin = true;
    }

    /// Joins the next generation and returns this member's queues. Retries
    /// while the group keeps rebalancing.
    pub fn join(&self) -> Result<Vec<(String, u32)>, ClientError> {
        let deadline = Instant::now() + self.config.rebalance_timeout * 2;
        loop {
            match self.join_once() {
                Ok(queues) => return Ok(queues),
                Err(ClientError::Broker { code, message }) if code.needs_rejoin() && Instant::now() < deadline => {
                    tracing::debug!(%message, "joining again");
                    if code == ErrorCode::UnknownMember {
                        self.session.lock().expect("session lock").who.member.clear();
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }

    fn join_once(&self) -> Result<Vec<(String, u32)>, ClientError> {
        let c = &self.config;
        let member = {
            let mut s = self.session.lock().expect("session lock");
            (s.active, s.rejoin) = (false, false);
            s.who.member.clone()
        };
        let mut w = Writer::default();
        JoinGroup {
            group: c.group.clone(),
            member,
            client_id: c.client_id.clone(),
            session_timeout_ms: millis_u32(c.session_timeout),
            rebalance_timeout_ms: millis_u32(c.rebalance_timeout),
            metadata: encode_topics(&c.topics),
        }
        .encode(&mut w);
        let parked = c.rebalance_timeout + Duration::from_secs(2);
        let reply = self.client.call_group(&c.group, ApiKey::JoinGroup, &w.buf, parked)?;
        let joined = Joined::decode(&mut Reader::new(&reply.body))?;
        let who = Membership { group: c.group.clone(), generation: joined.generation, member: joined.member.clone() };
        *self.session.lock().expect("session lock") = Session { who: who.clone(), active: true, rejoin: false };
        let assignments = if joined.leader == joined.member { self.assign_all(&joined.members)? } else { Vec::new() };
        let mut w = Writer::default();
        SyncGroup { member: who, assignments }.encode(&mut w);
        let reply = self.client.call_group(&c.group, ApiKey::SyncGroup, &w.buf, parked)?;
        let mine = Assignment::decode(Reader::new(&reply.body).bytes()?)?;
        tracing::info!(group = %c.group, member = %joined.member, generation = joined.generation, ?mine, "joined");
        Ok(mine.topics.into_iter().flat_map(|(t, qs)| qs.into_iter().map(move |q| (t.clone(), q))).collect())
    }

    /// The leader's work: every member's queues, topic by topic, among the
    /// members that subscribe to it.
    fn assign_all(&self, members: &[(String, Vec<u8>)]) -> Result<Vec<(String, Vec<u8>)>, ClientError> {
        self.client.refresh_metadata()?;
        let mut by_topic: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (id, metadata) in members {
            for topic in decode_topics(metadata)? {
                by_topic.entry(topic).or_default().insert(id.clone());
            }
        }
        let mut out: BTreeMap<String, Assignment> =
            members.iter().map(|(id, _)| (id.clone(), Assignment::default())).collect();
        for (topic, subscribers) in by_topic {
            let Ok(info) = self.client.topic(&topic) else {
                tracing::warn!(%topic, "subscribed topic does not exist; no queues to assign");
                continue;
            };
            let ids: Vec<String> = subscribers.into_iter().collect();
            for (id, queues) in ids.iter().zip(self.config.strategy.assign(&ids, info.queue_shards.len() as u32)) {
                out.get_mut(id).expect("a member").topics.push((topic.clone(), queues));
            }
        }
        Ok(out.into_iter().map(|(id, a)| (id, a.encode())).collect())
    }

    /// Leaves the group (its queues go to the others at once).
    pub fn leave(&self) {
        let who = {
            let mut s = self.session.lock().expect("session lock");
            s.active = false;
            s.who.clone()
        };
        if who.member.is_empty() {
            return;
        }
        let mut w = Writer::default();
        who.encode(&mut w);
        if let Err(error) = self.client.call_group(&who.group, ApiKey::LeaveGroup, &w.buf, Duration::ZERO) {
            tracing::debug!(%error, "leaving the group");
        }
    }

    /// Stops heartbeating without leaving, as a crashed process would: the
    /// group notices when the session times out.
    pub fn abandon(&mut self) {
        self.session.lock().expect("session lock").who.member.clear();
        self.stop_heartbeats();
    }

    /// The heartbeat thread sends no more; one parked heartbeat may still be
    /// in flight (the thread ends when it returns, not joined here).
    fn stop_heartbeats(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.heartbeat.take();
    }
}

impl Drop for GroupMember {
    fn drop(&mut self) {
        self.stop_heartbeats();
        self.leave();
    }
}

/// Heartbeats, each parked by the coordinator for up to `every` unless the
/// group changes, so a rebalance is noticed at once.
fn heartbeat_loop(client: &Client, session: &Mutex<Session>, stop: &AtomicBool, every: Duration) {
    while !stop.load(Ordering::Relaxed) {
        let who = {
            let s = session.lock().expect("session lock");
            (s.active && !s.rejoin).then(|| s.who.clone())
        };
        let Some(who) = who else {
            std::thread::sleep(Duration::from_millis(20));
            continue;
        };
        let started = Instant::now();
        let mut w = Writer::default();
        who.encode(&mut w);
        w.u32(millis_u32(every));
        match client.call_group(&who.group, ApiKey::Heartbeat, &w.buf, every) {
            Err(ClientError::Broker { code, .. }) if code.needs_rejoin() => {
                let mut s = session.lock().expect("session lock");
                if s.who == who {
                    s.rejoin = true;
                }
            }
            Err(error) => tracing::warn!(%error, "heartbeat failed"),
            Ok(_) => {}
        }
        // At most one heartbeat per `every` when the broker answers at once.
        while started.elapsed() < every && !stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(20).min(every));
        }
    }
}

fn encode_topics(topics: &[String]) -> Vec<u8> {
    let mut w = Writer::default();
    w.u32(topics.len() as u32);
    for t in topics {
        w.string(t);
    }
    w.buf
}

fn decode_topics(bytes: &[u8]) -> Result<Vec<String>, ClientError> {
    let mut r = Reader::new(bytes);
    let n = r.count(2)?;
    let topics = (0..n).map(|_| r.string()).collect::<Result<_, _>>()?;
    r.finish()?;
    Ok(topics)
}
