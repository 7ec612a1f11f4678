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
pub fn to_kafka(stored: Bytes) -> Bytes {
    let mut out = Vec::with_capacity(stored.len() + stored.len() / 8);
    for one in batch::split(&stored) {
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
