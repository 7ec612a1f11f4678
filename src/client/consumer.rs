//! The consumer: assigned queues are fetched with long polling (one fetch in
//! flight per queue, all pipelined), messages come back in queue order, and
//! positions are committed for a group when the caller says so
//! (at-least-once: commit after processing). Queues are assigned by hand
//! (`assign`) or by the group (`subscribe`): then a rebalance drops every
//! queue, rejoins, and resumes the new ones from the group's offsets.

use super::client::Client;
use super::connection::Tagged;
use super::error::ClientError;
use super::group::{ConsumeMode, GroupConfig, GroupMember, StartNew};
use super::message_id::MessageId;
use ringmq_format::batch;
use ringmq_protocol::messages::{decode_fetched_many, Fetch, FetchFailed, FetchMany, Membership, QueueRef};
use ringmq_protocol::{ApiKey, ErrorCode, Reader, Writer};
use std::collections::HashMap;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

/// The longest one poll waits: below the broker's default `max_fetch_wait`
/// (60 s), which refuses a long poll that asks for more.
pub const POLL_WAIT_MAX: Duration = Duration::from_secs(30);
/// A consumed message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumedMessage {
    pub topic: String,
    pub queue: u32,
    pub offset: u64,
    pub message_id: MessageId,
    /// None: no key (Kafka's null key), distinct from an empty one.
    pub key: Option<Vec<u8>>,
    pub tag: String,
    /// In the order sent; a name may repeat; None: a null value.
    pub headers: Vec<(String, Option<Vec<u8>>)>,
    /// None: no value (a tombstone), distinct from an empty one.
    pub value: Option<Vec<u8>>,
    /// Producer's timestamp, Unix milliseconds.
    pub timestamp_ms: i64,
}

impl ConsumedMessage {
    /// The value of the first header named `name`, if the message has it
    /// (a null value reads empty).
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_deref().unwrap_or_default())
    }

    /// The value, empty for a tombstone.
    pub fn value_or_empty(&self) -> &[u8] {
        self.value.as_deref().unwrap_or_default()
    }

    /// How many times the message was sent back for a retry (0: first delivery).
    pub fn reconsume_times(&self) -> u32 {
        self.header("ringmq.reconsume").and_then(|v| v.try_into().ok()).map_or(0, u32::from_le_bytes)
    }

    /// The topic the message was first produced to (its own topic unless it
    /// came back through a retry or dead-letter topic).
    pub fn origin_topic(&self) -> String {
        self.header("ringmq.origin.topic")
            .map_or_else(|| self.topic.clone(), |t| String::from_utf8_lossy(t).into_owned())
    }
}

/// The messages of stored batches of `topic`/`queue` from offset `from` on;
/// each batch's CRCs are checked.
pub fn decode_messages(
    topic: &str,
    queue: u32,
    batches: &[u8],
    from: u64,
) -> Result<Vec<ConsumedMessage>, ClientError> {
    let mut out = Vec::new();
    for b in batch::split(batches) {
        let h = batch::verify_stored(b)
            .map_err(|e| ClientError::Protocol(format!("fetched batch fails its check: {e}")))?;
        let mut inflated = Vec::new();
        let records = batch::records(b, &mut inflated).map_err(|e| ClientError::Protocol(e.to_string()))?;
        for (k, r) in records.enumerate() {
            let r = r.map_err(|e| ClientError::Protocol(e.to_string()))?;
            let offset = h.base_offset + k as u64;
            if offset < from {
                continue;
            }
            out.push(ConsumedMessage {
                topic: topic.to_string(),
                queue,
                offset,
                message_id: MessageId(r.message_id),
                key: r.key.map(<[u8]>::to_vec),
                tag: String::from_utf8_lossy(r.tag).into_owned(),
                headers: r
                    .headers
                    .iter()
                    .map(|(k, v)| (String::from_utf8_lossy(k).into_owned(), v.map(<[u8]>::to_vec)))
                    .collect(),
                value: r.value.map(<[u8]>::to_vec),
                timestamp_ms: h.first_timestamp_ms.saturating_add(r.timestamp_delta_ms),
            });
        }
    }
    Ok(out)
}

/// Where an assigned queue starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartFrom {
    Earliest,
    Latest,
    Offset(u64),
    /// The group's committed offset, or the earliest if none.
    Committed,
}

