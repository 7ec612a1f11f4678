//! Topic metadata: topics, their queues, which shard owns each queue and the
//! storage queue id behind it. Shard 0 owns changes; it stores the whole
//! snapshot durably (new file, fsync, rename, directory fsync) and pushes it
//! to every shard before the client hears back.

use crate::protocol::codec::{DecodeError, Reader, Writer};
use crate::protocol::messages::{MetadataResponse, ShardAddr, TopicInfo};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

const FILE: &str = "metadata";
const MAGIC: u32 = 0x444d_4d52; // "RMMD"
/// Longest topic name.
pub const TOPIC_NAME_MAX: usize = 200;
/// Most queues per topic.
pub const QUEUES_MAX: u32 = 4096;

/// One queue of a topic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueSlot {
    pub shard: u32,
    /// Id of the queue in the owning shard's storage; never reused.
    pub storage_id: u32,
}

/// One topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topic {
    pub flush: u8,
    pub queues: Vec<QueueSlot>,
}

/// The broker's metadata.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Metadata {
    pub topics: BTreeMap<String, Topic>,
    pub next_storage_id: u32,
}

impl Metadata {
    /// Encodes with a trailing CRC.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::default();
        w.u32(MAGIC).u32(self.next_storage_id).u32(self.topics.len() as u32);
        for (name, t) in &self.topics {
            w.string(name).u8(t.flush).u32(t.queues.len() as u32);
            for q in &t.queues {
                w.u32(q.shard).u32(q.storage_id);
            }
        }
        let crc = crc32fast::hash(&w.buf);
        w.u32(crc);
        w.buf
    }

    /// Decodes and checks the CRC.
    pub fn decode(bytes: &[u8]) -> Result<Metadata, DecodeError> {
        if bytes.len() < 4
            || crc32fast::hash(&bytes[..bytes.len() - 4])
                != u32::from_le_bytes(bytes[bytes.len() - 4..].try_into().expect("4"))
        {
            return Err(DecodeError("metadata CRC mismatch"));
        }
        let mut r = Reader::new(&bytes[..bytes.len() - 4]);
        if r.u32()? != MAGIC {
            return Err(DecodeError("not a metadata file"));
        }
        let next_storage_id = r.u32()?;
        let mut topics = BTreeMap::new();
        for _ in 0..r.count(7)? {
            let name = r.string()?;
            let flush = r.u8()?;
            let queues = (0..r.count(8)?)
                .map(|_| Ok(QueueSlot { shard: r.u32()?, storage_id: r.u32()? }))
                .collect::<Result<_, _>>()?;
            topics.insert(name, Topic { flush, queues });
        }
        r.finish()?;
        Ok(Metadata { topics, next_storage_id })
    }

    /// Loads the metadata file, or empty metadata if there is none.
    pub fn load(data_dir: &Path) -> std::io::Result<Metadata> {
        match std::fs::read(data_dir.join(FILE)) {
            Ok(bytes) => Metadata::decode(&bytes).map_err(|e| {
                std::io::Error::new(std::io::ErrorKind::InvalidData, format!("{}: {e}", data_dir.join(FILE).display()))
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Metadata::default()),
            Err(e) => Err(e),
        }
    }

    /// Stores the metadata atomically and durably. Control plane: a small
    /// buffered write with fsync, not the Direct I/O data path.
    pub fn store(&self, data_dir: &Path) -> std::io::Result<()> {
        let tmp = data_dir.join(format!("{FILE}.tmp"));
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(&self.encode())?;
        f.sync_all()?;
        std::fs::rename(&tmp, data_dir.join(FILE))?;
        std::fs::File::open(data_dir)?.sync_all()
    }

    /// Adds a topic whose queues are spread over `shards` shards, starting at
    /// a shard picked by the name so that small topics do not all land on shard 0.
    pub fn with_topic(&self, name: &str, queues: u32, flush: u8, shards: u32) -> Metadata {
        let first = name.bytes().fold(0u32, |h, b| h.wrapping_mul(31).wrapping_add(u32::from(b))) % shards;
        let mut next = self.clone();
        let slots = (0..queues)
            .map(|q| QueueSlot { shard: (first + q) % shards, storage_id: self.next_storage_id + q })
            .collect();
        next.topics.insert(name.to_string(), Topic { flush, queues: slots });
        next.next_storage_id += queues;
        next
    }

    /// The protocol's view: shard addresses and the named topics (all if none named).
    pub fn describe(&self, shards: &[String], names: &[String]) -> MetadataResponse {
        let shards = shards.iter().enumerate().map(|(i, a)| ShardAddr { shard: i as u32, addr: a.clone() }).collect();
        let topics = self
            .topics
            .iter()
            .filter(|(n, _)| names.is_empty() || names.contains(n))
            .map(|(n, t)| TopicInfo {
                name: n.clone(),
                flush: t.flush,
                queue_shards: t.queues.iter().map(|q| q.shard).collect(),
            })
            .collect();
        MetadataResponse { shards, topics }
    }
}

/// Checks a topic name: 1-200 characters of [A-Za-z0-9._-], or a group's
/// retry or dead-letter topic (`%RETRY%group`, `%DLQ%group`).
pub fn valid_topic_name(name: &str) -> bool {
    let plain = name.strip_prefix("%RETRY%").or_else(|| name.strip_prefix("%DLQ%")).unwrap_or(name);
    valid_plain_name(plain)
}

fn valid_plain_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= TOPIC_NAME_MAX
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_round_trips_and_spreads_queues_over_shards() {
        let m = Metadata::default().with_topic("orders", 8, 0, 2).with_topic("audit", 3, 1, 2);
        assert_eq!(Metadata::decode(&m.encode()).unwrap(), m);
        let shards: Vec<u32> = m.topics["orders"].queues.iter().map(|q| q.shard).collect();
        assert_eq!(shards.iter().filter(|s| **s == 0).count(), 4);
        let ids: Vec<u32> = m.topics.values().flat_map(|t| t.queues.iter().map(|q| q.storage_id)).collect();
        let mut unique = ids.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), ids.len(), "storage ids are never shared");
        let mut bad = m.encode();
        bad[5] ^= 1;
        assert!(Metadata::decode(&bad).is_err());
    }

    #[test]
    fn topic_names_are_checked() {
        assert!(valid_topic_name("orders.eu-1_x"));
        assert!(!valid_topic_name(""));
        assert!(!valid_topic_name("a b"));
        assert!(!valid_topic_name(&"x".repeat(201)));
        assert!(valid_topic_name("%RETRY%billing") && valid_topic_name("%DLQ%billing"));
        assert!(!valid_topic_name("%RETRY%") && !valid_topic_name("%OTHER%x") && !valid_topic_name("%DLQ%a b"));
    }

    proptest::proptest! {
        /// A damaged metadata file is refused, never a panic.
        #[test]
        fn no_file_makes_metadata_decode_panic(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..512)) {
            let _ = Metadata::decode(&bytes);
        }
    }
}
