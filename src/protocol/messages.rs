//! Request and response bodies of every API (docs/PROTOCOL.md has the layouts).

use super::codec::{DecodeError, Reader, Writer};
use super::ErrorCode;

/// Flush policy on the wire: 0 sync, 1 async.
pub type FlushCode = u8;

/// Where a shard listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardAddr {
    pub shard: u32,
    pub addr: String,
}

/// A topic as metadata describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicInfo {
    pub name: String,
    pub flush: FlushCode,
    /// Owning shard of each queue, indexed by queue number.
    pub queue_shards: Vec<u32>,
}

/// Metadata response: every shard's address and the asked-for topics.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MetadataResponse {
    pub shards: Vec<ShardAddr>,
    pub topics: Vec<TopicInfo>,
}

impl MetadataResponse {
    pub fn encode(&self, w: &mut Writer) {
        w.u32(self.shards.len() as u32);
        for s in &self.shards {
            w.u32(s.shard).string(&s.addr);
        }
        w.u32(self.topics.len() as u32);
        for t in &self.topics {
            w.string(&t.name).u8(t.flush).u32(t.queue_shards.len() as u32);
            for s in &t.queue_shards {
                w.u32(*s);
            }
        }
    }

    pub fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        let shards =
            (0..r.count(6)?).map(|_| Ok(ShardAddr { shard: r.u32()?, addr: r.string()? })).collect::<Result<_, _>>()?;
        let topics = (0..r.count(7)?)
            .map(|_| {
                let name = r.string()?;
                let flush = r.u8()?;
                let queue_shards = (0..r.count(4)?).map(|_| r.u32()).collect::<Result<_, _>>()?;
                Ok(TopicInfo { name, flush, queue_shards })
            })
            .collect::<Result<_, _>>()?;
        Ok(MetadataResponse { shards, topics })
    }
}

/// Names asked for in a Metadata request (empty: all topics).
pub fn encode_names(names: &[String], w: &mut Writer) {
    w.u32(names.len() as u32);
    for n in names {
        w.string(n);
    }
}

/// Decodes a list of names.
pub fn decode_names(r: &mut Reader) -> Result<Vec<String>, DecodeError> {
    (0..r.count(2)?).map(|_| r.string()).collect()
}

/// CreateTopic request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateTopic {
    pub name: String,
    pub queues: u32,
    pub flush: FlushCode,
    /// The topic's own configs, by Kafka's names (version 1).
    pub configs: Vec<(String, String)>,
}

impl CreateTopic {
    /// The version that carries `configs`.
    pub const WITH_CONFIGS: u16 = 1;

    pub fn encode(&self, w: &mut Writer, version: u16) {
        w.string(&self.name).u32(self.queues).u8(self.flush);
        if version >= Self::WITH_CONFIGS {
            encode_configs(&self.configs, w);
        }
    }

    pub fn decode(r: &mut Reader, version: u16) -> Result<Self, DecodeError> {
        let (name, queues, flush) = (r.string()?, r.u32()?, r.u8()?);
        let configs = if version >= Self::WITH_CONFIGS { decode_configs(r)? } else { Vec::new() };
        Ok(CreateTopic { name, queues, flush, configs })
    }
}

/// Name and value pairs (a topic's configs).
pub fn encode_configs(pairs: &[(String, String)], w: &mut Writer) {
    w.u32(pairs.len() as u32);
    for (name, value) in pairs {
        w.string(name).string(value);
    }
}

/// Decodes name and value pairs.
pub fn decode_configs(r: &mut Reader) -> Result<Vec<(String, String)>, DecodeError> {
    (0..r.count(4)?).map(|_| Ok((r.string()?, r.string()?))).collect()
}

/// One change to a topic's configs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TopicChange {
    Set(String, String),
    /// Back to the broker's default.
    Unset(String),
    /// Add items to a list config (`cleanup.policy`).
    Append(String, String),
    /// Remove items from a list config.
    Subtract(String, String),
}

/// AlterTopic request: changes to a topic's configs, made all or none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlterTopic {
    pub topic: String,
    /// Only check the changes.
    pub validate_only: bool,
    pub changes: Vec<TopicChange>,
}