struct Assignment {
    topic: String,
    queue: u32,
    position: u64,
    fetching: bool,
    /// Not fetched until resumed.
    paused: bool,
}

/// Reads assigned queues.
pub struct Consumer {
    client: Arc<Client>,
    group: Option<String>,
    assigned: Vec<Assignment>,
    replies: (mpsc::Sender<Tagged>, mpsc::Receiver<Tagged>),
    /// Bumped when the assignment changes: replies to older fetches are dropped.
    epoch: u64,
    /// Fetches in flight (tag id -> indices in `assigned`), of this epoch.
    requests: HashMap<u64, Vec<usize>>,
    next_request: u64,
    /// Set by `subscribe`.
    config: Option<GroupConfig>,
    /// A clustering member's membership.
    member: Option<GroupMember>,
    /// A broadcast member took its queues.
    broadcasting: bool,
    last_commit: Instant,
    /// Tag expression per topic (none: every message).
    tags: HashMap<String, String>,
    /// Newly assigned queues start paused (an ordered consumer locks them first).
    start_paused: bool,
    /// A pending rebalance waits for `release_queues` (a push consumer first
    /// finishes and commits what its workers hold).
    hold_rejoins: bool,
    /// Bytes asked for per fetch.
    pub max_bytes: u32,
    /// Damaged batches (`CorruptData`) are skipped instead of failing the poll.
    skip_corrupt: bool,
    /// Offsets skipped that way.
    skipped_corrupt: u64,
}

impl Consumer {
    /// A consumer; `group` names where offsets are committed.
    pub fn new(client: Arc<Client>, group: Option<String>) -> Consumer {
        Consumer {
            client,
            group,
            assigned: Vec::new(),
            replies: mpsc::channel(),
            epoch: 0,
            requests: HashMap::new(),
            next_request: 0,
            config: None,
            member: None,
            broadcasting: false,
            last_commit: Instant::now(),
            tags: HashMap::new(),
            start_paused: false,
            hold_rejoins: false,
            max_bytes: 1 << 20,
            skip_corrupt: false,
            skipped_corrupt: 0,
        }
    }

    /// With `skip` set, a queue whose next batch is damaged on the broker
    /// (`CorruptData`) moves past the damaged offsets (logged and counted in
    /// [`Consumer::skipped_corrupt`]) instead of failing every poll.
    pub fn set_skip_corrupt(&mut self, skip: bool) {
        self.skip_corrupt = skip;
    }

    /// Offsets skipped because their batch was damaged.
    pub fn skipped_corrupt(&self) -> u64 {
        self.skipped_corrupt
    }

    /// A member of a consumer group. Clustering: queues come from the group
    /// (joined at the first poll) and follow its rebalances. Broadcast: every
    /// queue of the topics, from this instance's own offsets.
    pub fn subscribe(client: Arc<Client>, config: GroupConfig) -> Consumer {
        let group = match config.mode {
            ConsumeMode::Clustering => config.group.clone(),
            // An invalid instance is reported at the first poll.
            ConsumeMode::Broadcast => config.broadcast_offsets_group().unwrap_or_default(),
        };
        let mut c = Consumer::new(client.clone(), Some(group));
        c.tags = config.tags.clone();
        if config.mode == ConsumeMode::Clustering {
            c.member = Some(GroupMember::start(client, config.clone()));
        }
        c.config = Some(config);
        c
    }

    /// The group generation of the current queues (0 outside a group).
    pub fn generation(&self) -> u32 {
        self.membership().map_or(0, |m| m.generation)
    }

    /// Group, generation and member id of a subscribed consumer.
    pub fn membership(&self) -> Option<Membership> {
        self.member.as_ref().map(GroupMember::membership)
    }

    /// Stops heartbeating without leaving the group, as a crashed process
    /// would; the consumer is unusable afterwards. For failure drills.
    pub fn abandon(mut self) {
        if let Some(m) = self.member.as_mut() {
            m.abandon();
        }
    }

