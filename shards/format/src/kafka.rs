//! Kafka record batches (magic 2), stored as the producer sent them.
//!
//! A ringmq batch with [`crate::batch::ATTR_KAFKA`] holds, after its header:
//!
//! ```text
//! [u8; 16] first_id   the message id of the batch's first record; record i's
//!                     is it with i added to its last four bytes (big-endian),
//!                     or all zero: the records carry no ids
//! Kafka RecordBatch   as the producer sent it, compressed or not (big-endian):
//!    0 i64 baseOffset            (rewritten when served, outside the CRC)
//!    8 i32 batchLength           bytes after this field
//!   12 i32 partitionLeaderEpoch  (rewritten when served, outside the CRC)
//!   16 i8  magic = 2
//!   17 u32 crc                   CRC-32C of bytes [21, end)
//!   21 i16 attributes            bits 0-2 compression, 3 LogAppendTime,
//!                                4 transactional, 5 control
//!   23 i32 lastOffsetDelta
//!   27 i64 baseTimestamp
//!   35 i64 maxTimestamp
//!   43 i64 producerId
//!   51 i16 producerEpoch
//!   55 i32 baseSequence
//!   57 i32 recordsCount
//!   61 records (compressed as a whole): varint length, i8 attributes,
//!      varlong timestampDelta, varint offsetDelta, varint key length (-1:
//!      null) and key, varint value length (-1: null) and value, varint
//!      header count, each: varint name length and name, varint value
//!      length (-1: null) and value
//! ```
//!
//! The records are read (inflated into a caller's buffer when compressed) by
//! whoever needs them: the shard's check and index, native consumers, tag
//! filters and lookups. A Kafka consumer gets the batch's own bytes.

use crate::compression::{inflate, Compression, InflateError};
use crate::error::{FormatError, Result};
use crate::record::{Header, Headers, Record};

/// Bytes of a Kafka batch's header, before its records.
pub const BATCH_HEADER_BYTES: usize = 61;
/// Bytes before the Kafka batch in a ringmq batch's body (the first id).
pub const ID_BYTES: usize = 16;
/// Where the bytes the Kafka CRC covers start.
const CRC_FROM: usize = 21;
const ATTR_LOG_APPEND_TIME: i16 = 1 << 3;
const ATTR_TRANSACTIONAL: i16 = 1 << 4;
const ATTR_CONTROL: i16 = 1 << 5;

/// A Kafka record batch whose framing, magic and CRC hold.
#[derive(Debug, Clone, Copy)]
pub struct KafkaBatch<'a> {
    bytes: &'a [u8],
}

