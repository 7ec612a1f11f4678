//! Kafka record batches at the edge. A producer's batch is stored as it
//! came, compressed or not, inside a ringmq batch (ringmq-format's `kafka`):
//! the shard checks it (CRC-32C, records, inflating within the broker's
//! limit) and indexes its records like any other. A fetch serves a stored
//! Kafka batch byte for byte (its base offset rewritten, outside its CRC),
//! and ringmq's own batches as one uncompressed Kafka batch each, so
//! nulls, repeated headers and timestamps read back as they were sent.

use super::producers::Sequence;
use bytes::Bytes;
use kafka_protocol::ResponseError;
use ringmq_shards::batch::{self, BatchHeader};
use ringmq_shards::kafka::{self, KafkaBatch};
use ringmq_shards::FormatError;

/// A producer's record set translated: one ringmq batch, and the
/// idempotent producer's fields if it set them.
pub struct Translated {
    pub batch: Vec<u8>,
    pub sequence: Option<Sequence>,
    /// Records of a transaction (held from read_committed readers until its marker).
    pub transactional: bool,
}

/// A partition's record set (one Kafka batch) as a ringmq batch. An
/// idempotent producer's records get the message ids of their sequence
/// ([`Sequence::message_id`]), so a retry is the same batch to the shard;
/// other records get none. The records themselves are checked where they
/// are stored; a set refused here or there stores nothing.
/// A refused record set: Kafka's code (CORRUPT_MESSAGE for a CRC that does
/// not hold, INVALID_RECORD otherwise, as Kafka's validator) and why.
pub type Refused = (i16, String);

pub fn to_ringmq(records: &Bytes, partition: u32) -> Result<Translated, Refused> {
    let kafka = KafkaBatch::parse(records).map_err(|e| {
        let code = match e {
            FormatError::CrcMismatch { .. } => ResponseError::CorruptMessage,
            _ => ResponseError::InvalidRecord,
        };
        (code.code(), e.to_string())
    })?;
    if kafka.is_control() {
        let m = "control batches (transaction markers) are written by the broker, not by producers";
        return Err((ResponseError::InvalidRecord.code(), m.into()));
    }
    let sequence = (kafka.producer_id() >= 0).then(|| Sequence {
        producer_id: kafka.producer_id(),
        epoch: kafka.producer_epoch(),
        first: kafka.base_sequence(),
        count: kafka.record_count(),
    });
    let first_id = sequence.map_or([0; 16], |s| s.message_id(partition, 0));
    if kafka.is_transactional() && sequence.is_none() {
        let m = "a transactional batch needs a producer id (InitProducerId with a transactional id)";
        return Err((ResponseError::InvalidRecord.code(), m.into()));
    }
    Ok(Translated { batch: batch::wrap_kafka(&kafka, first_id), sequence, transactional: kafka.is_transactional() })
}

/// Stored ringmq batches as Kafka record batches: a stored Kafka batch as
/// its producer sent it, ringmq's own as an uncompressed batch each. A
/// batch is served whole even where it starts before the fetch's offset
/// (as Kafka serves a compressed batch; consumers skip what they passed).
pub fn to_kafka(mut stored: Vec<u8>) -> Bytes {
    let Some(places) = kafka_places(&stored) else { return translated(&stored) };
    // A topic Kafka producers write is served in the read's own buffer: each
    // Kafka batch moves down over the ringmq headers before it, so it lands
    // before the next is read.
    let mut write = 0;
    for (place, base_offset) in places {
        let len = place.len();
        stored.copy_within(place, write);
        kafka::set_base_offset(&mut stored[write..write + len], base_offset as i64);
        write += len;
    }
    stored.truncate(write);
    Bytes::from(stored)
}

/// Where each stored batch's Kafka batch lies in `stored`, with its base
/// offset (padding has none); None when a batch is ringmq's own.
fn kafka_places(stored: &[u8]) -> Option<Vec<(std::ops::Range<usize>, u64)>> {
    let mut places = Vec::new();
    for one in batch::split(stored) {
        let header = BatchHeader::decode(one)?;
        if header.is_padding() {
            continue;
        }
        let kafka = batch::kafka_bytes(one)?;
        let from = kafka.as_ptr() as usize - stored.as_ptr() as usize;
        places.push((from..from + kafka.len(), header.base_offset));
    }
    Some(places)
}

