//! A sealed batch: a stored batch whose records (and the producer's CRC)
//! are encrypted, laid out as
//!
//! ```text
//!  0 header         as any batch; length: the sealed length; crc: CRC32 of
//!                   the sealed bytes [24, length); attributes: ATTR_SEALED
//! 40 u32 key_id     the key that sealed it
//! 44 [u8; 12] nonce the process's nonce prefix, then the batch's log position
//! 56 ciphertext     of the records, then of the producer's u32 crc
//!    [u8; 16] tag   AES-256-GCM's, over the ciphertext and the header's
//!                   [24, 44) (magic, attributes, count, timestamp, key id)
//! ```
//!
//! so the log's framing (lengths, both CRCs) checks without a key, and
//! recovery finds a torn tail exactly as in clear. Opening gives back the
//! producer's batch, stamped with the stored base offset and queue.

use super::keyring::Keyring;
use crate::batch::{self, BatchHeader, ATTR_SEALED, HEADER_BYTES};
use aes_gcm::aead::AeadInPlace;
use aes_gcm::{Nonce, Tag};

/// Bytes a seal adds to a batch: key id, nonce, the producer's crc, tag.
pub const SEAL_OVERHEAD: usize = 4 + 12 + 4 + 16;
const KEY_ID_AT: usize = HEADER_BYTES;
const NONCE_AT: usize = HEADER_BYTES + 4;
const CIPHERTEXT_AT: usize = HEADER_BYTES + 16;
const TAG_BYTES: usize = 16;
/// Bytes of the header the tag covers (with the key id): [24, 44).
const AAD: std::ops::Range<usize> = 24..CIPHERTEXT_AT - 12;

/// Why a sealed batch did not open.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OpenError {
    #[error("the batch is sealed with key {0}, which the keyring does not hold")]
    UnknownKey(u32),
    #[error("the batch does not open with key {0}: another key has that id, or the batch was altered")]
    BadTag(u32),
    #[error("a sealed batch too short for its seal")]
    Short,
    #[error("the opened batch fails its producer's CRC")]
    Crc,
}

/// The stored length of a producer's batch of `len` bytes.
pub fn sealed_len(len: usize) -> usize {
    len + SEAL_OVERHEAD
}

/// True for a sealed batch.
pub fn is_sealed(stored: &[u8]) -> bool {
    BatchHeader::decode(stored).is_some_and(|h| h.attributes & ATTR_SEALED != 0)
}

/// Seals a checked producer's batch `plain` into `out` (exactly
/// `sealed_len(plain.len())` bytes, the batch's slot in its round) under the
/// keyring's newest key; `position` is its log position. Stamp it after.
pub fn seal_into(keyring: &Keyring, plain: &[u8], position: u64, out: &mut [u8]) {
    assert_eq!(out.len(), sealed_len(plain.len()), "a sealed batch's slot");
    let body = plain.len() - HEADER_BYTES;
    let (id, key) = keyring.active();
    out[..HEADER_BYTES].copy_from_slice(&plain[..HEADER_BYTES]);
    let stored_len = out.len() as u32;
    out[0..4].copy_from_slice(&stored_len.to_le_bytes());
    let attributes = batch::u16_at(plain, 26) | ATTR_SEALED;
    out[26..28].copy_from_slice(&attributes.to_le_bytes());
    out[KEY_ID_AT..NONCE_AT].copy_from_slice(&id.to_le_bytes());
    let mut nonce = [0u8; 12];
    nonce[..4].copy_from_slice(&keyring.nonce_prefix());
    nonce[4..].copy_from_slice(&position.to_le_bytes());
    out[NONCE_AT..CIPHERTEXT_AT].copy_from_slice(&nonce);
    let text_end = CIPHERTEXT_AT + body + 4;
    out[CIPHERTEXT_AT..CIPHERTEXT_AT + body].copy_from_slice(&plain[HEADER_BYTES..]);
    out[CIPHERTEXT_AT + body..text_end].copy_from_slice(&plain[4..8]);
    let (aad, rest) = out.split_at_mut(CIPHERTEXT_AT);
    let tag = key
        .encrypt_in_place_detached(Nonce::from_slice(&nonce), &aad[AAD], &mut rest[..body + 4])
        .expect("AES-GCM seals any batch the limits allow");
    out[text_end..].copy_from_slice(&tag);
    let crc = crc32fast::hash(&out[24..]);
    out[4..8].copy_from_slice(&crc.to_le_bytes());
}