    /// Adds queues of a topic, each starting as `start` says (one already
    /// assigned moves there).
    pub fn assign(&mut self, topic: &str, queues: &[u32], start: StartFrom) -> Result<(), ClientError> {
        for &queue in queues {
            let (first, end) = self.client.list_offsets(topic, queue)?;
            let position = match start {
                StartFrom::Earliest => first,
                StartFrom::Latest => end,
                StartFrom::Offset(o) => o.clamp(first, end),
                StartFrom::Committed => match &self.group {
                    Some(g) => self.client.fetch_offset(g, topic, queue)?.unwrap_or(first),
                    None => return Err(ClientError::Invalid("StartFrom::Committed needs a consumer group".into())),
                },
            };
            // A queue assigned again moves to the new position; what was in
            // flight for the old one is dropped.
            if let Some(a) = self.assigned.iter_mut().find(|a| a.topic == topic && a.queue == queue) {
                a.position = position;
                self.new_epoch();
                continue;
            }
            self.assigned.push(Assignment {
                topic: topic.to_string(),
                queue,
                position,
                fetching: false,
                paused: self.start_paused,
            });
        }
        Ok(())
    }

    /// Assigns every queue of the topic.
    pub fn assign_all(&mut self, topic: &str, start: StartFrom) -> Result<(), ClientError> {
        let n = self.client.topic(topic)?.queue_shards.len() as u32;
        self.assign(topic, &(0..n).collect::<Vec<_>>(), start)
    }

    /// True when the group asked this member to rejoin: the next poll gives
    /// up every queue (finish and commit what is in hand first).
    pub fn rebalance_pending(&self) -> bool {
        self.member.as_ref().is_some_and(GroupMember::needs_join) && !self.assigned.is_empty()
    }

    /// Receives only messages of `topic` whose tag matches `expression`
    /// (`*`, or tags joined by `||`); the broker filters, and positions still
    /// advance past the messages that do not match.
    pub fn filter_tags(&mut self, topic: &str, expression: &str) {
        self.tags.insert(topic.to_string(), expression.to_string());
    }

    /// With `hold`, a rebalance is followed only once `release_queues` gave
    /// up the current queues.
    pub fn hold_rejoins(&mut self, hold: bool) {
        self.hold_rejoins = hold;
    }

    /// Gives up every queue (nothing is committed); a pending rebalance is
    /// followed at the next poll.
    pub fn release_queues(&mut self) {
        self.assigned.clear();
        self.new_epoch();
    }

    /// Makes queues assigned from now on start paused.
    pub fn start_paused(&mut self, paused: bool) {
        self.start_paused = paused;
    }

    /// Stops fetching a queue; replies of fetches in flight are dropped, so
    /// nothing of it arrives until `resume`, which continues at its position.
    pub fn pause(&mut self, topic: &str, queue: u32) {
        if let Some(a) = self.assigned.iter_mut().find(|a| a.topic == topic && a.queue == queue) {
            a.paused = true;
        }
        self.new_epoch();
    }

    /// Moves a paused queue's position (an ordered consumer rewinds to what
    /// it did not finish).
    pub fn seek(&mut self, topic: &str, queue: u32, offset: u64) {
        if let Some(a) = self.assigned.iter_mut().find(|a| a.topic == topic && a.queue == queue && a.paused) {
            a.position = offset;
        }
    }

    /// Fetches a paused queue again.
    pub fn resume(&mut self, topic: &str, queue: u32) {
        if let Some(a) = self.assigned.iter_mut().find(|a| a.topic == topic && a.queue == queue) {
            a.paused = false;
        }
    }

    /// Next offset to read of each assigned queue: (topic, queue, offset).
    pub fn positions(&self) -> Vec<(String, u32, u64)> {
        self.assigned.iter().map(|a| (a.topic.clone(), a.queue, a.position)).collect()
    }

    /// Waits up to `timeout` (at most [`POLL_WAIT_MAX`]) for messages;
    /// returns those that arrived (maybe none). A group member first follows
    /// a pending rebalance.
    pub fn poll(&mut self, timeout: Duration) -> Result<Vec<ConsumedMessage>, ClientError> {
        let polled = self.poll_once(timeout);
        if let Err(error) = &polled {
            self.client.note_failure(error);
        }
        polled
    }

