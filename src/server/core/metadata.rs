//! Topic metadata: topics, their queues, which shard owns each queue and the
//! storage queue id behind it. Shard 0 owns changes; it stores the whole
//! snapshot durably (new file, fsync, rename, directory fsync) and pushes it
//! to every shard before the client hears back. In a cluster of several
//! broker groups a topic's queues may live in other groups: those are named
//! by their place, and only this group's have storage here.

use super::placement::{Place, PlacedTopic};
use super::topic_configs::TopicConfigs;
use crate::protocol::codec::{DecodeError, Reader, Writer};
use ringmq_shards::FlushPolicy;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

const FILE: &str = "metadata";
/// Files from before topics could span broker groups: every queue is here.
const MAGIC_V1: u32 = 0x444d_4d52; // "RMMD"
/// Files from before topics had configs of their own.
const MAGIC_V2: u32 = 0x324d_4d52; // "RMM2"
const MAGIC: u32 = 0x334d_4d52; // "RMM3"
/// Longest topic name.
pub const TOPIC_NAME_MAX: usize = 200;
/// Most queues per topic.
pub const QUEUES_MAX: u32 = 4096;

/// One queue of a topic, on a shard of this broker group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueSlot {
    pub shard: u32,
    /// Id of the queue in the owning shard's storage; never reused.
    pub storage_id: u32,
}

/// Where a topic's queue lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Home {
    Here(QueueSlot),
    /// In another broker group: its leader serves it.
    Group(Place),
    /// Moving here from `from`, which serves it until the switch: its copy
    /// is stored here, and clients are sent to `from`.
    Arriving {
        slot: QueueSlot,
        from: Place,
    },
    /// Moving to `to`, frozen for the switch: served here for reads, its
    /// end final (appends are refused until `to` takes it over).
    Leaving {
        slot: QueueSlot,
        to: Place,
    },
}

impl Home {
    /// The queue's storage on this group's shard, if it has some here.
    pub fn stored(&self) -> Option<QueueSlot> {
        match self {
            Home::Here(slot) | Home::Arriving { slot, .. } | Home::Leaving { slot, .. } => Some(*slot),
            Home::Group(_) => None,
        }
    }

    /// The queue's storage if this group serves its reads.
    pub fn served(&self) -> Option<QueueSlot> {
        match self {
            Home::Here(slot) | Home::Leaving { slot, .. } => Some(*slot),
            Home::Group(_) | Home::Arriving { .. } => None,
        }
    }
}

/// One topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topic {
    pub flush: u8,
    pub queues: Vec<Home>,
    /// The etcd revision that created it in a cluster (0 on a single node).
    pub created: i64,
    /// The configs it set for itself.
    pub configs: TopicConfigs,
}

impl Topic {
    /// The topic's id, the same on every broker and across restarts, and
    /// another for a topic made again under its name: made from the name and
    /// its creation (its etcd revision in a cluster; on a single node its
    /// first queue's storage id, never reused).
    pub fn id(&self, name: &str) -> [u8; 16] {
        use sha2::Digest;
        let creation = match (self.created, self.queues.first()) {
            (0, Some(Home::Here(slot))) => u64::from(slot.storage_id),
            (created, _) => created as u64,
        };
        let digest = sha2::Sha256::new().chain_update(name.as_bytes()).chain_update(creation.to_le_bytes()).finalize();
        let mut id: [u8; 16] = digest[..16].try_into().expect("16 bytes");
        // A version-8 (name-based) UUID, never Kafka's reserved zero or one.
        id[6] = (id[6] & 0x0f) | 0x80;
        id[8] = (id[8] & 0x3f) | 0x80;
        id
    }
}

/// The broker's metadata.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Metadata {
    pub topics: BTreeMap<String, Topic>,
    pub next_storage_id: u32,
}

impl Metadata {
    /// Every queue `shard` of this group stores (those moving here or away
    /// too): topic, queue number, slot.
    pub fn slots_on(&self, shard: usize) -> Vec<(String, u32, QueueSlot)> {
        let mut slots = Vec::new();
        for (name, topic) in &self.topics {
            for (queue, home) in topic.queues.iter().enumerate() {
                if let Some(slot) = home.stored().filter(|s| s.shard as usize == shard) {
                    slots.push((name.clone(), queue as u32, slot));
                }
            }
        }
        slots
    }

