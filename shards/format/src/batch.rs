//! Record batch format, identical on the wire and on disk (little-endian):
//!
//! ```text
//!  0 u32 length        total bytes of the batch, header included
//!  4 u32 crc           CRC32 (IEEE) of bytes [24, length), set by the producer
//!  8 u64 base_offset   queue offset of the first record, stamped by the shard
//! 16 u32 queue         queue id, stamped by the shard
//! 20 u32 header_crc    CRC32 of bytes [0, 20), set by the shard when it stamps
//! 24 u16 magic         BATCH_MAGIC
//! 26 u16 attributes    bit 0: padding batch (fills a segment's end or a round's last page);
//!                      bit 1: sealed (encrypted at rest, see ringmq-shards crypt/sealed.rs);
//!                      bit 2: a Kafka batch (see kafka.rs);
//!                      bit 3: ringmq records at the broker's time (a LogAppendTime
//!                      topic's, stamped after the producer's batch was checked)
//! 28 u32 record_count
//! 32 i64 first_timestamp_ms
//! 40 records           see record.rs; of a Kafka batch, see kafka.rs
//! ```
//!
//! Two kinds of batch share the header: ringmq's own records, and a Kafka
//! record batch kept as its producer sent it (compression included), which
//! a Kafka consumer is served byte for byte. [`records`] reads either.
//!
//! Two checksums, so that stamping never re-hashes the body: the producer's
//! `crc` covers everything the producer sets, `header_crc` covers the length,
//! that crc and the fields the shard stamps. Together they cover every byte.
//!
//! In a segment file, `header_crc` is seeded with the [`Generation`] of the
//! file's life: a recycled file still holds batches of its earlier lives, and
//! under the new seed they fail their check and end the log like a torn
//! tail. On the wire (and in a file's first life) the seed is 0.

use crate::error::{FormatError, Result};
use crate::kafka::{self, KafkaBatch};
use crate::record::{Record, RecordIter};

/// Size of the batch header.
pub const HEADER_BYTES: usize = 40;
/// Identifies a ringmq record batch ("RB").
pub const BATCH_MAGIC: u16 = 0x5242;
/// Attribute bit of the batch that pads the end of a segment or of a round's last page.
pub const ATTR_PADDING: u16 = 1;
/// Attribute bit of a sealed (encrypted) batch, see ringmq-shards `crypt::sealed`.
pub const ATTR_SEALED: u16 = 2;
/// Attribute bit of a batch that holds a Kafka record batch (see `kafka`).
pub const ATTR_KAFKA: u16 = 4;
/// Attribute bit of ringmq records the broker gave its time (a Kafka batch says so itself).
pub const ATTR_LOG_APPEND_TIME: u16 = 8;
/// The bytes a Kafka record batch takes more as a ringmq batch: the header and the first id.
pub const KAFKA_WRAPPER_BYTES: usize = HEADER_BYTES + kafka::ID_BYTES;
/// The most a stored batch's compressed records inflate to when read: no
/// broker may take a batch that inflates further (`check`'s bound is at most this).
pub const INFLATED_BYTES_CEILING: usize = 256 << 20;
/// Bytes covered by the producer's CRC start here.
const BODY_START: usize = 24;
/// The header CRC covers the header's first bytes: length, crc, base offset, queue.
pub const HEADER_CRC_COVERS: usize = 20;

/// The life of a segment file: 0 for a file made new, one more each time
/// retention recycles it. It seeds the header CRC of every batch stored in
/// that life.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Generation(pub u32);

impl Generation {
    /// The seed of batches on the wire and in a file's first life.
    pub const WIRE: Generation = Generation(0);

    /// The generation of the file's next life.
    pub fn next(self) -> Generation {
        Generation(self.0.checked_add(1).expect("a file recycled 4 billion times"))
    }
}

impl std::fmt::Display for Generation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// The header CRC of `bytes` (a batch) under `generation`.
fn header_crc(bytes: &[u8], generation: Generation) -> u32 {
    // Distinct seeds give distinct CRCs of the same bytes (the seed's share of
    // a CRC is an invertible function of it), so a stale batch always fails.
    let mut hasher = crc32fast::Hasher::new_with_initial(generation.0);
    hasher.update(&bytes[..HEADER_CRC_COVERS]);
    hasher.finalize()
}