    fn poll_once(&mut self, timeout: Duration) -> Result<Vec<ConsumedMessage>, ClientError> {
        self.follow_group()?;
        let timeout = timeout.min(POLL_WAIT_MAX);
        let wait_ms = ringmq_protocol::time::millis_u32(timeout);
        // One long poll per shard over its queues that are neither in flight nor paused.
        let mut by_shard: HashMap<u32, Vec<usize>> = HashMap::new();
        for (i, a) in self.assigned.iter().enumerate().filter(|(_, a)| !a.fetching && !a.paused) {
            let shard = self.client.topic(&a.topic)?.queue_shards.get(a.queue as usize).copied().unwrap_or(0);
            by_shard.entry(shard).or_default().push(i);
        }
        for indices in by_shard.into_values() {
            self.fetch(indices, wait_ms)?;
        }
        if !self.assigned.iter().any(|a| a.fetching) {
            // Nothing to fetch (no queues, or all paused): wait like a poll would.
            std::thread::sleep(timeout);
            return Ok(Vec::new());
        }
        let deadline = Instant::now() + timeout + Duration::from_secs(5);
        let mut out = Vec::new();
        let first = self.replies.1.recv_timeout(deadline.saturating_duration_since(Instant::now()));
        let Ok(first) = first else {
            return Err(ClientError::Timeout {
                addr: self.client.config.bootstrap.clone(),
                timeout_ms: wait_ms as u64 + 5000,
            });
        };
        self.take(first, &mut out)?;
        while let Ok(more) = self.replies.1.try_recv() {
            self.take(more, &mut out)?;
        }
        Ok(out)
    }

    /// Sends one FetchMany for `indices` (queues of one shard).
    fn fetch(&mut self, indices: Vec<usize>, wait_ms: u32) -> Result<(), ClientError> {
        let entries = indices
            .iter()
            .map(|&i| {
                let a = &self.assigned[i];
                Fetch {
                    queue: QueueRef { topic: a.topic.clone(), queue: a.queue },
                    offset: a.position,
                    max_bytes: self.max_bytes,
                    max_wait_ms: 0,
                    tags: self.tags.get(&a.topic).cloned().unwrap_or_default(),
                }
            })
            .collect();
        let mut w = Writer::default();
        // Naming the group and member lets the broker trace deliveries (version 1).
        let consumer =
            self.group.as_ref().map(|g| (g.clone(), self.membership().map(|m| m.member).unwrap_or_default()));
        let request = FetchMany { max_wait_ms: wait_ms, entries, consumer };
        request.encode(&mut w);
        let id = self.next_request;
        self.next_request = (self.next_request + 1) & u64::from(u32::MAX);
        let (topic, queue) = (self.assigned[indices[0]].topic.clone(), self.assigned[indices[0]].queue);
        let reply_to = (self.replies.0.clone(), self.epoch << 32 | id);
        self.client.send_queue((&topic, queue), (ApiKey::FetchMany, request.version()), &w.buf, Some(reply_to))?;
        for &i in &indices {
            self.assigned[i].fetching = true;
        }
        self.requests.insert(id, indices);
        Ok(())
    }

    /// Takes one FetchMany reply. A failed entry or an undecodable batch fails
    /// the poll before any position moves, so every queue of the reply is
    /// fetched again from where it was.
    fn take(&mut self, (tag, reply): Tagged, out: &mut Vec<ConsumedMessage>) -> Result<(), ClientError> {
        if tag >> 32 != self.epoch {
            return Ok(()); // a fetch of queues given up in a rebalance
        }
        let Some(indices) = self.requests.remove(&(tag & u64::from(u32::MAX))) else { return Ok(()) };
        for &i in &indices {
            self.assigned[i].fetching = false;
        }
        let reply = reply?;
        if reply.error != ErrorCode::None {
            return Err(ClientError::Broker { code: reply.error, message: reply.message });
        }
        let outcomes = decode_fetched_many(&mut Reader::new(&reply.body))?;
        if outcomes.len() != indices.len() {
            return Err(ClientError::Protocol(format!(
                "{} fetch results for {} queues",
                outcomes.len(),
                indices.len()
            )));
        }
        // Every entry is judged before any position moves.
        let mut read = Vec::with_capacity(outcomes.len());
        for (&i, outcome) in indices.iter().zip(outcomes) {
            let a = &self.assigned[i];
            read.push(match outcome {
                Ok(f) => (decode_messages(&a.topic, a.queue, f.batches, a.position)?, f.next_offset, 0),
                Err(FetchFailed { damaged: Some((first, next)), message, .. }) if self.skip_corrupt => {
                    tracing::warn!(topic = %a.topic, queue = a.queue, first, next, %message, "skipping damaged offsets");
                    (Vec::new(), next, next.saturating_sub(a.position))
                }
                Err(FetchFailed { code, message, .. }) => return Err(ClientError::Broker { code, message }),
            });
        }
        for (i, (messages, next_offset, skipped)) in indices.into_iter().zip(read) {
            let a = &mut self.assigned[i];
            self.skipped_corrupt += skipped;
            a.position = a.position.max(next_offset);
            out.extend(messages);
        }
        Ok(())
    }

