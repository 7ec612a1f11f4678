//! Records inside a batch (little-endian):
//!
//! ```text
//! u32 length            bytes of the record after this field
//! u32 timestamp_delta   milliseconds after the batch's first timestamp
//! [u8; 16] message_id   made by the client
//! u16 key_len,  key
//! u16 tag_len,  tag
//! u32 value_len, value
//! u16 header_count, then per header: u16 name_len, name, u32 value_len, value
//! ```

use crate::batch::{u16_at, u32_at};
use crate::error::{FormatError, Result};

/// One message, borrowed from a batch or from the producer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Record<'a> {
    pub timestamp_delta_ms: u32,
    pub message_id: [u8; 16],
    pub key: &'a [u8],
    pub tag: &'a [u8],
    pub value: &'a [u8],
    /// Encoded headers: use [`Record::headers`] to iterate them.
    pub headers: Headers<'a>,
}

/// Headers of a record: encoded pairs, iterated without allocation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Headers<'a> {
    count: u16,
    bytes: &'a [u8],
}

impl<'a> Headers<'a> {
    /// Number of headers.
    pub fn len(&self) -> usize {
        usize::from(self.count)
    }

    /// True without headers.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Iterates (name, value) pairs.
    pub fn iter(&self) -> impl Iterator<Item = (&'a [u8], &'a [u8])> {
        let mut rest = self.bytes;
        (0..self.count).map(move |_| {
            let (name, r) = take_u16_prefixed(rest).expect("checked at decode");
            let (value, r) = take_u32_prefixed(r).expect("checked at decode");
            rest = r;
            (name, value)
        })
    }

    /// The value of the first header named `name`.
    pub fn get(&self, name: &[u8]) -> Option<&'a [u8]> {
        self.iter().find(|(n, _)| *n == name).map(|(_, v)| v)
    }

    /// Encodes pairs for [`Record::headers`].
    pub fn encode(pairs: &[(&[u8], &[u8])], out: &mut Vec<u8>) {
        for (name, value) in pairs {
            out.extend_from_slice(&(name.len() as u16).to_le_bytes());
            out.extend_from_slice(name);
            out.extend_from_slice(&(value.len() as u32).to_le_bytes());
            out.extend_from_slice(value);
        }
    }

    /// Headers over bytes made by [`Headers::encode`].
    pub fn from_encoded(count: u16, bytes: &'a [u8]) -> Self {
        Headers { count, bytes }
    }
}

impl<'a> Record<'a> {
    /// Appends the encoded record to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let body =
            4 + 16 + 2 + self.key.len() + 2 + self.tag.len() + 4 + self.value.len() + 2 + self.headers.bytes.len();
        out.reserve(4 + body);
        out.extend_from_slice(&(body as u32).to_le_bytes());
        out.extend_from_slice(&self.timestamp_delta_ms.to_le_bytes());
        out.extend_from_slice(&self.message_id);
        out.extend_from_slice(&(self.key.len() as u16).to_le_bytes());
        out.extend_from_slice(self.key);
        out.extend_from_slice(&(self.tag.len() as u16).to_le_bytes());
        out.extend_from_slice(self.tag);
        out.extend_from_slice(&(self.value.len() as u32).to_le_bytes());
        out.extend_from_slice(self.value);
        out.extend_from_slice(&self.headers.count.to_le_bytes());
        out.extend_from_slice(self.headers.bytes);
    }

    /// Hash of the tag stored in the queue index (0 = no tag), for tag filtering
    /// without reading the log.
    pub fn tag_hash(&self) -> u32 {
        tag_hash(self.tag)
    }

    fn decode(body: &'a [u8]) -> Option<Record<'a>> {
        if body.len() < 20 {
            return None;
        }
        let timestamp_delta_ms = u32_at(body, 0);
        let message_id = body[4..20].try_into().ok()?;
        let (key, rest) = take_u16_prefixed(&body[20..])?;
        let (tag, rest) = take_u16_prefixed(rest)?;
        let (value, rest) = take_u32_prefixed(rest)?;
        if rest.len() < 2 {
            return None;
        }
        let count = u16_at(rest, 0);
        let header_bytes = &rest[2..];
        let mut walk = header_bytes;
        for _ in 0..count {
            let (_, r) = take_u16_prefixed(walk)?;
            let (_, r) = take_u32_prefixed(r)?;
            walk = r;
        }
        if !walk.is_empty() {
            return None;
        }
        Some(Record {
            timestamp_delta_ms,
            message_id,
            key,
            tag,
            value,
            headers: Headers { count, bytes: header_bytes },
        })
    }
}

/// FNV-1a hash of a tag; the empty tag hashes to 0.
pub fn tag_hash(tag: &[u8]) -> u32 {
    if tag.is_empty() {
        return 0;
    }
    let h = tag.iter().fold(0x811c_9dc5u32, |h, b| (h ^ u32::from(*b)).wrapping_mul(0x0100_0193));
    h.max(1)
}

/// Iterates the records of a batch body (the bytes after the header).
pub struct RecordIter<'a> {
    rest: &'a [u8],
}

impl<'a> RecordIter<'a> {
    /// Iterates the records in `body`.
    pub fn new(body: &'a [u8]) -> Self {
        RecordIter { rest: body }
    }
}

impl<'a> Iterator for RecordIter<'a> {
    type Item = Result<Record<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        let Some((body, rest)) = take_u32_prefixed(self.rest) else {
            self.rest = &[];
            return Some(Err(FormatError::Malformed("record length runs past the batch end")));
        };
        self.rest = rest;
        match Record::decode(body) {
            Some(r) => Some(Ok(r)),
            None => {
                self.rest = &[];
                Some(Err(FormatError::Malformed("record fields do not add up to the record length")))
            }
        }
    }
}

fn take_u16_prefixed(b: &[u8]) -> Option<(&[u8], &[u8])> {
    let len = usize::from(u16::from_le_bytes(b.get(0..2)?.try_into().ok()?));
    let rest = &b[2..];
    (rest.len() >= len).then(|| rest.split_at(len))
}

fn take_u32_prefixed(b: &[u8]) -> Option<(&[u8], &[u8])> {
    let len = u32::from_le_bytes(b.get(0..4)?.try_into().ok()?) as usize;
    let rest = &b[4..];
    (rest.len() >= len).then(|| rest.split_at(len))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_round_trips_with_headers() {
        let mut hb = Vec::new();
        Headers::encode(&[(b"trace".as_slice(), b"abc".as_slice()), (b"k", b"")], &mut hb);
        let rec = Record {
            timestamp_delta_ms: 5,
            message_id: [9; 16],
            key: b"key",
            tag: b"TagA",
            value: b"value",
            headers: Headers::from_encoded(2, &hb),
        };
        let mut out = Vec::new();
        rec.encode(&mut out);
        let back: Vec<_> = RecordIter::new(&out).collect::<Result<_>>().unwrap();
        assert_eq!(back, vec![rec]);
        let pairs: Vec<_> = back[0].headers.iter().collect();
        assert_eq!(pairs, vec![(b"trace".as_slice(), b"abc".as_slice()), (b"k".as_slice(), b"".as_slice())]);
    }

    #[test]
    fn truncated_record_is_malformed() {
        let mut out = Vec::new();
        Record { value: b"value", ..Record::default() }.encode(&mut out);
        out.truncate(out.len() - 2);
        assert!(RecordIter::new(&out).next().unwrap().is_err());
    }
}