impl AlterTopic {
    pub fn encode(&self, w: &mut Writer) {
        w.string(&self.topic).u8(u8::from(self.validate_only)).u32(self.changes.len() as u32);
        for change in &self.changes {
            let (op, name, value) = match change {
                TopicChange::Set(n, v) => (0, n, v.as_str()),
                TopicChange::Unset(n) => (1, n, ""),
                TopicChange::Append(n, v) => (2, n, v.as_str()),
                TopicChange::Subtract(n, v) => (3, n, v.as_str()),
            };
            w.u8(op).string(name).string(value);
        }
    }

    pub fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        let (topic, validate_only) = (r.string()?, r.u8()? != 0);
        let changes = (0..r.count(5)?)
            .map(|_| {
                let (op, name, value) = (r.u8()?, r.string()?, r.string()?);
                Ok(match op {
                    0 => TopicChange::Set(name, value),
                    1 => TopicChange::Unset(name),
                    2 => TopicChange::Append(name, value),
                    3 => TopicChange::Subtract(name, value),
                    _ => return Err(DecodeError("a config change's op: 0 set, 1 unset, 2 append, 3 subtract")),
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(AlterTopic { topic, validate_only, changes })
    }
}

/// Names a queue of a topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueRef {
    pub topic: String,
    pub queue: u32,
}

impl QueueRef {
    pub fn encode(&self, w: &mut Writer) {
        w.string(&self.topic).u32(self.queue);
    }

    pub fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(QueueRef { topic: r.string()?, queue: r.u32()? })
    }
}

/// Acks asked of a produce: 0 none (no response is sent), 1 durable.
pub const ACKS_NONE: u8 = 0;
/// Respond once the batches are durable (or queued, for an async-flush topic).
pub const ACKS_DURABLE: u8 = 1;

/// Produce request: one or more record batches for one queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Produce<'a> {
    pub queue: QueueRef,
    pub acks: u8,
    pub batches: Vec<&'a [u8]>,
}

impl<'a> Produce<'a> {
    pub fn encode(&self, w: &mut Writer) {
        self.queue.encode(w);
        w.u8(self.acks).u32(self.batches.len() as u32);
        for b in &self.batches {
            w.bytes(b);
        }
    }

    pub fn decode(r: &mut Reader<'a>) -> Result<Self, DecodeError> {
        let queue = QueueRef::decode(r)?;
        let acks = r.u8()?;
        let batches = (0..r.count(4)?).map(|_| r.bytes()).collect::<Result<_, _>>()?;
        Ok(Produce { queue, acks, batches })
    }
}

/// Produce response: base offset and record count of each batch.
pub fn encode_produced(results: &[(u64, u32)], w: &mut Writer) {
    w.u32(results.len() as u32);
    for (base, count) in results {
        w.u64(*base).u32(*count);
    }
}

/// Decodes a produce response.
pub fn decode_produced(r: &mut Reader) -> Result<Vec<(u64, u32)>, DecodeError> {
    (0..r.count(12)?).map(|_| Ok((r.u64()?, r.u32()?))).collect()
}

/// ProduceMany request: one record batch for each of several queues of one
/// shard, appended in the order given (a producer's batches for every queue
/// waiting on that shard, in one request).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProduceMany<'a> {
    pub acks: u8,
    pub entries: Vec<(QueueRef, &'a [u8])>,
}

impl<'a> ProduceMany<'a> {
    pub fn encode(&self, w: &mut Writer) {
        w.u8(self.acks).u32(self.entries.len() as u32);
        for (queue, batch) in &self.entries {
            queue.encode(w);
            w.bytes(batch);
        }
    }

    pub fn decode(r: &mut Reader<'a>) -> Result<Self, DecodeError> {
        let acks = r.u8()?;
        let entries = (0..r.count(10)?).map(|_| Ok((QueueRef::decode(r)?, r.bytes()?))).collect::<Result<_, _>>()?;
        Ok(ProduceMany { acks, entries })
    }
}

/// The outcome of one ProduceMany entry: (base offset, record count), or the
/// error that entry alone got.
pub type EntryOutcome = Result<(u64, u32), (ErrorCode, String)>;

/// ProduceMany response: an outcome per entry, in request order.
pub fn encode_produced_many(outcomes: &[EntryOutcome], w: &mut Writer) {
    w.u32(outcomes.len() as u32);
    for outcome in outcomes {
        match outcome {
            Ok((base, count)) => w.u16(ErrorCode::None as u16).string("").u64(*base).u32(*count),
            Err((code, message)) => w.u16(*code as u16).string(message).u64(0).u32(0),
        };
    }
}

