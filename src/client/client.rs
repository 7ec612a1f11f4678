//! The client: follows metadata to the shard that owns each queue and keeps
//! one pipelined connection per shard, so requests never cost the broker a
//! cross-core hop.

use super::connection::{Connection, Reply, ReplyTo};
use super::error::ClientError;
use super::sasl::SaslLogin;
use crate::tls::ClientTls;
use ringmq_protocol::messages::{self as msg, Membership, MetadataResponse, QueueRef, TopicInfo};
use ringmq_protocol::{coordinator_of, ApiKey, ErrorCode, Reader, Writer};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

/// Longest one metadata request may take before the next source is tried.
const METADATA_TIMEOUT: Duration = Duration::from_secs(2);

/// Least time between two metadata refreshes that failures ask for (every
/// pipelined request to a node that stopped leading fails at once).
const REFRESH_AFTER_FAILURE_MIN: Duration = Duration::from_millis(200);

/// Client settings.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// Any shard's address; metadata names the others. In a cluster, a
    /// comma-separated list of the group's nodes: metadata comes from
    /// whichever leads (followers answer NotLeader and the next is tried).
    pub bootstrap: String,
    pub connect_timeout: Duration,
    pub request_timeout: Duration,
    /// Attempts after the first for retriable errors.
    pub retries: u32,
    pub retry_backoff: Duration,
    pub max_frame_bytes: usize,
    /// TLS to every shard (None: in the clear).
    pub tls: Option<ClientTls>,
    /// The SASL login of every connection (None: none).
    pub sasl: Option<SaslLogin>,
}

impl ClientConfig {
    /// Defaults: 5 s connect, 30 s requests, 3 retries 100 ms apart.
    pub fn new(bootstrap: impl Into<String>) -> Self {
        ClientConfig {
            bootstrap: bootstrap.into(),
            connect_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(30),
            retries: 3,
            retry_backoff: Duration::from_millis(100),
            max_frame_bytes: 8 << 20,
            tls: None,
            sasl: None,
        }
    }
}

/// A connection pool following the broker's metadata.
pub struct Client {
    pub config: ClientConfig,
    metadata: RwLock<Arc<MetadataResponse>>,
    connections: Mutex<HashMap<String, Arc<Connection>>>,
    /// When a failure last asked for a metadata refresh.
    refreshed_after_failure: Mutex<Option<Instant>>,
}

impl Client {
    /// Connects to the bootstrap shard and loads metadata.
    pub fn connect(config: ClientConfig) -> Result<Arc<Client>, ClientError> {
        let client = Arc::new(Client {
            config,
            metadata: RwLock::default(),
            connections: Mutex::default(),
            refreshed_after_failure: Mutex::default(),
        });
        client.refresh_metadata()?;
        Ok(client)
    }

