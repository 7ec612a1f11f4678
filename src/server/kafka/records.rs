//! Kafka record batches (v2) and ringmq batches, translated at the edge:
//! a producer's record set becomes one ringmq batch (its records, keys,
//! values, headers and timestamps), and stored batches are served to Kafka
//! fetches as one uncompressed record batch v2 per ringmq batch (CRC-32C
//! computed by the codec). Compressed producer batches are decompressed
//! here, each bounded by the broker's batch limit before it is allocated.

use super::producers::Sequence;
use bytes::{Bytes, BytesMut};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use ringmq_shards::batch::{self, BatchBuilder, BatchHeader};
use ringmq_shards::record::{Headers, RecordIter};
use std::cell::Cell;
use std::io::Read;

/// Why a producer's record set was refused (nothing of it is stored).
#[derive(Debug)]
pub enum Refused {
    /// It does not decode, or a record or CRC is wrong.
    Corrupt(String),
    /// It (or its decompressed records) exceeds the broker's batch limit.
    TooLarge(String),
}

/// A producer's record set translated: one ringmq batch, and the
/// idempotent producer's fields if it set them.
pub struct Translated {
    pub batch: Vec<u8>,
    pub sequence: Option<Sequence>,
}

/// A Kafka record set for `partition` as one ringmq batch, refused whole
/// past `max_bytes` (the broker's batch limit, also the most any compressed
/// batch may inflate to). An idempotent producer's records get the message
/// ids of their sequence ([`Sequence::message_id`]), so a retry is the same
/// batch to the shard; other records get none.
pub fn to_ringmq(records: &Bytes, partition: u32, max_bytes: usize) -> Result<Translated, Refused> {
    let mut buf = records.clone();
    let mut sets = Vec::new();
    let too_large = Cell::new(false);
    while !buf.is_empty() {
        let inflate = |b: &mut Bytes, c: Compression| match decompress(b, c, max_bytes) {
            Ok(records) => Ok(records),
            // The codec's callback speaks anyhow: its errors are wrapped here only.
            Err(Inflate::Bad(e)) => Err(anyhow::Error::new(e)),
            Err(Inflate::TooLarge) => {
                too_large.set(true);
                Err(anyhow::Error::new(InflateError::TooLarge(max_bytes)))
            }
        };
        let set = RecordBatchDecoder::decode_with_custom_compression(&mut buf, Some(inflate)).map_err(|e| {
            let m = format!("the record batch does not decode: {e}");
            if too_large.get() {
                Refused::TooLarge(m)
            } else {
                Refused::Corrupt(m)
            }
        })?;
        sets.push(set);
    }
    let records: Vec<&Record> = sets.iter().flat_map(|s| s.records.iter()).collect();
    if records.is_empty() {
        return Err(Refused::Corrupt("the record set holds no records".into()));
    }
    let sequence = (records[0].producer_id >= 0).then(|| Sequence {
        producer_id: records[0].producer_id,
        epoch: records[0].producer_epoch,
        first: records[0].sequence,
        count: records.len() as i32,
    });
    let first = records[0].timestamp;
    let mut built = BatchBuilder::new(first);
    let mut encoded = Vec::new();
    for (i, r) in records.into_iter().enumerate() {
        let pairs: Vec<(&[u8], &[u8])> =
            r.headers.iter().map(|(k, v)| (k.as_bytes(), v.as_deref().unwrap_or_default())).collect();
        encoded.clear();
        Headers::encode(&pairs, &mut encoded);
        let record = ringmq_shards::Record {
            timestamp_delta_ms: (r.timestamp - first).clamp(0, i64::from(u32::MAX)) as u32,
            key: r.key.as_deref().unwrap_or_default(),
            value: r.value.as_deref().unwrap_or_default(),
            headers: Headers::from_encoded(pairs.len() as u16, &encoded),
            message_id: sequence.map_or([0; 16], |s| s.message_id(partition, i as i32)),
            ..ringmq_shards::Record::default()
        };
        built.push(&record);
        if built.size_bytes() > max_bytes {
            return Err(Refused::TooLarge(format!("the records exceed the batch limit of {max_bytes} bytes")));
        }
    }
    Ok(Translated { batch: built.finish(), sequence })
}

/// Why a compressed batch could not be inflated.
enum Inflate {
    /// Its records exceed the batch limit.
    TooLarge,
    Bad(InflateError),
}