    /// Drops every fetch in flight: their replies are ignored.
    fn new_epoch(&mut self) {
        self.epoch += 1;
        self.requests.clear();
        self.assigned.iter_mut().for_each(|a| a.fetching = false);
    }

    /// Commits every assigned queue's position for the group. A group member
    /// that was fenced gets the broker's error and rejoins at the next poll.
    pub fn commit(&mut self) -> Result<(), ClientError> {
        let positions: Vec<_> = self.assigned.iter().map(|a| (a.topic.clone(), a.queue, a.position)).collect();
        self.commit_offsets(&positions)
    }

    /// Commits these (topic, queue, next offset) positions for the group
    /// (a push consumer commits below what its workers still process).
    pub fn commit_offsets(&mut self, positions: &[(String, u32, u64)]) -> Result<(), ClientError> {
        let group =
            self.group.as_deref().ok_or_else(|| ClientError::Invalid("commit needs a consumer group".into()))?;
        let who = match &self.member {
            Some(m) => m.membership(),
            None => Membership { group: group.to_string(), generation: 0, member: String::new() },
        };
        self.last_commit = Instant::now();
        for (topic, queue, position) in positions {
            if let Err(e) = self.client.commit_offset(&who, topic, *queue, *position) {
                if let (Some(m), ClientError::Broker { code, .. }) = (&self.member, &e) {
                    if code.needs_rejoin() || *code == ErrorCode::NotAssigned {
                        m.mark_rejoin();
                    }
                }
                return Err(e);
            }
        }
        Ok(())
    }

    /// For a group member: auto-commits when due; a clustering member follows
    /// a rebalance (gives up every queue, joins the next generation, resumes
    /// its new queues from the group's offsets); a broadcast member takes
    /// every queue once.
    fn follow_group(&mut self) -> Result<(), ClientError> {
        let Some(config) = &self.config else { return Ok(()) };
        let (auto, start_new, mode) = (config.auto_commit, config.start_new, config.mode);
        let rejoin = self.member.as_ref().is_some_and(GroupMember::needs_join);
        if auto.is_some_and(|every| self.last_commit.elapsed() >= every) && !rejoin && !self.assigned.is_empty() {
            if let Err(error) = self.commit() {
                tracing::warn!(%error, "auto-commit failed");
            }
        }
        let queues = match mode {
            ConsumeMode::Broadcast if !self.broadcasting => {
                let config = self.config.as_ref().expect("checked above");
                config.broadcast_offsets_group()?;
                let mut all = Vec::new();
                for topic in &config.topics {
                    let n = self.client.topic(topic)?.queue_shards.len() as u32;
                    all.extend((0..n).map(|q| (topic.clone(), q)));
                }
                self.broadcasting = true;
                all
            }
            ConsumeMode::Clustering if rejoin && (!self.hold_rejoins || self.assigned.is_empty()) => {
                if auto.is_some() && !self.assigned.is_empty() {
                    if let Err(error) = self.commit() {
                        tracing::warn!(%error, "commit before the rebalance failed");
                    }
                }
                self.assigned.clear();
                self.new_epoch();
                self.member.as_ref().expect("a clustering member").join()?
            }
            _ => return Ok(()),
        };
        let group = self.group.clone().expect("subscribed consumers have a group");
        for (topic, queue) in queues {
            let (first, end) = self.client.list_offsets(&topic, queue)?;
            let position = match self.client.fetch_offset(&group, &topic, queue)? {
                Some(o) => o.clamp(first, end),
                None if start_new == StartNew::Earliest => first,
                None => end,
            };
            self.assigned.push(Assignment { topic, queue, position, fetching: false, paused: self.start_paused });
        }
        Ok(())
    }
}

impl Drop for Consumer {
    /// With auto-commit, commits the positions before leaving the group, as
    /// Kafka's close does (the member leaves when its membership drops next).
    fn drop(&mut self) {
        let auto = self.config.as_ref().is_some_and(|c| c.auto_commit.is_some());
        if auto && !self.assigned.is_empty() && !self.member.as_ref().is_some_and(GroupMember::needs_join) {
            if let Err(error) = self.commit() {
                tracing::debug!(%error, "commit on close failed");
            }
        }
    }
}