/// Decodes a ProduceMany response.
pub fn decode_produced_many(r: &mut Reader) -> Result<Vec<EntryOutcome>, DecodeError> {
    (0..r.count(16)?)
        .map(|_| {
            let (code, message, base, count) = (ErrorCode::from_u16(r.u16()?), r.string()?, r.u64()?, r.u32()?);
            Ok(if code == ErrorCode::None { Ok((base, count)) } else { Err((code, message)) })
        })
        .collect()
}

/// QueueCopy request: a queue's stored batches from an offset, every one
/// of them (a queue moving between broker groups is copied whole).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueCopy {
    pub queue: QueueRef,
    pub offset: u64,
    pub max_bytes: u32,
    pub max_wait_ms: u32,
}

impl QueueCopy {
    pub fn encode(&self, w: &mut Writer) {
        self.queue.encode(w);
        w.u64(self.offset).u32(self.max_bytes).u32(self.max_wait_ms);
    }

    pub fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(QueueCopy { queue: QueueRef::decode(r)?, offset: r.u64()?, max_bytes: r.u32()?, max_wait_ms: r.u32()? })
    }
}

/// QueueCopy answer: what a Fetch answers, the queue's end once it is
/// frozen for its move (no append will pass it: copied to there, the copy
/// is whole), and its last stable offset (below its end while a Kafka
/// transaction is open in it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueCopied<'a> {
    pub fetched: Fetched<'a>,
    pub frozen_end: Option<u64>,
    pub last_stable: u64,
    /// The end of the queue's compacted part (0 without one): offsets below
    /// it are read from the part, with gaps where compaction removed records.
    pub compacted_end: u64,
}

impl<'a> QueueCopied<'a> {
    pub fn encode(&self, w: &mut Writer) {
        self.fetched.encode(w);
        w.u8(u8::from(self.frozen_end.is_some())).u64(self.frozen_end.unwrap_or(0)).u64(self.last_stable);
        w.u64(self.compacted_end);
    }

    pub fn decode(r: &mut Reader<'a>) -> Result<Self, DecodeError> {
        let fetched = Fetched::decode(r)?;
        let (frozen, end) = (r.u8()?, r.u64()?);
        let last_stable = r.u64()?;
        Ok(QueueCopied { fetched, frozen_end: (frozen != 0).then_some(end), last_stable, compacted_end: r.u64()? })
    }
}

/// Fetch request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetch {
    pub queue: QueueRef,
    pub offset: u64,
    pub max_bytes: u32,
    pub max_wait_ms: u32,
    /// Tag expression: `*` (or empty) for every message, or `TagA || TagB`.
    pub tags: String,
}

impl Fetch {
    pub fn encode(&self, w: &mut Writer) {
        self.queue.encode(w);
        w.u64(self.offset).u32(self.max_bytes).u32(self.max_wait_ms).string(&self.tags);
    }

    pub fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(Fetch {
            queue: QueueRef::decode(r)?,
            offset: r.u64()?,
            max_bytes: r.u32()?,
            max_wait_ms: r.u32()?,
            tags: r.string()?,
        })
    }
}

/// Fetch response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched<'a> {
    pub start: u64,
    pub end: u64,
    pub next_offset: u64,
    /// Whole stored batches; the first may begin before the fetched offset.
    pub batches: &'a [u8],
}

impl<'a> Fetched<'a> {
    pub fn encode(&self, w: &mut Writer) {
        w.u64(self.start).u64(self.end).u64(self.next_offset).bytes(self.batches);
    }

    pub fn decode(r: &mut Reader<'a>) -> Result<Self, DecodeError> {
        Ok(Fetched { start: r.u64()?, end: r.u64()?, next_offset: r.u64()?, batches: r.bytes()? })
    }
}

/// The internal topic message-trace events are written to, each keyed by
/// its message's id in hex and valued a JSON object (docs/PROTOCOL.md).
pub const TRACE_TOPIC: &str = "%TRACE";