/// Opens a stored sealed batch (its framing already verified): the
/// producer's batch, stamped with the stored base offset and queue.
pub fn open(keyring: &Keyring, stored: &[u8]) -> Result<Vec<u8>, OpenError> {
    if stored.len() < HEADER_BYTES + SEAL_OVERHEAD {
        return Err(OpenError::Short);
    }
    let id = batch::u32_at(stored, KEY_ID_AT);
    let key = keyring.key(id).ok_or(OpenError::UnknownKey(id))?;
    let tag_at = stored.len() - TAG_BYTES;
    let mut text = stored[CIPHERTEXT_AT..tag_at].to_vec();
    let nonce = Nonce::from_slice(&stored[NONCE_AT..CIPHERTEXT_AT]);
    key.decrypt_in_place_detached(nonce, &stored[AAD], &mut text, Tag::from_slice(&stored[tag_at..]))
        .map_err(|_| OpenError::BadTag(id))?;
    let body = text.len() - 4;
    let mut plain = Vec::with_capacity(HEADER_BYTES + body);
    plain.extend_from_slice(&stored[..HEADER_BYTES]);
    plain.extend_from_slice(&text[..body]);
    let plain_len = plain.len() as u32;
    plain[0..4].copy_from_slice(&plain_len.to_le_bytes());
    plain[4..8].copy_from_slice(&text[body..]);
    let attributes = batch::u16_at(stored, 26) & !ATTR_SEALED;
    plain[26..28].copy_from_slice(&attributes.to_le_bytes());
    if crc32fast::hash(&plain[24..]) != batch::u32_at(&plain, 4) {
        return Err(OpenError::Crc);
    }
    let (base_offset, queue) = (batch::u64_at(stored, 8), batch::u32_at(stored, 16));
    batch::stamp(&mut plain, base_offset, queue);
    Ok(plain)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::{check, stamp, verify_stored, BatchBuilder};
    use crate::record::Record;

    fn keyring(lines: &str) -> Keyring {
        Keyring::parse(lines).unwrap()
    }

    fn sealed(ring: &Keyring, plain: &[u8]) -> Vec<u8> {
        let mut out = vec![0u8; sealed_len(plain.len())];
        seal_into(ring, plain, 4096, &mut out);
        stamp(&mut out, 42, 7);
        out
    }

    #[test]
    fn a_sealed_batch_keeps_no_payload_in_clear_and_opens_to_the_stamped_original() {
        let ring = keyring(&format!("3 {}", "11".repeat(32)));
        let mut b = BatchBuilder::new(1_000);
        b.push(&Record { value: Some(b"SECRET-VALUE"), key: Some(b"SECRET-KEY"), tag: b"TagA", ..Record::default() });
        let plain = b.finish();
        check(&plain, crate::ShardConfig::new("").limits()).unwrap();
        let stored = sealed(&ring, &plain);
        assert!(is_sealed(&stored));
        assert!(!stored.windows(6).any(|w| w == b"SECRET"), "no payload in clear");
        verify_stored(&stored).expect("the log's framing checks without a key");
        let opened = open(&ring, &stored).unwrap();
        let mut expected = plain.clone();
        stamp(&mut expected, 42, 7);
        assert_eq!(opened, expected);
        check(&opened, crate::ShardConfig::new("").limits()).expect("the producer's CRC holds");
    }

    proptest::proptest! {
        /// Whatever bytes a sealed batch's slot holds, opening answers Ok or Err.
        #[test]
        fn no_stored_bytes_make_opening_panic(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..200)) {
            let ring = keyring(&format!("1 {}", "11".repeat(32)));
            let _ = open(&ring, &bytes);
        }
    }

    #[test]
    fn a_wrong_key_a_missing_key_and_an_altered_byte_do_not_open() {
        let ring = keyring(&format!("1 {}", "11".repeat(32)));
        let mut b = BatchBuilder::new(0);
        b.push(&Record { value: Some(b"v"), ..Record::default() });
        let stored = sealed(&ring, &b.finish());
        assert_eq!(open(&keyring(&format!("1 {}", "22".repeat(32))), &stored), Err(OpenError::BadTag(1)));
        assert_eq!(open(&keyring(&format!("2 {}", "11".repeat(32))), &stored), Err(OpenError::UnknownKey(1)));
        let mut altered = stored.clone();
        altered[60] ^= 1;
        assert_eq!(open(&ring, &altered), Err(OpenError::BadTag(1)));
        let rotated = keyring(&format!("1 {}\n2 {}", "11".repeat(32), "22".repeat(32)));
        assert!(open(&rotated, &stored).is_ok(), "a rotated keyring opens batches of the old key");
        assert_eq!(rotated.active().0, 2, "and seals with the new one");
    }
}