/// The decoded header of a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchHeader {
    pub length: u32,
    pub crc: u32,
    pub base_offset: u64,
    pub queue: u32,
    pub header_crc: u32,
    pub attributes: u16,
    pub record_count: u32,
    pub first_timestamp_ms: i64,
}

impl BatchHeader {
    /// Decodes a header; `bytes` must hold at least HEADER_BYTES.
    pub fn decode(bytes: &[u8]) -> Option<BatchHeader> {
        if bytes.len() < HEADER_BYTES || u16_at(bytes, 24) != BATCH_MAGIC {
            return None;
        }
        Some(BatchHeader {
            length: u32_at(bytes, 0),
            crc: u32_at(bytes, 4),
            base_offset: u64_at(bytes, 8),
            queue: u32_at(bytes, 16),
            header_crc: u32_at(bytes, 20),
            attributes: u16_at(bytes, 26),
            record_count: u32_at(bytes, 28),
            first_timestamp_ms: u64_at(bytes, 32) as i64,
        })
    }

    /// True for ringmq records the broker gave its time.
    pub fn is_log_append_time(&self) -> bool {
        self.attributes & ATTR_LOG_APPEND_TIME != 0
    }

    /// True for the filler batch at a segment's end.
    pub fn is_padding(&self) -> bool {
        self.attributes & ATTR_PADDING != 0
    }

    /// True for a batch holding a Kafka record batch.
    pub fn is_kafka(&self) -> bool {
        self.attributes & ATTR_KAFKA != 0
    }

    /// The offset after this batch's last record.
    pub fn next_offset(&self) -> u64 {
        self.base_offset + u64::from(self.record_count)
    }
}

/// What append learns from validating a producer's batch.
#[derive(Debug, Clone, Copy)]
pub struct CheckedBatch {
    pub record_count: u32,
    /// The producer's CRC and its first record's message id: what tells a
    /// retry of this batch (see `lookup::recent`).
    pub crc: u32,
    pub first_id: [u8; 16],
}

/// The limits a producer's batch is checked against.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// The most bytes a batch takes, header included.
    pub batch_bytes: usize,
    /// The most a Kafka batch's compressed records inflate to (at most
    /// [`INFLATED_BYTES_CEILING`]).
    pub inflated_bytes: usize,
}

/// Validates a producer's batch: length, CRCs and record framing (a Kafka
/// batch's records inflated, within `limits`).
pub fn check(bytes: &[u8], limits: Limits) -> Result<CheckedBatch> {
    check_keeping(bytes, limits, &mut Vec::new())
}

/// `check`, keeping a compressed Kafka batch's inflated records in
/// `inflated`, so that its index entries are read from them
/// (`records_inflated`) instead of inflating it again.
pub fn check_keeping(bytes: &[u8], limits: Limits, inflated: &mut Vec<u8>) -> Result<CheckedBatch> {
    if bytes.len() < HEADER_BYTES {
        return Err(FormatError::BatchTooShort { len: bytes.len(), min: HEADER_BYTES });
    }
    let declared = u32_at(bytes, 0) as usize;
    if declared != bytes.len() {
        return Err(FormatError::LengthMismatch { declared, actual: bytes.len() });
    }
    if bytes.len() > limits.batch_bytes {
        return Err(FormatError::BatchTooLarge { len: bytes.len(), max: limits.batch_bytes });
    }
    let header = BatchHeader::decode(bytes).ok_or(FormatError::Malformed("bad magic number"))?;
    if header.is_padding() || header.attributes & ATTR_SEALED != 0 {
        return Err(FormatError::Malformed("producers cannot send padding or sealed batches"));
    }
    if header.attributes & !ATTR_KAFKA != 0 {
        return Err(FormatError::Malformed("unknown batch attributes"));
    }
    let computed = crc32fast::hash(&bytes[BODY_START..]);
    if computed != header.crc {
        return Err(FormatError::CrcMismatch { stored: header.crc, computed });
    }
    // A Kafka batch's own CRC-32C is checked here, once: whoever reads the
    // batch later relies on the ringmq CRC, which covers the same bytes.
    if let Some(kafka) = kafka_bytes(bytes) {
        KafkaBatch::parse(kafka)?;
    }
    let inflated_max = limits.inflated_bytes.min(INFLATED_BYTES_CEILING);
    let mut count = 0u32;
    let mut first_id = [0; 16];
    for record in records_within(bytes, &header, Section::Inflate { max: inflated_max, scratch: inflated })? {
        let record = record?;
        if count == 0 {
            first_id = record.message_id;
        }
        count += 1;
    }
    if count != header.record_count || count == 0 {
        return Err(FormatError::Malformed("record count does not match the records in the batch"));
    }
    Ok(CheckedBatch { record_count: count, crc: header.crc, first_id })
}