/// FetchMany request: one long poll over several queues of one shard (a
/// consumer's queues there). It is answered as soon as any queue has data,
/// with every queue's data, or after `max_wait_ms` with none. Version 1
/// names the consumer (group and member) the messages go to, for traces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchMany {
    pub max_wait_ms: u32,
    /// Each entry's `max_wait_ms` is ignored.
    pub entries: Vec<Fetch>,
    /// The consumer group and member fetching (version 1; None: version 0).
    pub consumer: Option<(String, String)>,
}

impl FetchMany {
    /// The version `encode` writes: 1 when it names its consumer.
    pub fn version(&self) -> u16 {
        u16::from(self.consumer.is_some())
    }

    pub fn encode(&self, w: &mut Writer) {
        w.u32(self.max_wait_ms);
        if let Some((group, member)) = &self.consumer {
            w.string(group).string(member);
        }
        w.u32(self.entries.len() as u32);
        for f in &self.entries {
            f.queue.encode(w);
            w.u64(f.offset).u32(f.max_bytes).string(&f.tags);
        }
    }

    pub fn decode(r: &mut Reader, version: u16) -> Result<Self, DecodeError> {
        let max_wait_ms = r.u32()?;
        let consumer = if version >= 1 { Some((r.string()?, r.string()?)) } else { None };
        let entries = (0..r.count(20)?)
            .map(|_| {
                let queue = QueueRef::decode(r)?;
                Ok(Fetch { queue, offset: r.u64()?, max_bytes: r.u32()?, max_wait_ms: 0, tags: r.string()? })
            })
            .collect::<Result<_, _>>()?;
        Ok(FetchMany { max_wait_ms, entries, consumer })
    }
}

/// Why one FetchMany entry failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchFailed {
    pub code: ErrorCode,
    pub message: String,
    /// For `CorruptData`: the damaged offsets [first, next) at the fetched
    /// offset; reading on from `next` skips them.
    pub damaged: Option<(u64, u64)>,
}

/// FetchMany response: per entry, in request order, an error code and
/// message, then on success the entry's Fetched, and for `CorruptData` the
/// damaged range (u64 first, u64 next).
pub fn encode_fetched_many(outcomes: &[Result<Fetched, FetchFailed>], w: &mut Writer) {
    w.u32(outcomes.len() as u32);
    for outcome in outcomes {
        match outcome {
            Ok(f) => {
                w.u16(ErrorCode::None as u16).string("");
                f.encode(w);
            }
            Err(failed) => {
                w.u16(failed.code as u16).string(&failed.message);
                if failed.code == ErrorCode::CorruptData {
                    let (first, next) = failed.damaged.unwrap_or_default();
                    w.u64(first).u64(next);
                }
            }
        }
    }
}

/// Decodes a FetchMany response.
pub fn decode_fetched_many<'a>(r: &mut Reader<'a>) -> Result<Vec<Result<Fetched<'a>, FetchFailed>>, DecodeError> {
    (0..r.count(4)?)
        .map(|_| {
            let (code, message) = (ErrorCode::from_u16(r.u16()?), r.string()?);
            if code == ErrorCode::None {
                return Ok(Ok(Fetched::decode(r)?));
            }
            let damaged = if code == ErrorCode::CorruptData { Some((r.u64()?, r.u64()?)) } else { None };
            Ok(Err(FetchFailed { code, message, damaged }))
        })
        .collect()
}

/// A consumer group's offset of one queue. `member` commits in
/// `generation`; a consumer outside any membership (manual assignment) sends
/// generation 0 and an empty member, accepted while the group has no members.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupOffset {
    pub member: Membership,
    pub queue: QueueRef,
    pub offset: u64,
}

impl GroupOffset {
    pub fn encode(&self, w: &mut Writer) {
        self.member.encode(w);
        self.queue.encode(w);
        w.u64(self.offset);
    }

    pub fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(GroupOffset { member: Membership::decode(r)?, queue: QueueRef::decode(r)?, offset: r.u64()? })
    }
}

/// Who speaks for a group: Heartbeat's and LeaveGroup's body, and the head of
/// SyncGroup's and CommitOffset's.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Membership {
    pub group: String,
    pub generation: u32,
    pub member: String,
}

impl Membership {
    pub fn encode(&self, w: &mut Writer) {
        w.string(&self.group).u32(self.generation).string(&self.member);
    }

    pub fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(Membership { group: r.string()?, generation: r.u32()?, member: r.string()? })
    }
}

