//! Records inside a ringmq batch (little-endian):
//!
//! ```text
//! u32 length            bytes of the record after this field
//! i32 timestamp_delta   milliseconds after (or before) the batch's first timestamp
//! [u8; 16] message_id   made by the client
//! u16 key_len,  key     key_len 0xFFFF: no key (null), so a key holds at most 65,534 bytes
//! u16 tag_len,  tag
//! u32 value_len, value  value_len 0xFFFF_FFFF: no value (null, a tombstone)
//! u16 header_count, then per header: u16 name_len, name, u32 value_len, value
//!                       (value_len 0xFFFF_FFFF: a null header value)
//! ```
//!
//! Null and empty are distinct everywhere a Kafka record distinguishes them.
//! Batches written before nulls existed read the same: their lengths never
//! reached the markers (a key was never longer than 65,534 bytes, nor a value
//! 4 GiB). The timestamp delta was unsigned before; a delta past 24 days in
//! one old batch reads as negative.
//!
//! A Kafka batch stored as the producer sent it ([`crate::kafka`]) yields the
//! same [`Record`]s: its headers keep their own encoding ([`Headers`]).

use crate::batch::{u16_at, u32_at};
use crate::error::{FormatError, Result};
use crate::kafka;

/// The key length that marks a null key.
const NULL_KEY: u16 = u16::MAX;
/// The value length that marks a null value (record or header).
const NULL_VALUE: u32 = u32::MAX;
/// The longest key a ringmq record holds (longer is refused by the producer).
pub const KEY_BYTES_MAX: usize = NULL_KEY as usize - 1;
/// The longest tag or header name a ringmq record holds.
pub const NAME_BYTES_MAX: usize = u16::MAX as usize;
/// The most headers a ringmq record holds.
pub const HEADERS_MAX: usize = u16::MAX as usize;

/// One message, borrowed from a batch or from the producer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Record<'a> {
    /// Milliseconds after the batch's first timestamp (negative: before it).
    pub timestamp_delta_ms: i64,
    pub message_id: [u8; 16],
    /// None: no key (Kafka's null key), distinct from an empty one.
    pub key: Option<&'a [u8]>,
    pub tag: &'a [u8],
    /// None: no value (a tombstone), distinct from an empty one.
    pub value: Option<&'a [u8]>,
    /// Encoded headers: use [`Headers::iter`] to walk them.
    pub headers: Headers<'a>,
}

/// How a record's headers are encoded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum Encoding {
    /// ringmq's: u16 name length, name, u32 value length, value.
    #[default]
    Ringmq,
    /// Kafka's: varint lengths (-1: a null value).
    Kafka,
}

/// Headers of a record: encoded pairs in the order sent (a name may repeat),
/// iterated without allocation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Headers<'a> {
    count: u32,
    bytes: &'a [u8],
    encoding: Encoding,
}

/// A header: its name and its value (None: null).
pub type Header<'a> = (&'a [u8], Option<&'a [u8]>);

impl<'a> Headers<'a> {
    /// Number of headers.
    pub fn len(&self) -> usize {
        self.count as usize
    }

    /// True without headers.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Iterates (name, value) pairs in order.
    pub fn iter(&self) -> impl Iterator<Item = Header<'a>> {
        let mut rest = self.bytes;
        let encoding = self.encoding;
        (0..self.count).map(move |_| {
            let (header, r) = match encoding {
                Encoding::Ringmq => take_header(rest),
                Encoding::Kafka => kafka::take_header(rest),
            }
            .expect("checked at decode");
            rest = r;
            header
        })
    }

    /// The value of the first header named `name` (a null value reads empty).
    pub fn get(&self, name: &[u8]) -> Option<&'a [u8]> {
        self.iter().find(|(n, _)| *n == name).map(|(_, v)| v.unwrap_or_default())
    }

    /// Encodes pairs for [`Headers::from_encoded`].
    pub fn encode(pairs: &[Header<'_>], out: &mut Vec<u8>) {
        for (name, value) in pairs {
            out.extend_from_slice(&(name.len() as u16).to_le_bytes());
            out.extend_from_slice(name);
            put_value(*value, out);
        }
    }

    /// Headers over `count` pairs made by [`Headers::encode`].
    pub fn from_encoded(count: u16, bytes: &'a [u8]) -> Self {
        Headers { count: u32::from(count), bytes, encoding: Encoding::Ringmq }
    }

    /// Headers over `count` pairs in Kafka's encoding, checked by the caller.
    pub(crate) fn kafka(count: u32, bytes: &'a [u8]) -> Self {
        Headers { count, bytes, encoding: Encoding::Kafka }
    }
}