/// The records of one batch (header included), of either kind: a Kafka
/// batch's are inflated into `scratch` when compressed. The batch was
/// checked when it was stored (a Kafka batch's CRC-32C too, which is not
/// computed again: the ringmq CRC covers its bytes); a reader still gets an
/// error, not a panic, from one that breaks the format.
pub fn records<'a>(batch: &'a [u8], scratch: &'a mut Vec<u8>) -> Result<Records<'a>> {
    records_of(batch, Section::Inflate { max: INFLATED_BYTES_CEILING, scratch })
}

/// The records of a batch `check_keeping` checked, read from what it inflated.
pub fn records_inflated<'a>(batch: &'a [u8], inflated: &'a [u8]) -> Result<Records<'a>> {
    records_of(batch, Section::Inflated(inflated))
}

fn records_of<'a>(batch: &'a [u8], section: Section<'a>) -> Result<Records<'a>> {
    let header = BatchHeader::decode(batch).ok_or(FormatError::Malformed("bad magic number"))?;
    let end = (header.length as usize).min(batch.len());
    records_within(&batch[..end], &header, section)
}

/// Where a Kafka batch's compressed records are read from.
enum Section<'a> {
    /// Inflated into `scratch`, up to `max` bytes.
    Inflate { max: usize, scratch: &'a mut Vec<u8> },
    /// Already inflated.
    Inflated(&'a [u8]),
}

fn records_within<'a>(batch: &'a [u8], header: &BatchHeader, section: Section<'a>) -> Result<Records<'a>> {
    let body = &batch[HEADER_BYTES..];
    if !header.is_kafka() {
        return Ok(Records::Ringmq(RecordIter::new(body)));
    }
    let (first_id, kafka) =
        body.split_at_checked(kafka::ID_BYTES).ok_or(FormatError::Malformed("a Kafka batch is cut"))?;
    let kafka = KafkaBatch::stored(kafka)?;
    if kafka.record_count() as u32 != header.record_count || kafka.base_timestamp() != header.first_timestamp_ms {
        return Err(FormatError::Malformed("the header's record count or first timestamp is not the Kafka batch's"));
    }
    let first_id = first_id.try_into().expect("16 bytes");
    let records = match section {
        Section::Inflate { max, scratch } => kafka.records(first_id, max, scratch)?,
        Section::Inflated(inflated) => kafka.records_inflated(first_id, inflated)?,
    };
    Ok(Records::Kafka(records))
}

/// The records of a batch of either kind.
pub enum Records<'a> {
    Ringmq(RecordIter<'a>),
    Kafka(kafka::RecordIter<'a>),
}

impl<'a> Iterator for Records<'a> {
    type Item = Result<Record<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Records::Ringmq(r) => r.next(),
            Records::Kafka(r) => r.next(),
        }
    }
}