/// JoinGroup: a member (new: empty `member`) asks to take part in the next
/// generation; `metadata` (its subscriptions) is opaque to the broker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinGroup {
    pub group: String,
    pub member: String,
    pub client_id: String,
    pub session_timeout_ms: u32,
    pub rebalance_timeout_ms: u32,
    pub metadata: Vec<u8>,
}

impl JoinGroup {
    pub fn encode(&self, w: &mut Writer) {
        w.string(&self.group).string(&self.member).string(&self.client_id);
        w.u32(self.session_timeout_ms).u32(self.rebalance_timeout_ms).bytes(&self.metadata);
    }

    pub fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(JoinGroup {
            group: r.string()?,
            member: r.string()?,
            client_id: r.string()?,
            session_timeout_ms: r.u32()?,
            rebalance_timeout_ms: r.u32()?,
            metadata: r.bytes()?.to_vec(),
        })
    }
}

/// JoinGroup's answer once the generation formed. Only the leader gets the
/// members (with their metadata), to compute the assignment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Joined {
    pub generation: u32,
    pub member: String,
    pub leader: String,
    pub members: Vec<(String, Vec<u8>)>,
}

impl Joined {
    pub fn encode(&self, w: &mut Writer) {
        w.u32(self.generation).string(&self.member).string(&self.leader);
        encode_pairs(&self.members, w);
    }

    pub fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(Joined { generation: r.u32()?, member: r.string()?, leader: r.string()?, members: decode_pairs(r)? })
    }
}

/// SyncGroup: every member asks for its assignment; the leader brings them all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncGroup {
    pub member: Membership,
    pub assignments: Vec<(String, Vec<u8>)>,
}

impl SyncGroup {
    pub fn encode(&self, w: &mut Writer) {
        self.member.encode(w);
        encode_pairs(&self.assignments, w);
    }

    pub fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(SyncGroup { member: Membership::decode(r)?, assignments: decode_pairs(r)? })
    }
}

fn encode_pairs(pairs: &[(String, Vec<u8>)], w: &mut Writer) {
    w.u32(pairs.len() as u32);
    for (name, bytes) in pairs {
        w.string(name).bytes(bytes);
    }
}

fn decode_pairs(r: &mut Reader) -> Result<Vec<(String, Vec<u8>)>, DecodeError> {
    let n = r.count(6)?;
    (0..n).map(|_| Ok((r.string()?, r.bytes()?.to_vec()))).collect()
}

/// A member's queues in one generation, by topic: SyncGroup's per-member
/// bytes, which the coordinator reads to check commits.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Assignment {
    pub topics: Vec<(String, Vec<u32>)>,
}

impl Assignment {
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::default();
        w.u32(self.topics.len() as u32);
        for (topic, queues) in &self.topics {
            w.string(topic).u32(queues.len() as u32);
            for q in queues {
                w.u32(*q);
            }
        }
        w.buf
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(bytes);
        let n = r.count(6)?;
        let mut topics = Vec::with_capacity(n);
        for _ in 0..n {
            let topic = r.string()?;
            let m = r.count(4)?;
            topics.push((topic, (0..m).map(|_| r.u32()).collect::<Result<_, _>>()?));
        }
        r.finish()?;
        Ok(Assignment { topics })
    }

    /// True if `queue` of `topic` is in it.
    pub fn holds(&self, topic: &str, queue: u32) -> bool {
        self.topics.iter().any(|(t, qs)| t == topic && qs.contains(&queue))
    }
}

/// SendBack: a group failed to consume the message at `offset`; schedule it
/// for a retry (delay by reconsume count unless `delay_level` is set) or,
/// past `max_retries` (0: the broker's default of 16) or when `dead_letter`
/// says so (an ordered consumer that retried in place), dead-letter it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendBack {
    pub group: String,
    pub queue: QueueRef,
    pub offset: u64,
    pub max_retries: u32,
    pub delay_level: u32,
    pub dead_letter: bool,
}

impl SendBack {
    pub fn encode(&self, w: &mut Writer) {
        w.string(&self.group);
        self.queue.encode(w);
        w.u64(self.offset).u32(self.max_retries).u32(self.delay_level).u8(u8::from(self.dead_letter));
    }

    pub fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(SendBack {
            group: r.string()?,
            queue: QueueRef::decode(r)?,
            offset: r.u64()?,
            max_retries: r.u32()?,
            delay_level: r.u32()?,
            dead_letter: r.u8()? != 0,
        })
    }
}