    /// Encodes with a trailing CRC.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::default();
        w.u32(MAGIC).u32(self.next_storage_id).u32(self.topics.len() as u32);
        for (name, t) in &self.topics {
            w.string(name).u8(t.flush).u64(t.created as u64).u32(t.queues.len() as u32);
            for q in &t.queues {
                match q {
                    Home::Here(slot) => w.u8(0).u32(slot.shard).u32(slot.storage_id),
                    Home::Group(place) => w.u8(1).string(&place.broker_group).u32(place.shard),
                    Home::Arriving { slot, from } => {
                        w.u8(2).u32(slot.shard).u32(slot.storage_id).string(&from.broker_group).u32(from.shard)
                    }
                    Home::Leaving { slot, to } => {
                        w.u8(3).u32(slot.shard).u32(slot.storage_id).string(&to.broker_group).u32(to.shard)
                    }
                };
            }
            let configs = t.configs.entries();
            w.u32(configs.len() as u32);
            for (config, value) in configs {
                w.string(config).string(&value);
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
        let (v1, v2) = match r.u32()? {
            MAGIC_V1 => (true, false),
            MAGIC_V2 => (false, true),
            MAGIC => (false, false),
            _ => return Err(DecodeError("not a metadata file")),
        };
        let next_storage_id = r.u32()?;
        let mut topics = BTreeMap::new();
        for _ in 0..r.count(7)? {
            let name = r.string()?;
            let flush = r.u8()?;
            let created = if v1 { 0 } else { r.u64()? as i64 };
            let queues = (0..r.count(8)?).map(|_| decode_home(&mut r, v1)).collect::<Result<_, _>>()?;
            let configs = if v1 || v2 { TopicConfigs::default() } else { decode_configs(&mut r)? };
            topics.insert(name, Topic { flush, queues, created, configs });
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
        ringmq_shards::replace_durably(data_dir, FILE, &self.encode())
    }

    /// Adds a topic whose queues are spread over `shards` shards, starting at
    /// a shard picked by the name so that small topics do not all land on shard 0.
    pub fn with_topic(&self, name: &str, queues: u32, flush: u8, configs: TopicConfigs, shards: u32) -> Metadata {
        let first = spread_hash(name) % shards;
        let mut next = self.clone();
        let slots = (0..queues)
            .map(|q| Home::Here(QueueSlot { shard: (first + q) % shards, storage_id: self.next_storage_id + q }))
            .collect();
        next.topics.insert(name.to_string(), Topic { flush, queues: slots, created: 0, configs });
        next.next_storage_id += queues;
        next
    }

    /// The topic `name` with `queues` queues in all: the new ones continue its
    /// round robin over `shards` shards (existing queues keep their storage).
    pub fn with_queues(&self, name: &str, queues: u32, shards: u32) -> Metadata {
        let mut next = self.clone();
        let first = spread_hash(name) % shards;
        let topic = next.topics.get_mut(name).expect("a topic that exists");
        for q in topic.queues.len() as u32..queues {
            topic.queues.push(Home::Here(QueueSlot { shard: (first + q) % shards, storage_id: next.next_storage_id }));
            next.next_storage_id += 1;
        }
        next
    }

    /// This broker group's metadata for the cluster's `topics`: a topic
    /// already held (the same creation) keeps its queues' storage (those it
    /// adds get new storage), a new one gets storage ids for the queues
    /// placed in `group`, and topics etcd no longer has are gone. A queue
    /// moving here is `Arriving` (stored, not served); one moving away is
    /// `Leaving` once its move is frozen; the switch makes the arriving
    /// copy `Here` and the leaving one another group's.
    pub fn with_placement(&self, topics: &BTreeMap<String, PlacedTopic>, group: &str) -> Metadata {
        let mut next = Metadata { topics: BTreeMap::new(), next_storage_id: self.next_storage_id };
        for (name, placed) in topics {
            let kept =
                self.topics.get(name).filter(|t| t.created == placed.created && t.queues.len() <= placed.queues.len());
            let queues = placed
                .queues
                .iter()
                .enumerate()
                .map(|(i, place)| {
                    let held = kept.and_then(|t| t.queues.get(i));
                    let moving = placed.moves.get(&(i as u32));
                    let mut slot_on = |shard| {
                        held.and_then(Home::stored).filter(|s| s.shard == shard).unwrap_or_else(|| {
                            next.next_storage_id += 1;
                            QueueSlot { shard, storage_id: next.next_storage_id - 1 }
                        })
                    };
                    let placed_here = place.broker_group == group;
                    match moving {
                        Some(m) if !placed_here && m.to.broker_group == group => {
                            Home::Arriving { slot: slot_on(m.to.shard), from: place.clone() }
                        }
                        _ if !placed_here => Home::Group(place.clone()),
                        Some(m) if m.frozen => Home::Leaving { slot: slot_on(place.shard), to: m.to.clone() },
                        _ => Home::Here(slot_on(place.shard)),
                    }
                })
                .collect();
            let topic = Topic { flush: placed.flush, queues, created: placed.created, configs: placed.configs.clone() };
            next.topics.insert(name.clone(), topic);
        }
        next
    }

    /// Every topic's name by its id (Kafka's messages that name topics by id).
    pub fn names_by_id(&self) -> HashMap<[u8; 16], &String> {
        self.topics.iter().map(|(n, t)| (t.id(n), n)).collect()
    }

    /// The named topics (all if none named) as clients see them: shard
    /// addresses, and each queue by the index `shard_of` gives its home.
    pub fn describe(&self, addrs: Vec<String>, shard_of: impl Fn(&Home) -> u32, names: &[String]) -> ClientView {
        let topics = self
            .topics
            .iter()
            .filter(|(n, _)| names.is_empty() || names.contains(n))
            .map(|(n, t)| TopicView {
                id: t.id(n),
                name: n.clone(),
                flush: super::topics::flush_policy(t.flush),
                queue_shards: t.queues.iter().map(&shard_of).collect(),
            })
            .collect();
        ClientView { shard_addrs: addrs, topics }
    }
}

/// Topics as a client of either protocol sees them; each edge encodes it
/// as its Metadata response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientView {
    /// Every shard's address, by its index (cluster-wide in a cluster).
    pub shard_addrs: Vec<String>,
    pub topics: Vec<TopicView>,
}

/// One topic of a [`ClientView`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicView {
    /// The topic's id (Kafka's topic UUID): a new one for a topic made again.
    pub id: [u8; 16],
    pub name: String,
    pub flush: FlushPolicy,
    /// The index of the shard holding each queue (`u32::MAX`: none now).
    pub queue_shards: Vec<u32>,
}