impl<'a> KafkaBatch<'a> {
    /// Reads the batch at the start of `bytes`: exactly one batch, magic 2,
    /// its CRC-32C right, a record count that matches its last offset delta.
    pub fn parse(bytes: &'a [u8]) -> Result<KafkaBatch<'a>> {
        let batch = KafkaBatch::stored(bytes)?;
        let computed = crc32c::crc32c(&bytes[CRC_FROM..]);
        if computed != batch.u32_at(17) {
            return Err(FormatError::CrcMismatch { stored: batch.u32_at(17), computed });
        }
        let count = batch.record_count();
        if count < 1 || batch.i32_at(23) != count - 1 {
            return Err(FormatError::Malformed("a Kafka batch's record count must be its last offset delta plus one"));
        }
        Ok(batch)
    }

    /// Reads a stored batch's Kafka batch, which was checked whole (`parse`)
    /// before it was stored and whose bytes a read verified again under the
    /// stored batch's own CRC: its framing and magic only, not its CRC-32C
    /// a second time.
    pub fn stored(bytes: &'a [u8]) -> Result<KafkaBatch<'a>> {
        if bytes.len() < BATCH_HEADER_BYTES {
            return Err(FormatError::Malformed("a Kafka record batch is shorter than its header"));
        }
        let batch = KafkaBatch { bytes };
        let declared = batch.i32_at(8);
        if declared < 0 || declared as usize + 12 != bytes.len() {
            return Err(FormatError::Malformed("a partition's records must be exactly one Kafka record batch"));
        }
        if bytes[16] != 2 {
            return Err(FormatError::Malformed(
                "Kafka records must be a record batch of magic 2 (message sets v0/v1 are not taken)",
            ));
        }
        Ok(batch)
    }

    /// The batch's bytes.
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// The batch's attributes.
    pub fn attributes(&self) -> i16 {
        i16::from_be_bytes([self.bytes[21], self.bytes[22]])
    }

    /// How its records are compressed.
    pub fn compression(&self) -> Result<Compression> {
        Compression::of_attributes(self.attributes()).ok_or(FormatError::Malformed("unknown Kafka compression codec"))
    }

    /// True for a transaction marker (commit or abort).
    pub fn is_control(&self) -> bool {
        self.attributes() & ATTR_CONTROL != 0
    }

    /// True for records of a transaction.
    pub fn is_transactional(&self) -> bool {
        self.attributes() & ATTR_TRANSACTIONAL != 0
    }

    /// Records, at least 1.
    pub fn record_count(&self) -> i32 {
        self.i32_at(57)
    }

    /// The newest of its records' timestamps (the broker's time under LogAppendTime).
    pub fn max_timestamp(&self) -> i64 {
        i64::from_be_bytes(self.bytes[35..43].try_into().expect("8 bytes"))
    }

    /// The timestamp record deltas are relative to.
    pub fn base_timestamp(&self) -> i64 {
        self.i64_at(27)
    }

    /// The producer id (-1: not idempotent).
    pub fn producer_id(&self) -> i64 {
        self.i64_at(43)
    }

    /// The producer's epoch.
    pub fn producer_epoch(&self) -> i16 {
        i16::from_be_bytes([self.bytes[51], self.bytes[52]])
    }

    /// The first record's sequence.
    pub fn base_sequence(&self) -> i32 {
        self.i32_at(53)
    }

    /// The transaction marker a control batch holds (None for any other
    /// batch, or a control record that is not a marker).
    pub fn marker(&self) -> Option<Marker> {
        if !self.is_control() {
            return None;
        }
        let mut scratch = Vec::new();
        let record = self.records([0; 16], 1 << 10, &mut scratch).ok()?.next()?.ok()?;
        let (key, value) = (record.key?, record.value?);
        // Key: version, type (0 abort, 1 commit); value: version, coordinator epoch.
        let kind = i16::from_be_bytes(key.get(2..4)?.try_into().ok()?);
        let coordinator_epoch = i32::from_be_bytes(value.get(2..6)?.try_into().ok()?);
        let (producer_id, producer_epoch) = (self.producer_id(), self.producer_epoch());
        (kind == 0 || kind == 1).then_some(Marker { producer_id, producer_epoch, commit: kind == 1, coordinator_epoch })
    }

    /// The records, inflated into `scratch` when compressed (at most
    /// `inflated_max` bytes); record i gets the message id `first_id` + i.
    pub fn records(&self, first_id: [u8; 16], inflated_max: usize, scratch: &'a mut Vec<u8>) -> Result<RecordIter<'a>> {
        let compression = self.compression()?;
        if compression == Compression::None {
            return self.records_in(first_id, &self.bytes[BATCH_HEADER_BYTES..]);
        }
        inflate(&self.bytes[BATCH_HEADER_BYTES..], compression, inflated_max, scratch).map_err(|e| match e {
            InflateError::TooLarge(max) => FormatError::InflatesTooLarge { max },
            e => FormatError::Inflate(e.to_string()),
        })?;
        self.records_in(first_id, scratch)
    }

    /// Its records from `inflated`, what `records` inflated before (its own
    /// section when it is not compressed).
    pub fn records_inflated(&self, first_id: [u8; 16], inflated: &'a [u8]) -> Result<RecordIter<'a>> {
        match self.compression()? {
            Compression::None => self.records_in(first_id, &self.bytes[BATCH_HEADER_BYTES..]),
            _ => self.records_in(first_id, inflated),
        }
    }

    /// Its records read from `rest`, the records section in clear.
    fn records_in(&self, first_id: [u8; 16], rest: &'a [u8]) -> Result<RecordIter<'a>> {
        // LogAppendTime: every record's time is the batch's max timestamp.
        let base = self.base_timestamp();
        let fixed_delta = match self.attributes() & ATTR_LOG_APPEND_TIME != 0 {
            true => Some(
                self.i64_at(35)
                    .checked_sub(base)
                    .ok_or(FormatError::Malformed("a Kafka batch's timestamps overflow"))?,
            ),
            false => None,
        };
        Ok(RecordIter { rest, index: 0, count: self.record_count(), first_id, fixed_delta, base })
    }

    fn i32_at(&self, at: usize) -> i32 {
        i32::from_be_bytes(self.bytes[at..at + 4].try_into().expect("4 bytes"))
    }

    fn u32_at(&self, at: usize) -> u32 {
        self.i32_at(at) as u32
    }

    fn i64_at(&self, at: usize) -> i64 {
        i64::from_be_bytes(self.bytes[at..at + 8].try_into().expect("8 bytes"))
    }
}

/// The message id of record `i` of a batch whose first record's is `first`.
pub fn nth_id(first: [u8; 16], i: i32) -> [u8; 16] {
    if first == [0; 16] {
        return first;
    }
    let mut id = first;
    let seq = i32::from_be_bytes(first[12..16].try_into().expect("4 bytes")).wrapping_add(i);
    id[12..16].copy_from_slice(&seq.to_be_bytes());
    id
}

/// Iterates a Kafka batch's records as [`Record`]s.
pub struct RecordIter<'a> {
    rest: &'a [u8],
    index: i32,
    count: i32,
    first_id: [u8; 16],
    fixed_delta: Option<i64>,
    /// The batch's base timestamp: a record whose time does not fit past it is malformed.
    base: i64,
}

impl<'a> Iterator for RecordIter<'a> {
    type Item = Result<Record<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.index == self.count {
            if self.rest.is_empty() {
                return None;
            }
            self.rest = &[];
            return Some(Err(FormatError::Malformed("a Kafka batch holds bytes past its last record")));
        }
        let record = self.decode();
        if record.is_none() {
            self.index = self.count;
            self.rest = &[];
        }
        Some(record.ok_or(FormatError::Malformed("a Kafka record does not decode")))
    }
}

impl<'a> RecordIter<'a> {
    fn decode(&mut self) -> Option<Record<'a>> {
        let (len, rest) = varint(self.rest)?;
        let (body, rest) = rest.split_at_checked(usize::try_from(len).ok()?)?;
        self.rest = rest;
        let body = body.get(1..)?; // the record's attributes, unused
        let (delta, body) = varint(body)?;
        self.base.checked_add(delta)?;
        let (offset_delta, body) = varint(body)?;
        if offset_delta != i64::from(self.index) {
            return None;
        }
        let (key, body) = nullable_bytes(body)?;
        let (value, body) = nullable_bytes(body)?;
        let (count, body) = varint(body)?;
        let count = u32::try_from(count).ok()?;
        let mut walk = body;
        for _ in 0..count {
            walk = take_header(walk)?.1;
        }
        if !walk.is_empty() {
            return None;
        }
        let record = Record {
            timestamp_delta_ms: self.fixed_delta.unwrap_or(delta),
            message_id: nth_id(self.first_id, self.index),
            key,
            tag: &[],
            value,
            headers: Headers::kafka(count, body),
        };
        self.index += 1;
        Some(record)
    }
}

/// One Kafka-encoded header and the bytes after it.
pub(crate) fn take_header(b: &[u8]) -> Option<(Header<'_>, &[u8])> {
    let (name, rest) = nullable_bytes(b)?;
    let (value, rest) = nullable_bytes(rest)?;
    Some(((name?, value), rest))
}

/// A varint length and that many bytes (-1: null).
fn nullable_bytes(b: &[u8]) -> Option<(Option<&[u8]>, &[u8])> {
    let (len, rest) = varint(b)?;
    if len == -1 {
        return Some((None, rest));
    }
    let (bytes, rest) = rest.split_at_checked(usize::try_from(len).ok()?)?;
    Some((Some(bytes), rest))
}

/// A zigzag varint (up to 64 bits) and the bytes after it.
fn varint(b: &[u8]) -> Option<(i64, &[u8])> {
    let mut raw = 0u64;
    for (i, byte) in b.iter().enumerate().take(10) {
        raw |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            let value = (raw >> 1) as i64 ^ -((raw & 1) as i64);
            return Some((value, &b[i + 1..]));
        }
    }
    None
}

fn put_varint(value: i64, out: &mut Vec<u8>) {
    let mut raw = ((value << 1) ^ (value >> 63)) as u64;
    while raw >= 0x80 {
        out.push(raw as u8 | 0x80);
        raw >>= 7;
    }
    out.push(raw as u8);
}

fn put_nullable(bytes: Option<&[u8]>, out: &mut Vec<u8>) {
    match bytes {
        Some(b) => {
            put_varint(b.len() as i64, out);
            out.extend_from_slice(b);
        }
        None => put_varint(-1, out),
    }
}

/// Appends records as one uncompressed Kafka batch (no producer, offsets
/// from `base_offset`, timestamps from `base_timestamp`), what a Kafka
/// consumer is served for records stored in ringmq's own encoding.
pub fn encode_batch<'r>(
    out: &mut Vec<u8>,
    base_offset: i64,
    base_timestamp: i64,
    records: impl IntoIterator<Item = (i32, Record<'r>)>,
) {
    encode_with(out, base_offset, base_timestamp, records, Producer::NONE);
}

/// A batch's producer fields and the attributes they go with.
struct Producer {
    id: i64,
    epoch: i16,
    base_sequence: i32,
    attributes: i16,
}

impl Producer {
    const NONE: Producer = Producer { id: -1, epoch: -1, base_sequence: -1, attributes: 0 };
}

/// Appends records compaction keeps of `source`, a run of them from its
/// record `first` on, as one uncompressed batch of the same producer: its
/// id, epoch, timestamp type, transactional and control bits, and base
/// timestamp (the records' deltas are relative to it), the base sequence
/// advanced to the run's first record. The base offset is the shard's to
/// set when served.
pub fn encode_kept<'r>(
    out: &mut Vec<u8>,
    source: &KafkaBatch<'_>,
    first: i32,
    records: impl IntoIterator<Item = Record<'r>>,
) {
    let base_sequence = match source.base_sequence() {
        -1 => -1,
        sequence => sequence.wrapping_add(first),
    };
    let producer = Producer {
        id: source.producer_id(),
        epoch: source.producer_epoch(),
        base_sequence,
        attributes: source.attributes() & (ATTR_LOG_APPEND_TIME | ATTR_TRANSACTIONAL | ATTR_CONTROL),
    };
    let records = records.into_iter().enumerate().map(|(i, r)| (i as i32, r));
    encode_with(out, 0, source.base_timestamp(), records, producer);
}