impl<'a> Record<'a> {
    /// Appends the record to `out` in ringmq's encoding. A native producer
    /// keeps keys, tags, names and counts within the limits above; only a
    /// Kafka record re-encoded for a native reader (a lookup's or a tag
    /// filter's repack) can pass them, and is then cut to them (its key to
    /// [`KEY_BYTES_MAX`], header names to [`NAME_BYTES_MAX`], its first
    /// [`HEADERS_MAX`] headers) rather than break the encoding. A timestamp
    /// delta past i32 (24 days) is held at its bound.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let key = self.key.map(|k| &k[..k.len().min(KEY_BYTES_MAX)]);
        let (count, headers): (u16, std::borrow::Cow<'_, [u8]>) = match self.headers.encoding {
            Encoding::Ringmq => (self.headers.count as u16, self.headers.bytes.into()),
            Encoding::Kafka => {
                let cut = |(n, v): Header<'a>| (&n[..n.len().min(NAME_BYTES_MAX)], v);
                let pairs: Vec<Header<'_>> = self.headers.iter().take(HEADERS_MAX).map(cut).collect();
                let mut encoded = Vec::new();
                Headers::encode(&pairs, &mut encoded);
                (pairs.len() as u16, encoded.into())
            }
        };
        let body = 4
            + 16
            + 2
            + key.map_or(0, <[u8]>::len)
            + 2
            + self.tag.len()
            + 4
            + self.value.map_or(0, <[u8]>::len)
            + 2
            + headers.len();
        out.reserve(4 + body);
        out.extend_from_slice(&(body as u32).to_le_bytes());
        let delta = self.timestamp_delta_ms.clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32;
        out.extend_from_slice(&delta.to_le_bytes());
        out.extend_from_slice(&self.message_id);
        match key {
            Some(key) => {
                out.extend_from_slice(&(key.len() as u16).to_le_bytes());
                out.extend_from_slice(key);
            }
            None => out.extend_from_slice(&NULL_KEY.to_le_bytes()),
        }
        out.extend_from_slice(&(self.tag.len() as u16).to_le_bytes());
        out.extend_from_slice(self.tag);
        put_value(self.value, out);
        out.extend_from_slice(&count.to_le_bytes());
        out.extend_from_slice(&headers);
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
        let timestamp_delta_ms = i64::from(u32_at(body, 0) as i32);
        let message_id = body[4..20].try_into().ok()?;
        let (key, rest) = take_key(&body[20..])?;
        let (tag, rest) = take_u16_prefixed(rest)?;
        let (value, rest) = take_value(rest)?;
        if rest.len() < 2 {
            return None;
        }
        let count = u16_at(rest, 0);
        let header_bytes = &rest[2..];
        let mut walk = header_bytes;
        for _ in 0..count {
            walk = take_header(walk)?.1;
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
            headers: Headers::from_encoded(count, header_bytes),
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

/// Iterates the records of a ringmq batch's body (the bytes after the header).
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

fn put_value(value: Option<&[u8]>, out: &mut Vec<u8>) {
    match value {
        Some(v) => {
            out.extend_from_slice(&(v.len() as u32).to_le_bytes());
            out.extend_from_slice(v);
        }
        None => out.extend_from_slice(&NULL_VALUE.to_le_bytes()),
    }
}

fn take_header(b: &[u8]) -> Option<(Header<'_>, &[u8])> {
    let (name, rest) = take_u16_prefixed(b)?;
    let (value, rest) = take_value(rest)?;
    Some(((name, value), rest))
}

fn take_key(b: &[u8]) -> Option<(Option<&[u8]>, &[u8])> {
    if b.get(0..2)? == NULL_KEY.to_le_bytes() {
        return Some((None, &b[2..]));
    }
    let (key, rest) = take_u16_prefixed(b)?;
    Some((Some(key), rest))
}

fn take_value(b: &[u8]) -> Option<(Option<&[u8]>, &[u8])> {
    if b.get(0..4)? == NULL_VALUE.to_le_bytes() {
        return Some((None, &b[4..]));
    }
    let (value, rest) = take_u32_prefixed(b)?;
    Some((Some(value), rest))
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

    fn round_trip(rec: &Record<'_>) -> Vec<u8> {
        let mut out = Vec::new();
        rec.encode(&mut out);
        let back: Vec<_> = RecordIter::new(&out).collect::<Result<_>>().unwrap();
        assert_eq!(back, vec![*rec]);
        out
    }

    #[test]
    fn record_round_trips_with_repeated_and_null_headers() {
        let mut hb = Vec::new();
        let pairs: [Header<'_>; 4] =
            [(b"trace", Some(b"abc")), (b"k", Some(b"")), (b"trace", Some(b"def")), (b"n", None)];
        Headers::encode(&pairs, &mut hb);
        let rec = Record {
            timestamp_delta_ms: -5,
            message_id: [9; 16],
            key: Some(b"key"),
            tag: b"TagA",
            value: Some(b"value"),
            headers: Headers::from_encoded(4, &hb),
        };
        let out = round_trip(&rec);
        let back = RecordIter::new(&out).next().unwrap().unwrap();
        assert_eq!(back.headers.iter().collect::<Vec<_>>(), pairs);
        assert_eq!(back.headers.get(b"trace"), Some(b"abc".as_slice()));
    }

    #[test]
    fn null_and_empty_keys_and_values_stay_distinct() {
        for (key, value) in
            [(None, None), (Some(&b""[..]), Some(&b""[..])), (None, Some(&b"v"[..])), (Some(&b"k"[..]), None)]
        {
            round_trip(&Record { key, value, ..Record::default() });
        }
        let longest = vec![7u8; KEY_BYTES_MAX];
        round_trip(&Record { key: Some(&longest), value: Some(b"v"), ..Record::default() });
    }

    #[test]
    fn a_record_of_the_old_encoding_reads_as_it_was_written() {
        // u32 delta 5, id, key "k", no tag, value "v", one header "h"="x".
        let mut body = Vec::new();
        body.extend_from_slice(&5u32.to_le_bytes());
        body.extend_from_slice(&[1; 16]);
        body.extend_from_slice(&[1, 0, b'k', 0, 0, 1, 0, 0, 0, b'v', 1, 0, 1, 0, b'h', 1, 0, 0, 0, b'x']);
        let mut out = (body.len() as u32).to_le_bytes().to_vec();
        out.extend_from_slice(&body);
        let r = RecordIter::new(&out).next().unwrap().unwrap();
        assert_eq!((r.timestamp_delta_ms, r.key, r.value), (5, Some(&b"k"[..]), Some(&b"v"[..])));
        assert_eq!(r.headers.iter().collect::<Vec<_>>(), vec![(&b"h"[..], Some(&b"x"[..]))]);
    }

    #[test]
    fn truncated_record_is_malformed() {
        let mut out = Vec::new();
        Record { value: Some(b"value"), ..Record::default() }.encode(&mut out);
        out.truncate(out.len() - 2);
        assert!(RecordIter::new(&out).next().unwrap().is_err());
    }
}