/// A Kafka record batch as a ringmq batch: the header a producer sets, the
/// first record's message id, and the Kafka batch's bytes. The shard checks
/// it as any producer's batch.
pub fn wrap_kafka(kafka: &KafkaBatch<'_>, first_id: [u8; 16]) -> Vec<u8> {
    let mut b = Vec::with_capacity(HEADER_BYTES + kafka::ID_BYTES + kafka.bytes().len());
    b.resize(HEADER_BYTES, 0);
    b.extend_from_slice(&first_id);
    b.extend_from_slice(kafka.bytes());
    let len = b.len() as u32;
    b[0..4].copy_from_slice(&len.to_le_bytes());
    b[24..26].copy_from_slice(&BATCH_MAGIC.to_le_bytes());
    b[26..28].copy_from_slice(&ATTR_KAFKA.to_le_bytes());
    b[28..32].copy_from_slice(&(kafka.record_count() as u32).to_le_bytes());
    b[32..40].copy_from_slice(&kafka.base_timestamp().to_le_bytes());
    let crc = crc32fast::hash(&b[BODY_START..]);
    b[4..8].copy_from_slice(&crc.to_le_bytes());
    b
}

/// The newest timestamp of a stored batch's records, of either kind (what
/// time-based retention compares).
pub fn newest_timestamp(batch: &[u8]) -> Result<i64> {
    if let Some(kafka) = kafka_bytes(batch) {
        return Ok(KafkaBatch::stored(kafka)?.max_timestamp());
    }
    let header = BatchHeader::decode(batch).ok_or(FormatError::Malformed("bad magic number"))?;
    let mut newest = header.first_timestamp_ms;
    for record in records(batch, &mut Vec::new())? {
        newest = newest.max(header.first_timestamp_ms.saturating_add(record?.timestamp_delta_ms));
    }
    Ok(newest)
}

/// Gives a checked batch of either kind the broker's time `now_ms` for
/// every record (a LogAppendTime topic) and makes its CRCs again: a Kafka
/// batch as Kafka's broker does (`kafka::set_log_append_time`), a ringmq one
/// by its first timestamp and every record's delta set to 0, and marked so.
pub fn set_log_append_time(batch: &mut [u8], now_ms: i64) -> Result<()> {
    let header = BatchHeader::decode(batch).ok_or(FormatError::Malformed("bad magic number"))?;
    let end = (header.length as usize).min(batch.len());
    if header.is_kafka() {
        let kafka =
            batch.get_mut(HEADER_BYTES + kafka::ID_BYTES..end).ok_or(FormatError::Malformed("a Kafka batch is cut"))?;
        KafkaBatch::stored(kafka)?;
        kafka::set_log_append_time(kafka, now_ms);
    } else {
        let attributes = header.attributes | ATTR_LOG_APPEND_TIME;
        batch[26..28].copy_from_slice(&attributes.to_le_bytes());
        batch[32..40].copy_from_slice(&now_ms.to_le_bytes());
        let mut at = HEADER_BYTES;
        while at + 8 <= end {
            let len = u32_at(batch, at) as usize;
            batch[at + 4..at + 8].copy_from_slice(&0i32.to_le_bytes());
            at += 4 + len;
        }
    }
    let crc = crc32fast::hash(&batch[BODY_START..end]);
    batch[4..8].copy_from_slice(&crc.to_le_bytes());
    Ok(())
}

/// The Kafka batch inside a stored batch of that kind.
pub fn kafka_bytes(batch: &[u8]) -> Option<&[u8]> {
    let header = BatchHeader::decode(batch)?;
    let end = header.length as usize;
    (header.is_kafka() && end <= batch.len()).then(|| batch.get(HEADER_BYTES + kafka::ID_BYTES..end)).flatten()
}

/// Writes the shard's base offset and queue into a copy of a checked batch and
/// seals them with the header CRC, as it goes on the wire.
pub fn stamp(copy: &mut [u8], base_offset: u64, queue: u32) {
    stamp_in(copy, base_offset, queue, Generation::WIRE);
}

/// `stamp`, for a segment file in its life `generation`.
pub fn stamp_in(copy: &mut [u8], base_offset: u64, queue: u32, generation: Generation) {
    copy[8..16].copy_from_slice(&base_offset.to_le_bytes());
    copy[16..20].copy_from_slice(&queue.to_le_bytes());
    reseal(copy, generation);
}

