//! Kafka request frames as the listener decodes them: the header, the body
//! of every API and version served (through the broker's API table), and
//! each produce's record sets through the translation (record batch v2,
//! CRC-32C, the four decompressions, each bounded). Nothing may panic or
//! allocate from a count alone.
#![no_main]

use kafka_protocol::messages::{ApiKey, ProduceRequest};
use kafka_protocol::protocol::Decodable;
use libfuzzer_sys::fuzz_target;
use ringmq::server::kafka::api::{decode, Decoded};
use ringmq::server::kafka::to_ringmq;

/// The broker's default batch limit.
const MAX_BATCH_BYTES: usize = 4 << 20;

fuzz_target!(|data: &[u8]| {
    let Ok(Decoded::Served { api, head, body }) = decode(bytes::Bytes::copy_from_slice(data)) else { return };
    if api.decodes(head.version, body.clone()).is_err() || api.key() != ApiKey::Produce {
        return;
    }
    let Ok(produce) = ProduceRequest::decode(&mut body.clone(), head.version) else { return };
    for topic in &produce.topic_data {
        for partition in &topic.partition_data {
            if let Some(records) = &partition.records {
                let _ = to_ringmq(records, partition.index as u32, MAX_BATCH_BYTES);
            }
        }
    }
});