fn decode_home(r: &mut Reader<'_>, v1: bool) -> Result<Home, DecodeError> {
    let slot = |r: &mut Reader<'_>| Ok::<_, DecodeError>(QueueSlot { shard: r.u32()?, storage_id: r.u32()? });
    let place = |r: &mut Reader<'_>| Ok::<_, DecodeError>(Place { broker_group: r.string()?, shard: r.u32()? });
    match if v1 { 0 } else { r.u8()? } {
        0 => Ok(Home::Here(slot(r)?)),
        1 => Ok(Home::Group(place(r)?)),
        2 => Ok(Home::Arriving { slot: slot(r)?, from: place(r)? }),
        3 => Ok(Home::Leaving { slot: slot(r)?, to: place(r)? }),
        _ => Err(DecodeError("unknown queue home")),
    }
}

fn decode_configs(r: &mut Reader<'_>) -> Result<TopicConfigs, DecodeError> {
    let entries = (0..r.count(8)?).map(|_| Ok((r.string()?, r.string()?))).collect::<Result<Vec<_>, DecodeError>>()?;
    TopicConfigs::from_entries(entries.iter().map(|(n, v)| (n.as_str(), v.as_str())))
        .map_err(|_| DecodeError("a topic config the broker does not take"))
}

/// The hash of a topic name that picks the shard its first queue goes to
/// (on a single node and over a cluster's groups alike).
pub fn spread_hash(name: &str) -> u32 {
    name.bytes().fold(0u32, |h, b| h.wrapping_mul(31).wrapping_add(u32::from(b)))
}