/// Rewrites a batch's header CRC under `generation` (moving a checked batch
/// between the wire and a segment file).
pub fn reseal(batch: &mut [u8], generation: Generation) {
    let crc = header_crc(batch, generation);
    batch[20..24].copy_from_slice(&crc.to_le_bytes());
}

/// Reseals a checked batch read from a segment file in its life `from` for
/// the wire (a batch of a file's first life already is).
pub fn to_wire(batch: &mut [u8], from: Generation) {
    if from != Generation::WIRE {
        reseal(batch, Generation::WIRE);
    }
}

/// True if the header CRC of `batch` holds under `generation` (the body's CRC is not checked).
pub fn header_holds(batch: &[u8], generation: Generation) -> bool {
    header_crc(batch, generation) == u32_at(batch, 20)
}

/// Re-checks a stored batch as it comes on the wire: header, length and both CRCs.
pub fn verify_stored(bytes: &[u8]) -> std::result::Result<BatchHeader, &'static str> {
    verify_in(bytes, Generation::WIRE)
}

/// `verify_stored`, for a batch read from a segment file in its life `generation`.
pub fn verify_in(bytes: &[u8], generation: Generation) -> std::result::Result<BatchHeader, &'static str> {
    let header = BatchHeader::decode(bytes).ok_or("bad header")?;
    let end = if header.is_padding() { HEADER_BYTES } else { header.length as usize };
    if (header.length as usize) < HEADER_BYTES || bytes.len() < end {
        return Err("bad length");
    }
    if !header_holds(bytes, generation) {
        return Err("header CRC mismatch");
    }
    if crc32fast::hash(&bytes[BODY_START..end]) != header.crc {
        return Err("CRC mismatch");
    }
    Ok(header)
}

/// Builds the header of the padding batch that fills `length` bytes up to a
/// segment's end or a page boundary, in a file's life `generation`. Only its
/// header is written and covered by its CRC.
pub fn padding_header(length: u32, generation: Generation) -> [u8; HEADER_BYTES] {
    let mut h = [0u8; HEADER_BYTES];
    h[0..4].copy_from_slice(&length.to_le_bytes());
    h[24..26].copy_from_slice(&BATCH_MAGIC.to_le_bytes());
    h[26..28].copy_from_slice(&ATTR_PADDING.to_le_bytes());
    let crc = crc32fast::hash(&h[BODY_START..]);
    h[4..8].copy_from_slice(&crc.to_le_bytes());
    stamp_in(&mut h, 0, u32::MAX, generation);
    h
}

/// Builds a record batch as a producer does.
#[derive(Debug)]
pub struct BatchBuilder {
    buf: Vec<u8>,
    count: u32,
    first_timestamp_ms: i64,
}

impl BatchBuilder {
    /// Starts a batch whose records' timestamps are relative to `first_timestamp_ms`.
    pub fn new(first_timestamp_ms: i64) -> Self {
        Self::reusing(Vec::with_capacity(HEADER_BYTES + 256), first_timestamp_ms)
    }

    /// Like `new`, in `buf` (its bytes dropped, its capacity kept): a
    /// producer reuses the buffers of the batches it sent.
    pub fn reusing(mut buf: Vec<u8>, first_timestamp_ms: i64) -> Self {
        buf.clear();
        buf.resize(HEADER_BYTES, 0);
        BatchBuilder { buf, count: 0, first_timestamp_ms }
    }

    /// Appends one record.
    pub fn push(&mut self, record: &Record<'_>) -> &mut Self {
        record.encode(&mut self.buf);
        self.count += 1;
        self
    }

    /// The timestamp the records' deltas are relative to (Unix ms).
    pub fn first_timestamp_ms(&self) -> i64 {
        self.first_timestamp_ms
    }

    /// Number of records pushed so far.
    pub fn len(&self) -> usize {
        self.count as usize
    }

    /// True if no record was pushed.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Bytes the batch would have if finished now.
    pub fn size_bytes(&self) -> usize {
        self.buf.len()
    }