/// What a transaction marker says: whose transaction ended, and how.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Marker {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub commit: bool,
    /// The epoch of the coordinator that wrote it.
    pub coordinator_epoch: i32,
}

/// Appends a transaction marker as Kafka writes it: a control batch of the
/// producer (transactional, no sequence) holding one record whose key is
/// (version 0, type: 0 abort, 1 commit) and value (version 0, coordinator epoch).
pub fn encode_control(out: &mut Vec<u8>, base_offset: i64, timestamp: i64, marker: Marker) {
    let key = [0, 0, 0, u8::from(marker.commit)];
    let mut value = vec![0, 0];
    value.extend_from_slice(&marker.coordinator_epoch.to_be_bytes());
    let record = Record { key: Some(&key), value: Some(&value), ..Record::default() };
    let producer = Producer {
        id: marker.producer_id,
        epoch: marker.producer_epoch,
        base_sequence: -1,
        attributes: ATTR_TRANSACTIONAL | ATTR_CONTROL,
    };
    encode_with(out, base_offset, timestamp, [(0, record)], producer);
}

fn encode_with<'r>(
    out: &mut Vec<u8>,
    base_offset: i64,
    base_timestamp: i64,
    records: impl IntoIterator<Item = (i32, Record<'r>)>,
    producer: Producer,
) {
    let start = out.len();
    out.resize(start + BATCH_HEADER_BYTES, 0);
    let (mut count, mut last_delta, mut max_timestamp) = (0i32, 0i32, base_timestamp);
    let mut body = Vec::new();
    for (offset_delta, r) in records {
        body.clear();
        body.push(0);
        put_varint(r.timestamp_delta_ms, &mut body);
        put_varint(i64::from(offset_delta), &mut body);
        put_nullable(r.key, &mut body);
        put_nullable(r.value, &mut body);
        put_varint(r.headers.len() as i64, &mut body);
        for (name, value) in r.headers.iter() {
            put_nullable(Some(name), &mut body);
            put_nullable(value, &mut body);
        }
        put_varint(body.len() as i64, out);
        out.extend_from_slice(&body);
        count += 1;
        last_delta = offset_delta;
        max_timestamp = max_timestamp.max(base_timestamp.saturating_add(r.timestamp_delta_ms));
    }
    let h = &mut out[start..];
    let length = (h.len() - 12) as i32;
    h[0..8].copy_from_slice(&base_offset.to_be_bytes());
    h[8..12].copy_from_slice(&length.to_be_bytes());
    h[16] = 2;
    h[21..23].copy_from_slice(&producer.attributes.to_be_bytes());
    h[23..27].copy_from_slice(&last_delta.to_be_bytes());
    h[27..35].copy_from_slice(&base_timestamp.to_be_bytes());
    h[35..43].copy_from_slice(&max_timestamp.to_be_bytes());
    h[43..51].copy_from_slice(&producer.id.to_be_bytes());
    h[51..53].copy_from_slice(&producer.epoch.to_be_bytes());
    h[53..57].copy_from_slice(&producer.base_sequence.to_be_bytes());
    h[57..61].copy_from_slice(&count.to_be_bytes());
    let crc = crc32c::crc32c(&h[CRC_FROM..]);
    h[17..21].copy_from_slice(&crc.to_be_bytes());
}