/// Checks a topic name: 1-200 characters of [A-Za-z0-9._-], a group's
/// retry or dead-letter topic (`%RETRY%group`, `%DLQ%group`), or the trace topic.
pub fn valid_topic_name(name: &str) -> bool {
    if name == crate::protocol::messages::TRACE_TOPIC {
        return true;
    }
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
        let kept = TopicConfigs::from_entries([("retention.ms", "60000")]).unwrap();
        let m = Metadata::default().with_topic("orders", 8, 0, kept, 2).with_topic(
            "audit",
            3,
            1,
            TopicConfigs::default(),
            2,
        );
        assert_eq!(Metadata::decode(&m.encode()).unwrap(), m);
        let slots = |t: &Topic| t.queues.iter().map(here).collect::<Vec<_>>();
        let shards: Vec<u32> = slots(&m.topics["orders"]).iter().map(|q| q.shard).collect();
        assert_eq!(shards.iter().filter(|s| **s == 0).count(), 4);
        let ids: Vec<u32> = m.topics.values().flat_map(|t| slots(t).into_iter().map(|q| q.storage_id)).collect();
        let mut unique = ids.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), ids.len(), "storage ids are never shared");
        let grown = m.with_queues("audit", 5, 2);
        assert_eq!(grown.topics["audit"].queues[..3], m.topics["audit"].queues[..]);
        let added: Vec<QueueSlot> = grown.topics["audit"].queues[3..].iter().map(here).collect();
        assert_eq!(added.iter().map(|q| q.storage_id).collect::<Vec<_>>(), [m.next_storage_id, m.next_storage_id + 1]);
        assert_ne!(added[0].shard, added[1].shard, "the round robin goes on");
        let mut bad = m.encode();
        bad[5] ^= 1;
        assert!(Metadata::decode(&bad).is_err());
    }

    fn here(h: &Home) -> QueueSlot {
        match h {
            Home::Here(slot) => *slot,
            other => panic!("{other:?} is not here"),
        }
    }

    #[test]
    fn a_file_from_before_groups_reads_as_every_queue_here() {
        let mut w = Writer::default();
        w.u32(MAGIC_V1).u32(7).u32(1).string("old").u8(1).u32(2).u32(0).u32(5).u32(1).u32(6);
        let crc = crc32fast::hash(&w.buf);
        w.u32(crc);
        let m = Metadata::decode(&w.buf).unwrap();
        let old = &m.topics["old"];
        assert_eq!((old.flush, old.created, m.next_storage_id), (1, 0, 7));
        assert_eq!(
            old.queues,
            [Home::Here(QueueSlot { shard: 0, storage_id: 5 }), Home::Here(QueueSlot { shard: 1, storage_id: 6 })]
        );
    }

    #[test]
    fn a_placement_keeps_the_storage_of_topics_held_and_names_other_groups_queues() {
        let at = |group: &str, shard| Place { broker_group: group.into(), shard };
        let topic = |created, queues: Vec<Place>| PlacedTopic { flush: 0, queues, created, ..Default::default() };
        let mut placed = BTreeMap::new();
        placed.insert("t".to_string(), topic(10, vec![at("a", 0), at("b", 0), at("a", 1)]));
        let m = Metadata::default().with_placement(&placed, "a");
        let t = &m.topics["t"];
        assert_eq!(t.queues[1], Home::Group(at("b", 0)));
        assert_eq!(
            (here(&t.queues[0]), here(&t.queues[2])),
            (QueueSlot { shard: 0, storage_id: 0 }, QueueSlot { shard: 1, storage_id: 1 })
        );
        assert_eq!(Metadata::decode(&m.encode()).unwrap(), m);

        placed.insert("u".to_string(), topic(11, vec![at("b", 0)]));
        let again = m.with_placement(&placed, "a");
        assert_eq!(again.topics["t"], m.topics["t"], "a topic held keeps its storage");
        assert_eq!(again.topics["u"].queues, [Home::Group(at("b", 0))], "a topic with no queue here is still known");

        placed.insert("t".to_string(), topic(10, vec![at("a", 0), at("b", 0), at("a", 1), at("a", 0)]));
        let grown = again.with_placement(&placed, "a");
        assert_eq!(
            grown.topics["t"].queues[..3],
            again.topics["t"].queues[..],
            "added queues keep the others' storage"
        );
        assert_eq!(here(&grown.topics["t"].queues[3]).storage_id, 2);
        placed.insert("t".to_string(), topic(12, vec![at("a", 0)]));
        let recreated = grown.with_placement(&placed, "a");
        assert_eq!(here(&recreated.topics["t"].queues[0]).storage_id, 3, "a topic made again gets new storage");
        placed.clear();
        assert!(recreated.with_placement(&placed, "a").topics.is_empty());
    }

    #[test]
    fn a_moving_queue_arrives_with_storage_leaves_once_frozen_and_switches_keeping_the_copy() {
        use crate::server::core::placement::Move;
        let at = |group: &str, shard| Place { broker_group: group.into(), shard };
        let mut t = PlacedTopic { queues: vec![at("a", 0), at("a", 1)], created: 5, ..Default::default() };
        let view = |t: &PlacedTopic| BTreeMap::from([("t".to_string(), t.clone())]);
        let (a0, b0) = (Metadata::default().with_placement(&view(&t), "a"), Metadata::default());
        let b0 = b0.with_placement(&view(&t), "b");

        t.moves.insert(1, Move { to: at("b", 0), frozen: false });
        let (a1, b1) = (a0.with_placement(&view(&t), "a"), b0.with_placement(&view(&t), "b"));
        assert_eq!(a1, a0, "the source serves it as before until the move is frozen");
        let arriving = QueueSlot { shard: 0, storage_id: b0.next_storage_id };
        assert_eq!(b1.topics["t"].queues[1], Home::Arriving { slot: arriving, from: at("a", 1) });
        assert_eq!(b1.topics["t"].queues[0], Home::Group(at("a", 0)));
        assert_eq!(Metadata::decode(&b1.encode()).unwrap(), b1);

        t.moves.get_mut(&1).unwrap().frozen = true;
        let (a2, b2) = (a1.with_placement(&view(&t), "a"), b1.with_placement(&view(&t), "b"));
        let leaving = here(&a1.topics["t"].queues[1]);
        assert_eq!(a2.topics["t"].queues[1], Home::Leaving { slot: leaving, to: at("b", 0) });
        assert_eq!((a2.slots_on(1).len(), b2.slots_on(0).len()), (1, 1), "both store it");
        assert_eq!(Metadata::decode(&a2.encode()).unwrap(), a2);

        t.moves.clear();
        t.queues[1] = at("b", 0);
        let (a3, b3) = (a2.with_placement(&view(&t), "a"), b2.with_placement(&view(&t), "b"));
        assert_eq!(b3.topics["t"].queues[1], Home::Here(arriving), "the copy is the queue now");
        assert_eq!(a3.topics["t"].queues[1], Home::Group(at("b", 0)));
        assert!(a3.slots_on(1).is_empty(), "the source's copy goes");
        assert_eq!(b3.next_storage_id, b1.next_storage_id, "no new storage at the switch");
    }

    #[test]
    fn topic_names_are_checked() {
        assert!(valid_topic_name("orders.eu-1_x"));
        assert!(!valid_topic_name(""));
        assert!(!valid_topic_name("a b"));
        assert!(!valid_topic_name(&"x".repeat(201)));
        assert!(valid_topic_name("%RETRY%billing") && valid_topic_name("%DLQ%billing"));
        assert!(!valid_topic_name("%RETRY%") && !valid_topic_name("%OTHER%x") && !valid_topic_name("%DLQ%a b"));
        assert!(valid_topic_name("%TRACE") && !valid_topic_name("%TRACE2"));
    }

    proptest::proptest! {
        /// A damaged metadata file is refused, never a panic.
        #[test]
        fn no_file_makes_metadata_decode_panic(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..512)) {
            let _ = Metadata::decode(&bytes);
        }
    }
}