/// ProduceDelayed: a batch whose records become visible in the queue at
/// `deliver_at_ms` (Unix ms) or after delay level `delay_level` (1..=18;
/// 0: use `deliver_at_ms`). Answered once stored durably, with the due time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProduceDelayed<'a> {
    pub queue: QueueRef,
    pub delay_level: u32,
    pub deliver_at_ms: u64,
    pub batch: &'a [u8],
}

impl<'a> ProduceDelayed<'a> {
    pub fn encode(&self, w: &mut Writer) {
        self.queue.encode(w);
        w.u32(self.delay_level).u64(self.deliver_at_ms).bytes(self.batch);
    }

    pub fn decode(r: &mut Reader<'a>) -> Result<Self, DecodeError> {
        Ok(ProduceDelayed {
            queue: QueueRef::decode(r)?,
            delay_level: r.u32()?,
            deliver_at_ms: r.u64()?,
            batch: r.bytes()?,
        })
    }
}

/// LookupMessages: a message by id, or the messages of a topic with a key,
/// among those stored by the shard that receives it (clients ask every shard).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LookupQuery {
    Id([u8; 16]),
    Key { topic: String, key: Vec<u8> },
}

impl LookupQuery {
    pub fn encode(&self, w: &mut Writer) {
        match self {
            LookupQuery::Id(id) => w.u8(0).bytes(id),
            LookupQuery::Key { topic, key } => w.u8(1).string(topic).bytes(key),
        };
    }

    pub fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        match r.u8()? {
            0 => Ok(LookupQuery::Id(r.bytes()?.try_into().map_err(|_| DecodeError("a message id has 16 bytes"))?)),
            1 => Ok(LookupQuery::Key { topic: r.string()?, key: r.bytes()?.to_vec() }),
            _ => Err(DecodeError("lookup kind must be 0 (id) or 1 (key)")),
        }
    }
}

/// LookupMessages' answer: how many matches retention removed, and the
/// messages found, each as a stamped one-record batch of its topic's queue.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LookedUp {
    pub removed: u32,
    pub found: Vec<(String, u32, Vec<u8>)>,
}

impl LookedUp {
    pub fn encode(&self, w: &mut Writer) {
        w.u32(self.removed).u32(self.found.len() as u32);
        for (topic, queue, batch) in &self.found {
            w.string(topic).u32(*queue).bytes(batch);
        }
    }

    pub fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        let removed = r.u32()?;
        let n = r.count(10)?;
        let found = (0..n).map(|_| Ok((r.string()?, r.u32()?, r.bytes()?.to_vec()))).collect::<Result<_, _>>()?;
        Ok(LookedUp { removed, found })
    }
}

/// ProduceHalf: a transactional message of producer group `group`, stored
/// but invisible until EndTransaction commits it; answers the half offset.
/// EndTransaction: `commit` 1 or 0 (rollback) for the half message at
/// `half` of the queue's shard; answers u8 1 committed, 2 rolled back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transactional<'a> {
    pub queue: QueueRef,
    pub group: String,
    /// ProduceHalf: the message's one-record batch; EndTransaction: empty.
    pub batch: &'a [u8],
    /// EndTransaction only.
    pub half: u64,
    pub commit: bool,
}

impl<'a> Transactional<'a> {
    pub fn encode(&self, w: &mut Writer) {
        self.queue.encode(w);
        w.string(&self.group).bytes(self.batch).u64(self.half).u8(u8::from(self.commit));
    }

    pub fn decode(r: &mut Reader<'a>) -> Result<Self, DecodeError> {
        Ok(Transactional {
            queue: QueueRef::decode(r)?,
            group: r.string()?,
            batch: r.bytes()?,
            half: r.u64()?,
            commit: r.u8()? == 1,
        })
    }
}

/// LockQueues (`lease_ms` set) and UnlockQueues (`lease_ms` 0): `holder`
/// takes, renews or releases the locks of queues of `group`. LockQueues
/// answers a u8 per queue: 1 if `holder` has it now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueLocking {
    pub group: String,
    pub holder: String,
    pub lease_ms: u32,
    pub queues: Vec<QueueRef>,
}

impl QueueLocking {
    pub fn encode(&self, w: &mut Writer) {
        w.string(&self.group).string(&self.holder).u32(self.lease_ms).u32(self.queues.len() as u32);
        for q in &self.queues {
            q.encode(w);
        }
    }

