//! Message IDs made by the client: 16 bytes, unique across hosts, processes
//! and restarts, and sortable by time: 48 bits of Unix milliseconds, 32 random
//! bits chosen once per generator, 48 bits of a per-generator counter.

use std::sync::atomic::{AtomicU64, Ordering};

/// A message ID.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct MessageId(pub [u8; 16]);

impl std::fmt::Display for MessageId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.iter().try_for_each(|b| write!(f, "{b:02x}"))
    }
}

/// Text that is not a message id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("message id {0:?}: expected 32 hex digits")]
pub struct BadMessageId(pub String);

impl std::str::FromStr for MessageId {
    type Err = BadMessageId;

    /// Parses the 32 hex digits `Display` writes.
    fn from_str(s: &str) -> Result<Self, BadMessageId> {
        let bad = || BadMessageId(s.to_string());
        if s.len() != 32 || !s.is_ascii() {
            return Err(bad());
        }
        let mut id = [0u8; 16];
        for (i, b) in id.iter_mut().enumerate() {
            *b = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).map_err(|_| bad())?;
        }
        Ok(MessageId(id))
    }
}

/// Makes strictly increasing IDs for one producer.
pub struct MessageIdGenerator {
    node: [u8; 4],
    /// Keeps IDs of one generator distinct within a millisecond.
    counter: AtomicU64,
    last_ms: AtomicU64,
}

impl MessageIdGenerator {
    /// A generator with fresh random node bits.
    pub fn new() -> Self {
        MessageIdGenerator { node: random_node(), counter: AtomicU64::new(0), last_ms: AtomicU64::new(0) }
    }

    /// The next ID.
    pub fn next_id(&self) -> MessageId {
        let now = ringmq_protocol::time::unix_ms();
        // Never go back in time within a generator, even if the wall clock does.
        let ms = self.last_ms.fetch_max(now, Ordering::Relaxed).max(now);
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let mut id = [0u8; 16];
        id[0..6].copy_from_slice(&ms.to_be_bytes()[2..8]);
        id[6..10].copy_from_slice(&self.node);
        id[10..16].copy_from_slice(&n.to_be_bytes()[2..8]);
        MessageId(id)
    }
}

impl Default for MessageIdGenerator {
    fn default() -> Self {
        Self::new()
    }
}

fn random_node() -> [u8; 4] {
    let mut node = [0u8; 4];
    if let Ok(bytes) = std::fs::read("/proc/sys/kernel/random/uuid") {
        let h = crc32fast::hash(&bytes) ^ std::process::id().rotate_left(16);
        node = h.to_be_bytes();
    }
    node
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_strictly_increasing_and_differ_between_generators() {
        let g = MessageIdGenerator::new();
        let ids: Vec<MessageId> = (0..1000).map(|_| g.next_id()).collect();
        assert!(ids.windows(2).all(|w| w[0] < w[1]));
        let other = MessageIdGenerator::new().next_id();
        assert_ne!(&other.0[6..10], &ids[0].0[6..10], "node bits differ between generators");
    }

    proptest::proptest! {
        /// Any text given to `message get --id` parses or is refused, and an id round-trips.
        #[test]
        fn no_text_makes_the_id_parser_panic(s in "\\PC{0,40}", hex in "[0-9a-f]{32}") {
            let _ = s.parse::<MessageId>();
            let id: MessageId = hex.parse().unwrap();
            proptest::prop_assert_eq!(id.to_string(), hex);
        }
    }
}