/// Stored batches of either kind, each copied or encoded into a new buffer.
fn translated(stored: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(stored.len() + stored.len() / 8);
    for one in batch::split(stored) {
        let Some(header) = BatchHeader::decode(one) else { break };
        if header.is_padding() {
            continue;
        }
        if let Some(kafka_bytes) = batch::kafka_bytes(one) {
            let start = out.len();
            out.extend_from_slice(kafka_bytes);
            kafka::set_base_offset(&mut out[start..], header.base_offset as i64);
            continue;
        }
        let mut none = Vec::new();
        let Ok(records) = batch::records(one, &mut none) else { break };
        // A stored batch broke the format: serve what came before it.
        let Ok(records) = records.collect::<Result<Vec<_>, _>>() else { break };
        let numbered = records.into_iter().enumerate().map(|(i, r)| (i as i32, r));
        let start = out.len();
        kafka::encode_batch(&mut out, header.base_offset as i64, header.first_timestamp_ms, numbered);
        if header.is_log_append_time() {
            kafka::set_log_append_time(&mut out[start..], header.first_timestamp_ms);
        }
    }
    Bytes::from(out)
}

/// The timestamp of the record at `offset` in stored batches read from it.
pub fn timestamp_at(stored: &[u8], offset: u64) -> Option<i64> {
    batch::split(stored).find_map(|b| {
        let header = BatchHeader::decode(b)?;
        let i = offset.checked_sub(header.base_offset)?;
        if i >= u64::from(header.record_count) {
            return None;
        }
        let mut inflated = Vec::new();
        let r = batch::records(b, &mut inflated).ok()?.nth(i as usize)?.ok()?;
        Some(header.first_timestamp_ms.saturating_add(r.timestamp_delta_ms))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringmq_shards::batch::BatchBuilder;
    use ringmq_shards::Record;

    fn kafka_batch(values: &[&[u8]]) -> Vec<u8> {
        let mut out = Vec::new();
        let records =
            values.iter().enumerate().map(|(i, v)| (i as i32, Record { value: Some(v), ..Record::default() }));
        kafka::encode_batch(&mut out, 0, 5_000, records);
        out
    }

    /// `kafka` as the shard stores it, at `base_offset`.
    fn stored_kafka(kafka: &[u8], base_offset: u64) -> Vec<u8> {
        let mut stored = batch::wrap_kafka(&KafkaBatch::parse(kafka).unwrap(), [0; 16]);
        batch::stamp(&mut stored, base_offset, 0);
        stored
    }

    /// The Kafka batches a fetch answer holds: (base offset, values).
    fn served(bytes: &[u8]) -> Vec<(i64, Vec<Vec<u8>>)> {
        let mut out = Vec::new();
        let mut rest = bytes;
        while !rest.is_empty() {
            let len = i32::from_be_bytes(rest[8..12].try_into().unwrap()) as usize + 12;
            let kafka = KafkaBatch::parse(&rest[..len]).unwrap();
            let mut scratch = Vec::new();
            let records = kafka.records([0; 16], 1 << 20, &mut scratch).unwrap();
            let values = records.map(|r| r.unwrap().value.unwrap().to_vec()).collect();
            out.push((i64::from_be_bytes(rest[0..8].try_into().unwrap()), values));
            rest = &rest[len..];
        }
        out
    }

    #[test]
    fn stored_kafka_batches_are_served_in_place_as_the_producer_sent_them() {
        let (first, second) = (kafka_batch(&[b"a", b"b"]), kafka_batch(&[b"c"]));
        let mut stored = stored_kafka(&first, 10);
        stored.extend_from_slice(&stored_kafka(&second, 12));
        let copied = translated(&stored);
        let (capacity, at) = (stored.capacity(), stored.as_ptr());
        let out = to_kafka(stored);
        // The read's own buffer, holding the two batches with their offsets.
        assert_eq!((out.as_ptr(), out.len() <= capacity), (at, true));
        assert_eq!(out, copied);
        assert_eq!(out.len(), first.len() + second.len());
        assert_eq!(served(&out), vec![(10, vec![b"a".to_vec(), b"b".to_vec()]), (12, vec![b"c".to_vec()])]);
    }

    #[test]
    fn a_read_holding_ringmq_batches_too_is_translated() {
        let mut native = BatchBuilder::new(5_000);
        native.push(&Record { value: Some(b"n"), ..Record::default() });
        let mut native = native.finish();
        batch::stamp(&mut native, 3, 0);
        let mut stored = native;
        stored.extend_from_slice(&stored_kafka(&kafka_batch(&[b"k"]), 4));
        assert_eq!(served(&to_kafka(stored)), vec![(3, vec![b"n".to_vec()]), (4, vec![b"k".to_vec()])]);
    }
}