    /// Finishes the header (length, count, CRC) and returns the batch bytes.
    pub fn finish(mut self) -> Vec<u8> {
        let len = self.buf.len() as u32;
        let b = &mut self.buf;
        b[0..4].copy_from_slice(&len.to_le_bytes());
        b[24..26].copy_from_slice(&BATCH_MAGIC.to_le_bytes());
        b[28..32].copy_from_slice(&self.count.to_le_bytes());
        b[32..40].copy_from_slice(&self.first_timestamp_ms.to_le_bytes());
        let crc = crc32fast::hash(&b[BODY_START..]);
        b[4..8].copy_from_slice(&crc.to_le_bytes());
        self.buf
    }
}

/// Splits concatenated stored batches (as returned by a read) into single batches.
pub fn split(mut bytes: &[u8]) -> impl Iterator<Item = &[u8]> {
    std::iter::from_fn(move || {
        if bytes.len() < HEADER_BYTES {
            return None;
        }
        let len = u32_at(bytes, 0) as usize;
        if len < HEADER_BYTES || len > bytes.len() {
            return None;
        }
        let (batch, rest) = bytes.split_at(len);
        bytes = rest;
        Some(batch)
    })
}

/// The little-endian u16 at byte `at` of `b` (the formats' integer reads,
/// shared with the storage engine's own files).
pub fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

/// The little-endian u32 at byte `at` of `b`.
pub fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