    pub fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        let (group, holder, lease_ms) = (r.string()?, r.string()?, r.u32()?);
        let n = r.count(6)?;
        let queues = (0..n).map(|_| QueueRef::decode(r)).collect::<Result<_, _>>()?;
        Ok(QueueLocking { group, holder, lease_ms, queues })
    }
}

/// SendBack's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SentBack {
    pub dead_lettered: bool,
    /// Sends-back of this message so far, this one included.
    pub reconsume_times: u32,
    /// When the retry is due (Unix ms; 0 when dead-lettered).
    pub due_ms: u64,
}

impl SentBack {
    pub fn encode(&self, w: &mut Writer) {
        w.u8(u8::from(self.dead_lettered)).u32(self.reconsume_times).u64(self.due_ms);
    }

    pub fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(SentBack { dead_lettered: r.u8()? != 0, reconsume_times: r.u32()?, due_ms: r.u64()? })
    }
}

/// FetchOffset's answer when the group never committed for the queue.
pub const NO_OFFSET: u64 = u64::MAX;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_round_trip() {
        let m = MetadataResponse {
            shards: vec![ShardAddr { shard: 0, addr: "127.0.0.1:9292".into() }],
            topics: vec![TopicInfo { name: "t".into(), flush: 0, queue_shards: vec![0, 1, 0] }],
        };
        let mut w = Writer::default();
        m.encode(&mut w);
        assert_eq!(MetadataResponse::decode(&mut Reader::new(&w.buf)).unwrap(), m);
        let p = Produce {
            queue: QueueRef { topic: "t".into(), queue: 2 },
            acks: ACKS_DURABLE,
            batches: vec![b"abc", b"de"],
        };
        let mut w = Writer::default();
        p.encode(&mut w);
        assert_eq!(Produce::decode(&mut Reader::new(&w.buf)).unwrap(), p);
        let mut lying = w.buf.clone();
        let n = lying.len();
        lying.truncate(n - 1);
        assert!(Produce::decode(&mut Reader::new(&lying)).is_err());
    }
}

/// ReplicaFetch: a follower's shard asks the same shard of its group's
/// leader for the log from `from`, its own durable end (which tells the
/// leader how far the follower has it durable).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaFetch {
    pub broker_group: String,
    pub follower: String,
    /// The leader epoch the follower follows: a leader of another epoch refuses.
    pub epoch: u64,
    pub shard: u32,
    pub from: u64,
    pub max_bytes: u32,
    pub max_wait_ms: u32,
}

impl ReplicaFetch {
    pub fn encode(&self, w: &mut Writer) {
        w.string(&self.broker_group).string(&self.follower).u64(self.epoch).u32(self.shard);
        w.u64(self.from).u32(self.max_bytes).u32(self.max_wait_ms);
    }

    pub fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(ReplicaFetch {
            broker_group: r.string()?,
            follower: r.string()?,
            epoch: r.u64()?,
            shard: r.u32()?,
            from: r.u64()?,
            max_bytes: r.u32()?,
            max_wait_ms: r.u32()?,
        })
    }
}

/// ReplicaFetch response: whole stored batches from `from` to `next` (a
/// padding batch as its header alone), and the leader's log positions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaRange<'a> {
    pub epoch: u64,
    pub from: u64,
    pub next: u64,
    pub log_start: u64,
    /// The end of what the leader ships: taken for its own durable write.
    pub shipped_end: u64,
    /// Everything before this is durable on the leader and `min_insync` followers.
    pub committed_end: u64,
    pub batches: &'a [u8],
}

impl<'a> ReplicaRange<'a> {
    pub fn encode(&self, w: &mut Writer) {
        w.u64(self.epoch).u64(self.from).u64(self.next).u64(self.log_start);
        w.u64(self.shipped_end).u64(self.committed_end).bytes(self.batches);
    }

    pub fn decode(r: &mut Reader<'a>) -> Result<Self, DecodeError> {
        Ok(ReplicaRange {
            epoch: r.u64()?,
            from: r.u64()?,
            next: r.u64()?,
            log_start: r.u64()?,
            shipped_end: r.u64()?,
            committed_end: r.u64()?,
            batches: r.bytes()?,
        })
    }
}