/// A compressed batch that does not decompress.
#[derive(Debug, thiserror::Error)]
enum InflateError {
    #[error("it inflates past the batch limit of {0} bytes")]
    TooLarge(usize),
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("zstd: {0}")]
    Zstd(#[from] ruzstd::decoding::errors::FrameDecoderError),
    #[error("snappy: {0}")]
    Snappy(#[from] snap::Error),
    #[error("snappy: {0}")]
    SnappyFraming(&'static str),
}

impl From<std::io::Error> for Inflate {
    fn from(e: std::io::Error) -> Self {
        Inflate::Bad(e.into())
    }
}

/// Decompresses one batch's records, at most `max_bytes` of them.
fn decompress(compressed: &[u8], compression: Compression, max_bytes: usize) -> Result<Bytes, Inflate> {
    let limit = max_bytes as u64 + 1;
    let mut out = Vec::new();
    match compression {
        Compression::None => out.extend_from_slice(compressed),
        Compression::Gzip => {
            flate2::read::MultiGzDecoder::new(compressed).take(limit).read_to_end(&mut out)?;
        }
        Compression::Snappy => snappy(compressed, max_bytes, &mut out)?,
        Compression::Lz4 => {
            lz4_flex::frame::FrameDecoder::new(compressed).take(limit).read_to_end(&mut out)?;
        }
        Compression::Zstd => {
            let decoder = ruzstd::decoding::StreamingDecoder::new(compressed).map_err(|e| Inflate::Bad(e.into()))?;
            decoder.take(limit).read_to_end(&mut out)?;
        }
    }
    if out.len() > max_bytes {
        return Err(Inflate::TooLarge);
    }
    Ok(Bytes::from(out))
}

/// Kafka's snappy: xerial's framing (an 8-byte magic, a version pair, then
/// length-prefixed raw snappy blocks) as the Java client writes it, or one
/// raw block as librdkafka may.
fn snappy(input: &[u8], max_bytes: usize, out: &mut Vec<u8>) -> Result<(), Inflate> {
    const XERIAL: &[u8] = b"\x82SNAPPY\0";
    let bad = |m: &'static str| Inflate::Bad(InflateError::SnappyFraming(m));
    let raw = |block: &[u8], out: &mut Vec<u8>| -> Result<(), Inflate> {
        let len = snap::raw::decompress_len(block).map_err(|e| Inflate::Bad(e.into()))?;
        if out.len() + len > max_bytes {
            return Err(Inflate::TooLarge);
        }
        out.extend_from_slice(&snap::raw::Decoder::new().decompress_vec(block).map_err(|e| Inflate::Bad(e.into()))?);
        Ok(())
    };
    if !input.starts_with(XERIAL) {
        return raw(input, out);
    }
    let mut rest = input.get(16..).ok_or_else(|| bad("a xerial header is 16 bytes"))?;
    while !rest.is_empty() {
        let (len, tail) = rest.split_at_checked(4).ok_or_else(|| bad("a block length is cut"))?;
        let len = u32::from_be_bytes(len.try_into().expect("4 bytes")) as usize;
        let (block, tail) = tail.split_at_checked(len).ok_or_else(|| bad("a block is cut"))?;
        raw(block, out)?;
        rest = tail;
    }
    Ok(())
}

/// Stored ringmq batches as Kafka record batches v2, from offset `from` on
/// (a read's first batch may start before it).
pub fn to_kafka(stored: Bytes, from: u64) -> Bytes {
    let mut out = BytesMut::with_capacity(stored.len() + stored.len() / 8);
    let options = RecordEncodeOptions { version: 2, compression: Compression::None };
    for one in batch::split(&stored) {
        let records = records_of(&stored, one, from);
        if records.is_empty() {
            continue;
        }
        if let Err(error) = RecordBatchEncoder::encode(&mut out, records.iter(), &options) {
            // Our own records always encode; a failure is a bug, not the client's.
            tracing::error!(%error, "encoding Kafka records failed");
            break;
        }
    }
    out.freeze()
}

/// The records of one stored batch (a slice of `read`) from `from` on, as
/// Kafka records whose keys and values point into `read`.
fn records_of(read: &Bytes, stored: &[u8], from: u64) -> Vec<Record> {
    let Some(header) = BatchHeader::decode(stored) else { return Vec::new() };
    let body = &stored[batch::HEADER_BYTES..];
    let mut out = Vec::with_capacity(header.record_count as usize);
    for (i, r) in RecordIter::new(body).enumerate() {
        let Ok(r) = r else { break };
        let offset = header.base_offset + i as u64;
        if offset < from {
            continue;
        }
        let headers = r
            .headers
            .iter()
            .map(|(k, v)| {
                (StrBytes::from_string(String::from_utf8_lossy(k).into_owned()), Some(Bytes::copy_from_slice(v)))
            })
            .collect();
        out.push(Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: 0,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: offset as i64,
            sequence: -1,
            timestamp: header.first_timestamp_ms + i64::from(r.timestamp_delta_ms),
            key: (!r.key.is_empty()).then(|| read.slice_ref(r.key)),
            value: Some(read.slice_ref(r.value)),
            headers,
        });
    }
    out
}

/// The timestamp of the record at `offset` in stored batches read from it.
pub fn timestamp_at(stored: &[u8], offset: u64) -> Option<i64> {
    batch::split(stored).find_map(|b| {
        let header = BatchHeader::decode(b)?;
        let i = offset.checked_sub(header.base_offset)?;
        if i >= u64::from(header.record_count) {
            return None;
        }
        let r = RecordIter::new(&b[batch::HEADER_BYTES..]).nth(i as usize)?.ok()?;
        Some(header.first_timestamp_ms + i64::from(r.timestamp_delta_ms))
    })
}