/// Gives a checked Kafka batch the broker's time (a topic whose
/// `message.timestamp.type` is LogAppendTime), as Kafka's broker does: the
/// timestamp-type attribute set, `maxTimestamp` the time, the CRC made again;
/// every record then reads at that time.
pub fn set_log_append_time(batch: &mut [u8], now_ms: i64) {
    let attributes = i16::from_be_bytes([batch[21], batch[22]]) | ATTR_LOG_APPEND_TIME;
    batch[21..23].copy_from_slice(&attributes.to_be_bytes());
    batch[35..43].copy_from_slice(&now_ms.to_be_bytes());
    let crc = crc32c::crc32c(&batch[CRC_FROM..]);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
}

/// Rewrites a stored Kafka batch's base offset and leader epoch (outside its
/// CRC) as it is served.
pub fn set_base_offset(batch: &mut [u8], base_offset: i64) {
    batch[0..8].copy_from_slice(&base_offset.to_be_bytes());
    batch[12..16].copy_from_slice(&0i32.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip_at_their_edges() {
        for v in [0, 1, -1, 63, -64, 64, i64::from(i32::MAX), i64::from(i32::MIN), i64::MAX, i64::MIN] {
            let mut out = Vec::new();
            put_varint(v, &mut out);
            assert_eq!(varint(&out), Some((v, &[][..])), "{v}");
        }
        assert_eq!(varint(&[0x80; 11]), None, "longer than 10 bytes");
    }

    #[test]
    fn a_marker_is_a_transactional_control_batch_of_its_producer() {
        let mut out = Vec::new();
        let marker = Marker { producer_id: 77, producer_epoch: 3, commit: true, coordinator_epoch: 9 };
        encode_control(&mut out, 40, 1_000, marker);
        let b = KafkaBatch::parse(&out).unwrap();
        assert!(b.is_control() && b.is_transactional());
        assert_eq!((b.producer_id(), b.producer_epoch(), b.base_sequence(), b.record_count()), (77, 3, -1, 1));
        let mut scratch = Vec::new();
        let r = b.records([0; 16], 1 << 20, &mut scratch).unwrap().next().unwrap().unwrap();
        assert_eq!(r.key, Some(&[0, 0, 0, 1][..]), "version 0, type 1: commit");
        assert_eq!(r.value, Some(&[0, 0, 0, 0, 0, 9][..]), "version 0, coordinator epoch 9");
        assert_eq!(b.marker(), Some(marker), "read back as the marker it is");
        let abort = Marker { commit: false, ..marker };
        let mut out = Vec::new();
        encode_control(&mut out, 41, 1_000, abort);
        assert_eq!(KafkaBatch::parse(&out).unwrap().marker(), Some(abort));
    }

    #[test]
    fn an_encoded_batch_parses_and_yields_its_records() {
        let mut hb = Vec::new();
        let pairs: [Header<'_>; 3] = [(b"a", Some(b"1")), (b"a", Some(b"2")), (b"n", None)];
        Headers::encode(&pairs, &mut hb);
        let records = [
            Record { key: None, value: None, ..Record::default() },
            Record {
                timestamp_delta_ms: -3,
                key: Some(b""),
                value: Some(b"v"),
                headers: Headers::from_encoded(3, &hb),
                ..Record::default()
            },
        ];
        let mut out = Vec::new();
        encode_batch(&mut out, 7, 1_000, records.iter().copied().enumerate().map(|(i, r)| (i as i32, r)));
        let batch = KafkaBatch::parse(&out).unwrap();
        assert_eq!((batch.record_count(), batch.base_timestamp(), batch.producer_id()), (2, 1_000, -1));
        let mut scratch = Vec::new();
        let back: Vec<_> = batch.records([0; 16], 1 << 20, &mut scratch).unwrap().collect::<Result<_>>().unwrap();
        assert_eq!((back[0].key, back[0].value), (None, None));
        assert_eq!((back[1].key, back[1].value, back[1].timestamp_delta_ms), (Some(&b""[..]), Some(&b"v"[..]), -3));
        assert_eq!(back[1].headers.iter().collect::<Vec<_>>(), pairs);
    }

    #[test]
    fn a_damaged_batch_fails_its_crc_and_two_batches_are_refused() {
        let mut out = Vec::new();
        encode_batch(&mut out, 0, 0, [(0, Record { value: Some(b"v"), ..Record::default() })]);
        let mut damaged = out.clone();
        *damaged.last_mut().unwrap() ^= 1;
        assert!(matches!(KafkaBatch::parse(&damaged), Err(FormatError::CrcMismatch { .. })));
        let mut two = out.clone();
        two.extend_from_slice(&out);
        assert!(matches!(KafkaBatch::parse(&two), Err(FormatError::Malformed(_))));
    }

    #[test]
    fn a_kafka_record_past_ringmq_limits_re_encodes_cut_not_broken() {
        let long = vec![7u8; 70_000];
        let mut kafka_headers = Vec::new();
        put_nullable(Some(&long), &mut kafka_headers);
        put_nullable(None, &mut kafka_headers);
        let record = Record { key: Some(&long), headers: Headers::kafka(1, &kafka_headers), ..Record::default() };
        let mut batch = Vec::new();
        encode_batch(&mut batch, 0, 0, [(0, record)]);
        let mut scratch = Vec::new();
        let parsed = KafkaBatch::parse(&batch).unwrap();
        let back = parsed.records([0; 16], 1 << 20, &mut scratch).unwrap().next().unwrap().unwrap();
        assert_eq!(back.key.map(<[u8]>::len), Some(70_000), "Kafka's own encoding keeps it whole");
        let mut native = Vec::new();
        back.encode(&mut native);
        let r = crate::record::RecordIter::new(&native).next().unwrap().unwrap();
        assert_eq!(r.key.map(<[u8]>::len), Some(crate::record::KEY_BYTES_MAX));
        let headers: Vec<_> = r.headers.iter().map(|(n, v)| (n.len(), v)).collect();
        assert_eq!(headers, vec![(crate::record::NAME_BYTES_MAX, None)]);
    }

    #[test]
    fn timestamps_that_overflow_are_malformed_not_a_panic() {
        let record = Record { timestamp_delta_ms: 1, value: Some(b"v"), ..Record::default() };
        let mut batch = Vec::new();
        encode_batch(&mut batch, 0, i64::MAX, [(0, record)]);
        let parsed = KafkaBatch::parse(&batch).unwrap();
        let mut scratch = Vec::new();
        let first = parsed.records([0; 16], 1 << 20, &mut scratch).unwrap().next().unwrap();
        assert!(matches!(first, Err(FormatError::Malformed(_))), "a record past i64::MAX");
        // LogAppendTime with a max timestamp below the base by more than i64 holds.
        let mut log_append = Vec::new();
        encode_batch(&mut log_append, 0, i64::MAX, [(0, Record { value: Some(b"v"), ..Record::default() })]);
        log_append[21..23].copy_from_slice(&ATTR_LOG_APPEND_TIME.to_be_bytes());
        log_append[35..43].copy_from_slice(&i64::MIN.to_be_bytes());
        let crc = crc32c::crc32c(&log_append[CRC_FROM..]);
        log_append[17..21].copy_from_slice(&crc.to_be_bytes());
        let parsed = KafkaBatch::parse(&log_append).unwrap();
        assert!(matches!(parsed.records([0; 16], 1 << 20, &mut scratch), Err(FormatError::Malformed(_))));
    }

    #[test]
    fn ids_count_up_from_the_first_unless_there_are_none() {
        let mut first = [0u8; 16];
        first[0] = 1;
        first[12..16].copy_from_slice(&i32::MAX.to_be_bytes());
        assert_eq!(nth_id(first, 1)[12..16], i32::MIN.to_be_bytes());
        assert_eq!(nth_id([0; 16], 5), [0; 16]);
    }
}
