//! Request and response bodies of every API (docs/PROTOCOL.md has the layouts).

use super::codec::{DecodeError, Reader, Writer};

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
}

impl CreateTopic {
    pub fn encode(&self, w: &mut Writer) {
        w.string(&self.name).u32(self.queues).u8(self.flush);
    }

    pub fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(CreateTopic { name: r.string()?, queues: r.u32()?, flush: r.u8()? })
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

/// Fetch request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetch {
    pub queue: QueueRef,
    pub offset: u64,
    pub max_bytes: u32,
    pub max_wait_ms: u32,
}

impl Fetch {
    pub fn encode(&self, w: &mut Writer) {
        self.queue.encode(w);
        w.u64(self.offset).u32(self.max_bytes).u32(self.max_wait_ms);
    }

    pub fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(Fetch { queue: QueueRef::decode(r)?, offset: r.u64()?, max_bytes: r.u32()?, max_wait_ms: r.u32()? })
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

/// A consumer group's offset of one queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupOffset {
    pub group: String,
    pub queue: QueueRef,
    pub offset: u64,
}

impl GroupOffset {
    pub fn encode(&self, w: &mut Writer) {
        w.string(&self.group);
        self.queue.encode(w);
        w.u64(self.offset);
    }

    pub fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(GroupOffset { group: r.string()?, queue: QueueRef::decode(r)?, offset: r.u64()? })
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