    /// Reloads metadata: from the shard 0 it knows, else from each
    /// bootstrap address in turn, until one that leads answers.
    pub fn refresh_metadata(&self) -> Result<Arc<MetadataResponse>, ClientError> {
        let mut w = Writer::default();
        msg::encode_names(&[], &mut w);
        let mut failed = None;
        for addr in self.metadata_sources() {
            // A node that does not answer soon (one restarting in a new role) is passed over.
            let timeout = self.config.request_timeout.min(METADATA_TIMEOUT);
            match self.call_addr_within(&addr, ApiKey::Metadata, &w.buf, timeout) {
                Ok(reply) => {
                    let m = Arc::new(MetadataResponse::decode(&mut Reader::new(&reply.body))?);
                    *self.metadata.write().expect("metadata lock") = m.clone();
                    return Ok(m);
                }
                Err(e) if e.is_retriable() => failed = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(failed.expect("a client has at least one bootstrap address"))
    }

    /// A request about a queue failed with `error`: when the error says the
    /// queue may be elsewhere now (a node that stopped leading, one that is
    /// gone), metadata is read again, at most every
    /// `REFRESH_AFTER_FAILURE_MIN`, so the next requests go where it is. The
    /// pipelined paths (async sends, polls) call this; without it they kept
    /// asking a paused leader that came back as a follower.
    pub fn note_failure(&self, error: &ClientError) {
        if !error.is_retriable() {
            return;
        }
        {
            let mut last = self.refreshed_after_failure.lock().expect("refresh lock");
            if last.is_some_and(|at| at.elapsed() < REFRESH_AFTER_FAILURE_MIN) {
                return;
            }
            *last = Some(Instant::now());
        }
        if let Err(error) = self.refresh_metadata() {
            tracing::debug!(%error, "refreshing metadata after a failure failed; the next failure tries again");
        }
    }

    /// Where metadata may come from: the known shard 0 first, then every bootstrap address.
    fn metadata_sources(&self) -> Vec<String> {
        let mut sources: Vec<String> = self.metadata().shards.first().map(|s| s.addr.clone()).into_iter().collect();
        for addr in self.config.bootstrap.split(',').map(str::trim).filter(|a| !a.is_empty()) {
            if !sources.iter().any(|s| s == addr) {
                sources.push(addr.to_string());
            }
        }
        sources
    }

    /// Shard 0 of the node that serves (where topic changes go).
    pub(super) fn control_addr(&self) -> String {
        self.metadata_sources().swap_remove(0)
    }

    /// The cached metadata.
    pub fn metadata(&self) -> Arc<MetadataResponse> {
        self.metadata.read().expect("metadata lock").clone()
    }

    /// A topic from metadata, refreshing once if it is not known yet.
    pub fn topic(&self, name: &str) -> Result<TopicInfo, ClientError> {
        self.with_topic(name, TopicInfo::clone)
    }

    /// `f` of a topic's metadata (refreshed once if the topic is not known
    /// yet), without copying it: producers ask this for every message.
    pub fn with_topic<T>(&self, name: &str, f: impl FnOnce(&TopicInfo) -> T) -> Result<T, ClientError> {
        if let Some(t) = self.metadata.read().expect("metadata lock").topics.iter().find(|t| t.name == name) {
            return Ok(f(t));
        }
        if let Some(t) = self.refresh_metadata()?.topics.iter().find(|t| t.name == name) {
            return Ok(f(t));
        }
        // Listings leave out topics this principal may not describe: asking
        // for the one topic tells which it is (NotAuthorized or unknown).
        let mut w = Writer::default();
        msg::encode_names(&[name.to_string()], &mut w);
        match self.call_addr(&self.control_addr(), ApiKey::Metadata, &w.buf) {
            Err(ClientError::Broker { code: ErrorCode::NotAuthorized, message }) => {
                Err(ClientError::Broker { code: ErrorCode::NotAuthorized, message })
            }
            _ => Err(ClientError::UnknownTopic(name.to_string())),
        }
    }

    /// The shard that owns `queue` of `topic`.
    pub fn queue_shard(&self, topic: &str, queue: u32) -> Result<u32, ClientError> {
        self.with_topic(topic, |t| {
            t.queue_shards.get(queue as usize).copied().ok_or(ClientError::UnknownQueue {
                topic: topic.to_string(),
                queue,
                queues: t.queue_shards.len() as u32,
            })
        })?
    }

    /// Address of the shard that owns `queue` of `topic`.
    pub fn owner(&self, topic: &str, queue: u32) -> Result<String, ClientError> {
        let shard = self.queue_shard(topic, queue)?;
        let m = self.metadata();
        m.shards
            .iter()
            .find(|s| s.shard == shard)
            .map(|s| s.addr.clone())
            .ok_or_else(|| ClientError::Protocol(format!("metadata names no address for shard {shard}")))
    }

    /// The (pooled) connection to `addr`.
    pub fn connection(&self, addr: &str) -> Result<Arc<Connection>, ClientError> {
        let mut pool = self.connections.lock().expect("pool lock");
        if let Some(c) = pool.get(addr).filter(|c| c.is_alive()) {
            return Ok(c.clone());
        }
        let c = Connection::open(
            addr,
            self.config.tls.as_ref(),
            self.config.sasl.as_ref(),
            self.config.connect_timeout,
            self.config.max_frame_bytes,
        )?;
        pool.insert(addr.to_string(), c.clone());
        Ok(c)
    }

    /// One request to `addr`; a broker error becomes `ClientError::Broker`.
    pub fn call_addr(&self, addr: &str, api: ApiKey, body: &[u8]) -> Result<Reply, ClientError> {
        self.call_addr_parked(addr, api, body, Duration::ZERO)
    }

    /// Like `call_addr` for a request the broker may park up to `parked`.
    fn call_addr_parked(&self, addr: &str, api: ApiKey, body: &[u8], parked: Duration) -> Result<Reply, ClientError> {
        self.call_addr_within(addr, api, body, self.config.request_timeout + parked)
    }

    /// One request to `addr`, answered within `timeout`; a connection that
    /// timed out or closed leaves the pool, so the next call connects anew.
    fn call_addr_within(&self, addr: &str, api: ApiKey, body: &[u8], timeout: Duration) -> Result<Reply, ClientError> {
        self.call_version_within(addr, (api, 0), body, timeout)
    }

    /// `call_addr` of `api` at `version`.
    pub(super) fn call_addr_version(&self, addr: &str, api: (ApiKey, u16), body: &[u8]) -> Result<Reply, ClientError> {
        self.call_version_within(addr, api, body, self.config.request_timeout)
    }

    fn call_version_within(
        &self,
        addr: &str,
        (api, version): (ApiKey, u16),
        body: &[u8],
        timeout: Duration,
    ) -> Result<Reply, ClientError> {
        let called = self.connection(addr)?.call((api as u16, version), body, timeout);
        if let Err(ClientError::Timeout { .. } | ClientError::ConnectionClosed { .. }) = &called {
            self.connections.lock().expect("pool lock").remove(addr);
        }
        let reply = called?;
        match reply.error {
            ErrorCode::None => Ok(reply),
            code => Err(ClientError::Broker { code, message: reply.message }),
        }
    }

    /// A request about one queue, sent to its owner, retried on retriable
    /// errors with a metadata refresh in between.
    pub fn call_queue(&self, topic: &str, queue: u32, api: ApiKey, body: &[u8]) -> Result<Reply, ClientError> {
        self.retrying(|| self.call_addr(&self.owner(topic, queue)?, api, body))
    }

    /// Sends a request (`api` at `version`) about one queue without waiting; the reply goes to `reply_to`.
    pub fn send_queue(
        &self,
        (topic, queue): (&str, u32),
        (api, version): (ApiKey, u16),
        body: &[u8],
        reply_to: Option<ReplyTo>,
    ) -> Result<(), ClientError> {
        self.connection(&self.owner(topic, queue)?)?.send((api as u16, version), body, reply_to)
    }

    /// Runs `f`, retrying retriable failures after a pause and a metadata refresh.
    pub fn retrying<T>(&self, mut f: impl FnMut() -> Result<T, ClientError>) -> Result<T, ClientError> {
        let mut attempt = 0;
        loop {
            match f() {
                Err(e) if e.is_retriable() && attempt < self.config.retries => {
                    attempt += 1;
                    tracing::debug!(error = %e, attempt, "retrying");
                    std::thread::sleep(self.config.retry_backoff * attempt);
                    let _ = self.refresh_metadata();
                }
                other => return other,
            }
        }
    }

    /// Creates a topic of `queues` queues (flush 0 sync, 1 async).
    pub fn create_topic(&self, name: &str, queues: u32, flush: u8) -> Result<(), ClientError> {
        self.create_topic_with_configs(name, queues, flush, &[])
    }

    /// Deletes a topic.
    pub fn delete_topic(&self, name: &str) -> Result<(), ClientError> {
        let mut w = Writer::default();
        w.string(name);
        self.call_addr(&self.control_addr(), ApiKey::DeleteTopic, &w.buf)?;
        self.refresh_metadata()?;
        Ok(())
    }

    /// Names of all topics.
    pub fn list_topics(&self) -> Result<Vec<String>, ClientError> {
        let reply = self.call_addr(&self.control_addr(), ApiKey::ListTopics, &[])?;
        Ok(msg::decode_names(&mut Reader::new(&reply.body))?)
    }

    /// The queue's stored offsets: [start, end).
    pub fn list_offsets(&self, topic: &str, queue: u32) -> Result<(u64, u64), ClientError> {
        let mut w = Writer::default();
        QueueRef { topic: topic.to_string(), queue }.encode(&mut w);
        let reply = self.call_queue(topic, queue, ApiKey::ListOffsets, &w.buf)?;
        let mut r = Reader::new(&reply.body);
        Ok((r.u64()?, r.u64()?))
    }

    /// Durably stores a consumer group's next offset for a queue.
    pub fn commit_offset(&self, who: &Membership, topic: &str, queue: u32, offset: u64) -> Result<(), ClientError> {
        let mut w = Writer::default();
        msg::GroupOffset { member: who.clone(), queue: QueueRef { topic: topic.to_string(), queue }, offset }
            .encode(&mut w);
        self.call_group(&who.group, ApiKey::CommitOffset, &w.buf, Duration::ZERO).map(|_| ())
    }

    /// The group's committed offset of a queue, if any.
    pub fn fetch_offset(&self, group: &str, topic: &str, queue: u32) -> Result<Option<u64>, ClientError> {
        let mut w = Writer::default();
        w.string(group);
        QueueRef { topic: topic.to_string(), queue }.encode(&mut w);
        let reply = self.call_group(group, ApiKey::FetchOffset, &w.buf, Duration::ZERO)?;
        let offset = Reader::new(&reply.body).u64()?;
        Ok((offset != msg::NO_OFFSET).then_some(offset))
    }

    /// Hands a message the group failed to consume back to the broker: it
    /// returns to the group's retry topic after a growing delay, or goes to
    /// the dead-letter topic past `max_retries` (0: the broker's default).
    pub fn send_back(
        &self,
        group: &str,
        topic: &str,
        queue: u32,
        offset: u64,
        max_retries: u32,
    ) -> Result<msg::SentBack, ClientError> {
        self.send_back_or_dead_letter(group, (topic, queue, offset), max_retries, false)
    }

    /// Like `send_back`, or straight to the dead-letter topic when `dead_letter`.
    pub fn send_back_or_dead_letter(
        &self,
        group: &str,
        (topic, queue, offset): (&str, u32, u64),
        max_retries: u32,
        dead_letter: bool,
    ) -> Result<msg::SentBack, ClientError> {
        let mut w = Writer::default();
        let queue_ref = QueueRef { topic: topic.to_string(), queue };
        msg::SendBack { group: group.to_string(), queue: queue_ref, offset, max_retries, delay_level: 0, dead_letter }
            .encode(&mut w);
        let reply = self.call_queue(topic, queue, ApiKey::SendBack, &w.buf)?;
        Ok(msg::SentBack::decode(&mut Reader::new(&reply.body))?)
    }

    /// Takes or renews (`lease` non-zero) or releases (`lease` zero) the locks
    /// of a group's queues for `holder`; for taking, whether each is held now.
    pub fn lock_queues(
        &self,
        group: &str,
        holder: &str,
        lease: Duration,
        queues: &[(String, u32)],
    ) -> Result<Vec<bool>, ClientError> {
        let mut w = Writer::default();
        let queues = queues.iter().map(|(t, q)| QueueRef { topic: t.clone(), queue: *q }).collect();
        let lease_ms = ringmq_protocol::time::millis_u32(lease);
        msg::QueueLocking { group: group.to_string(), holder: holder.to_string(), lease_ms, queues }.encode(&mut w);
        let api = if lease_ms == 0 { ApiKey::UnlockQueues } else { ApiKey::LockQueues };
        let reply = self.call_group(group, api, &w.buf, Duration::ZERO)?;
        Ok(reply.body.iter().map(|b| *b == 1).collect())
    }

    /// Moves a broker's manual clock (`serve --manual-clock`) forward.
    pub fn advance_clock(&self, by: Duration) -> Result<(), ClientError> {
        let mut w = Writer::default();
        w.u64(by.as_millis() as u64);
        self.call_addr(&self.control_addr(), ApiKey::AdvanceClock, &w.buf).map(|_| ())
    }

    /// Calls the group's coordinator shard (which may park the request up
    /// to `parked`), retrying retriable errors.
    pub fn call_group(&self, group: &str, api: ApiKey, body: &[u8], parked: Duration) -> Result<Reply, ClientError> {
        self.retrying(|| {
            let shards = &self.metadata().shards;
            let at = coordinator_of(group, shards.len());
            let addr = shards.get(at).map_or_else(|| self.control_addr(), |s| s.addr.clone());
            self.call_addr_parked(&addr, api, body, parked)
        })
    }
}
