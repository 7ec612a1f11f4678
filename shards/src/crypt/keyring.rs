//! Data keys by id. A keyring is read from text, one key per line:
//! `ID HEX` (a u32 id and 64 hex digits, 32 bytes), `#` comments. The key
//! with the highest id seals new batches; every key opens what it sealed.

use aes_gcm::aead::{AeadInPlace, KeyInit};
use aes_gcm::{Aes256Gcm, Nonce};
use std::collections::BTreeMap;

/// Bytes of a data key.
pub const KEY_BYTES: usize = 32;
/// Most keys a keyring holds.
pub const KEYS_MAX: usize = 1024;

/// The data keys of a shard (the broker's keys; each shard seals with its
/// own copy, `for_shard`).
#[derive(Clone)]
pub struct Keyring {
    keys: BTreeMap<u32, Aes256Gcm>,
    /// Every nonce a shard seals with starts with these bytes (drawn at
    /// start, then told apart per shard: shards' log positions overlap), then
    /// the batch's log position: a position is never written twice in a
    /// shard's life, and a process started again draws other bytes.
    nonce_prefix: [u8; 4],
}

impl std::fmt::Debug for Keyring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keyring").field("ids", &self.ids()).finish()
    }
}

/// A keyring's text that is not one; the line and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyringError {
    #[error("line {0}: expected `ID HEX`")]
    Line(usize),
    #[error("line {0}: key id {1:?} is not a number")]
    Id(usize, String),
    #[error("line {0}: a key is {hex} hex digits", hex = 2 * KEY_BYTES)]
    Key(usize),
    #[error("line {0}: key {1} is given twice")]
    Twice(usize, u32),
    #[error("no key: give one line `ID HEX` (64 hex digits, e.g. from `openssl rand -hex 32`)")]
    Empty,
    #[error("{0} keys; at most {KEYS_MAX}")]
    TooMany(usize),
}

/// The one nonce no batch uses (its prefix is never drawn): the key check's.
const CHECK_NONCE: [u8; 12] = [0xff; 12];
const CHECK_PLAINTEXT: &[u8; 16] = b"ringmq key check";

impl Keyring {
    /// Parses a keyring's text; an error names the line and what is wrong.
    pub fn parse(text: &str) -> Result<Keyring, KeyringError> {
        let mut keys = BTreeMap::new();
        for (n, line) in text.lines().enumerate().map(|(n, l)| (n + 1, l.trim())) {
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (id, hex) = line.split_once(char::is_whitespace).ok_or(KeyringError::Line(n))?;
            let id: u32 = id.parse().map_err(|_| KeyringError::Id(n, id.to_string()))?;
            let bytes = decode_hex(hex.trim()).ok_or(KeyringError::Key(n))?;
            let cipher = Aes256Gcm::new_from_slice(&bytes).expect("32 bytes");
            if keys.insert(id, cipher).is_some() {
                return Err(KeyringError::Twice(n, id));
            }
        }
        if keys.is_empty() {
            return Err(KeyringError::Empty);
        }
        if keys.len() > KEYS_MAX {
            return Err(KeyringError::TooMany(keys.len()));
        }
        Ok(Keyring { keys, nonce_prefix: nonce_prefix() })
    }

    /// The keyring shard `index` of this process seals with: the same keys,
    /// a nonce prefix no other shard of the process has (the drawn one
    /// plus the index, never the key check's all-ones).
    pub fn for_shard(&self, index: u32) -> Keyring {
        let drawn = u64::from(u32::from_be_bytes(self.nonce_prefix));
        let prefix = ((drawn + u64::from(index)) % u64::from(u32::MAX)) as u32;
        Keyring { keys: self.keys.clone(), nonce_prefix: prefix.to_be_bytes() }
    }

    /// Every key id, oldest first.
    pub fn ids(&self) -> Vec<u32> {
        self.keys.keys().copied().collect()
    }

    /// The key new batches are sealed with: the highest id.
    pub(crate) fn active(&self) -> (u32, &Aes256Gcm) {
        let (id, key) = self.keys.last_key_value().expect("a keyring has a key");
        (*id, key)
    }

    pub(crate) fn key(&self, id: u32) -> Option<&Aes256Gcm> {
        self.keys.get(&id)
    }

    pub(crate) fn nonce_prefix(&self) -> [u8; 4] {
        self.nonce_prefix
    }

    /// A value that tells whether key `id` is the one a data directory's
    /// batches were sealed with, without telling the key: a sealing of a
    /// fixed text under the one nonce no batch uses.
    pub fn check_value(&self, id: u32) -> Option<String> {
        let mut buf = *CHECK_PLAINTEXT;
        let tag = self.key(id)?.encrypt_in_place_detached(Nonce::from_slice(&CHECK_NONCE), b"", &mut buf).ok()?;
        Some(buf.iter().chain(tag.iter()).map(|b| format!("{b:02x}")).collect())
    }
}

fn nonce_prefix() -> [u8; 4] {
    loop {
        let mut prefix = [0u8; 4];
        getrandom::getrandom(&mut prefix).expect("the operating system's random source");
        if prefix != [0xff; 4] {
            return prefix;
        }
    }
}

fn decode_hex(hex: &str) -> Option<[u8; KEY_BYTES]> {
    if hex.len() != 2 * KEY_BYTES || !hex.is_ascii() {
        return None;
    }
    let mut key = [0u8; KEY_BYTES];
    for (i, byte) in key.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY_A: &str = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

    #[test]
    fn each_shard_seals_under_its_own_nonce_prefix() {
        let ring = Keyring::parse(&format!("1 {}", "ab".repeat(32))).unwrap();
        let prefixes: std::collections::HashSet<[u8; 4]> = (0..64).map(|i| ring.for_shard(i).nonce_prefix()).collect();
        assert_eq!(prefixes.len(), 64);
        assert!(!prefixes.contains(&[0xff; 4]), "never the key check's nonce");
        let mut max = ring.clone();
        max.nonce_prefix = [0xff, 0xff, 0xff, 0xfe];
        assert_eq!(max.for_shard(1).nonce_prefix(), [0, 0, 0, 0], "wraps past the all-ones prefix");
    }

    #[test]
    fn keys_parse_the_newest_seals_and_bad_lines_are_named() {
        let ring = Keyring::parse(&format!("# rotated monthly\n1 {KEY_A}\n7 {}\n", "ab".repeat(32))).unwrap();
        assert_eq!((ring.ids(), ring.active().0), (vec![1, 7], 7));
        assert_ne!(ring.check_value(1), ring.check_value(7));
        assert_eq!(Keyring::parse(&format!("1 {KEY_A}")).unwrap().check_value(1), ring.check_value(1));
        assert!(Keyring::parse("").unwrap_err().to_string().contains("no key"));
        assert!(Keyring::parse("1 abc").unwrap_err().to_string().contains("line 1"));
        assert!(Keyring::parse(&format!("x {KEY_A}")).unwrap_err().to_string().contains("not a number"));
        assert!(Keyring::parse(&format!("1 {KEY_A}\n1 {KEY_A}")).unwrap_err().to_string().contains("twice"));
    }
}