/// The little-endian u64 at byte `at` of `b`.
pub fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: Limits = Limits { batch_bytes: 1 << 20, inflated_bytes: 1 << 20 };

    fn one_record_batch(value: &[u8]) -> Vec<u8> {
        let mut b = BatchBuilder::new(1_000);
        b.push(&Record { value: Some(value), tag: b"TagA", ..Record::default() });
        b.finish()
    }

    /// Makes the header claim `count` records, its producer's CRC still right.
    fn claim_record_count(bytes: &mut [u8], count: u32) {
        bytes[28..32].copy_from_slice(&count.to_le_bytes());
        let crc = crc32fast::hash(&bytes[BODY_START..]);
        bytes[4..8].copy_from_slice(&crc.to_le_bytes());
    }

    fn kafka_batch(values: &[&[u8]]) -> Vec<u8> {
        let mut out = Vec::new();
        let records =
            values.iter().enumerate().map(|(i, v)| (i as i32, Record { value: Some(v), ..Record::default() }));
        kafka::encode_batch(&mut out, 0, 5_000, records);
        out
    }

    #[test]
    fn a_wrapped_kafka_batch_checks_and_reads_with_ids_counting_up() {
        let kafka = kafka_batch(&[b"a", b"b"]);
        let mut first = [1u8; 16];
        first[12..16].copy_from_slice(&7i32.to_be_bytes());
        let bytes = wrap_kafka(&KafkaBatch::parse(&kafka).unwrap(), first);
        let checked = check(&bytes, LIMITS).unwrap();
        assert_eq!((checked.record_count, checked.first_id), (2, first));
        let mut copy = bytes.clone();
        stamp(&mut copy, 42, 7);
        let mut scratch = Vec::new();
        let back: Vec<_> = records(&copy, &mut scratch).unwrap().collect::<Result<_>>().unwrap();
        assert_eq!(back.iter().map(|r| r.value.unwrap()).collect::<Vec<_>>(), [b"a", b"b"]);
        assert_eq!(back[1].message_id[12..16], 8i32.to_be_bytes());
        assert_eq!(kafka_bytes(&copy), Some(kafka.as_slice()));
    }

    #[test]
    fn a_wrapped_kafka_batch_whose_own_crc_fails_is_refused_though_the_ringmq_crc_holds() {
        let kafka = kafka_batch(&[b"a", b"b"]);
        let mut bytes = wrap_kafka(&KafkaBatch::parse(&kafka).unwrap(), [0; 16]);
        let last = bytes.len() - 1;
        bytes[last] ^= 1; // a record's byte, under both CRCs
        let crc = crc32fast::hash(&bytes[BODY_START..]);
        bytes[4..8].copy_from_slice(&crc.to_le_bytes());
        assert!(matches!(check(&bytes, LIMITS), Err(FormatError::CrcMismatch { .. })));
    }

    #[test]
    fn a_wrapped_kafka_batch_whose_header_disagrees_is_malformed() {
        let kafka = kafka_batch(&[b"a"]);
        let mut bytes = wrap_kafka(&KafkaBatch::parse(&kafka).unwrap(), [0; 16]);
        claim_record_count(&mut bytes, 2);
        assert!(matches!(check(&bytes, LIMITS), Err(FormatError::Malformed(_))));
    }

    #[test]
    fn a_kafka_batch_that_inflates_past_the_limit_is_refused() {
        let kafka = kafka_batch(&[&[0u8; 4096]]);
        let parsed = KafkaBatch::parse(&kafka).unwrap();
        let mut compressed = kafka[..kafka::BATCH_HEADER_BYTES].to_vec();
        let mut e = lz4_flex::frame::FrameEncoder::new(Vec::new());
        std::io::Write::write_all(&mut e, &kafka[kafka::BATCH_HEADER_BYTES..]).unwrap();
        compressed.extend_from_slice(&e.finish().unwrap());
        compressed[21..23].copy_from_slice(&3i16.to_be_bytes());
        let len = (compressed.len() - 12) as i32;
        compressed[8..12].copy_from_slice(&len.to_be_bytes());
        let crc = crc32c::crc32c(&compressed[21..]);
        compressed[17..21].copy_from_slice(&crc.to_be_bytes());
        assert_eq!(KafkaBatch::parse(&compressed).unwrap().record_count(), parsed.record_count());
        let bytes = wrap_kafka(&KafkaBatch::parse(&compressed).unwrap(), [0; 16]);
        assert!(bytes.len() < 1000, "lz4 shrank the zeros");
        assert!(check(&bytes, LIMITS).is_ok());
        let mut inflated = Vec::new();
        check_keeping(&bytes, LIMITS, &mut inflated).unwrap();
        assert!(inflated.len() > 4096, "the check kept what it inflated");
        let kept: Vec<_> = records_inflated(&bytes, &inflated).unwrap().collect::<Result<_>>().unwrap();
        let mut scratch = Vec::new();
        let again: Vec<_> = records(&bytes, &mut scratch).unwrap().collect::<Result<_>>().unwrap();
        assert_eq!(kept, again, "read from the kept records as from a new inflation");
        let small = Limits { inflated_bytes: 1000, ..LIMITS };
        assert!(matches!(check(&bytes, small), Err(FormatError::InflatesTooLarge { max: 1000 })));
    }

    #[test]
    fn log_append_time_gives_every_record_of_either_kind_the_brokers_time() {
        let timestamps = |batch: &[u8]| {
            let mut scratch = Vec::new();
            let first = i64::from_le_bytes(batch[32..40].try_into().unwrap());
            let read = records(batch, &mut scratch).unwrap().map(|r| first + r.unwrap().timestamp_delta_ms);
            read.collect::<Vec<i64>>()
        };
        let mut b = BatchBuilder::new(1_000);
        b.push(&Record { value: Some(b"a"), ..Record::default() });
        b.push(&Record { timestamp_delta_ms: 250, value: Some(b"b"), ..Record::default() });
        let mut native = b.finish();
        assert_eq!(timestamps(&native), [1_000, 1_250]);
        assert_eq!(newest_timestamp(&native).unwrap(), 1_250);
        set_log_append_time(&mut native, 9_000).unwrap();
        let header = BatchHeader::decode(&native).unwrap();
        assert!(header.is_log_append_time(), "marked");
        assert_eq!(header.crc, crc32fast::hash(&native[BODY_START..]), "its CRC made again");
        assert!(check(&native, LIMITS).is_err(), "a producer cannot send a batch at the broker's time");
        assert_eq!(timestamps(&native), [9_000, 9_000]);
        assert_eq!(newest_timestamp(&native).unwrap(), 9_000);

        let mut wrapped = wrap_kafka(&KafkaBatch::parse(&kafka_batch(&[b"a", b"b"])).unwrap(), [0; 16]);
        set_log_append_time(&mut wrapped, 9_000).unwrap();
        check(&wrapped, LIMITS).unwrap();
        let kafka = KafkaBatch::parse(kafka_bytes(&wrapped).unwrap()).unwrap();
        assert_ne!(kafka.attributes() & 8, 0, "the timestamp type says LogAppendTime");
        assert_eq!(newest_timestamp(&wrapped).unwrap(), 9_000);
        let mut scratch = Vec::new();
        let times: Vec<i64> =
            kafka.records([0; 16], 1 << 20, &mut scratch).unwrap().map(|r| r.unwrap().timestamp_delta_ms).collect();
        assert!(times.iter().all(|t| kafka.base_timestamp() + t == 9_000), "{times:?}");
    }

    #[test]
    fn stamped_batch_verifies_with_new_offset_and_queue() {
        let bytes = one_record_batch(b"hello");
        check(&bytes, LIMITS).unwrap();
        let mut copy = bytes.clone();
        stamp(&mut copy, 42, 7);
        let header = verify_stored(&copy).unwrap();
        assert_eq!((header.base_offset, header.queue, header.record_count), (42, 7, 1));
    }

    #[test]
    fn a_builder_reusing_a_buffer_of_another_batch_builds_the_same_bytes() {
        let mut b = BatchBuilder::reusing(one_record_batch(&[7u8; 300]), 1_000);
        b.push(&Record { value: Some(b"hello"), tag: b"TagA", ..Record::default() });
        assert_eq!(b.finish(), one_record_batch(b"hello"));
    }

    #[test]
    fn flipped_body_bit_is_a_crc_mismatch() {
        let mut bytes = one_record_batch(b"hello");
        let last = bytes.len() - 1;
        bytes[last] ^= 0x10;
        assert!(matches!(check(&bytes, LIMITS), Err(FormatError::CrcMismatch { .. })));
    }

    #[test]
    fn wrong_length_field_and_short_and_oversized_batches_are_rejected() {
        let bytes = one_record_batch(b"hello");
        assert!(matches!(check(&bytes[..bytes.len() - 1], LIMITS), Err(FormatError::LengthMismatch { .. })));
        assert!(matches!(check(&bytes[..10], LIMITS), Err(FormatError::BatchTooShort { .. })));
        assert!(matches!(check(&bytes, Limits { batch_bytes: 50, ..LIMITS }), Err(FormatError::BatchTooLarge { .. })));
    }

    #[test]
    fn record_count_mismatch_is_malformed() {
        let mut bytes = one_record_batch(b"hello");
        claim_record_count(&mut bytes, 2);
        assert!(matches!(check(&bytes, LIMITS), Err(FormatError::Malformed(_))));
    }

    #[test]
    fn a_damaged_stamped_field_fails_the_header_crc() {
        let bytes = one_record_batch(b"hello");
        let mut copy = bytes.clone();
        stamp(&mut copy, 42, 7);
        copy[9] ^= 1;
        assert_eq!(verify_stored(&copy), Err("header CRC mismatch"));
    }

    #[test]
    fn padding_header_verifies_and_is_padding() {
        let h = padding_header(8192, Generation(3));
        let header = verify_in(&h, Generation(3)).unwrap();
        assert!(header.is_padding());
        assert_eq!(header.length, 8192);
    }

    #[test]
    fn a_batch_of_another_generation_fails_its_header_check() {
        let mut stored = one_record_batch(b"hello");
        stamp_in(&mut stored, 42, 7, Generation(5));
        assert!(verify_in(&stored, Generation(5)).is_ok());
        for other in [0, 4, 6, u32::MAX] {
            assert_eq!(verify_in(&stored, Generation(other)), Err("header CRC mismatch"), "generation {other}");
        }
        let padding = padding_header(4096, Generation(1));
        assert_eq!(verify_in(&padding, Generation(2)), Err("header CRC mismatch"));
        reseal(&mut stored, Generation::WIRE);
        assert_eq!(verify_stored(&stored).unwrap().base_offset, 42, "resealed for the wire");
    }
}
