//! Kafka request frames as the listener decodes them: the header, the body
//! of every API and version served (through the broker's API table), and
//! each produce's record set as the edge wraps it and the shard checks it
//! (record batch v2, CRC-32C, the four decompressions, each bounded).
//! Nothing may panic or allocate from a count alone.
#![no_main]

use kafka_protocol::messages::{ApiKey, ProduceRequest};
use kafka_protocol::protocol::Decodable;
use libfuzzer_sys::fuzz_target;
use ringmq::server::kafka::api::{decode, Decoded};
use ringmq::server::kafka::to_ringmq;
use ringmq_shards::batch::{self, Limits};

/// The broker's limits, about its defaults.
const LIMITS: Limits = Limits { batch_bytes: 4 << 20, inflated_bytes: 32 << 20 };

fuzz_target!(|data: &[u8]| {
    let Ok(Decoded::Served { api, head, body }) = decode(bytes::Bytes::copy_from_slice(data)) else { return };
    if api.decodes(head.version, body.clone()).is_err() || api.key() != ApiKey::Produce {
        return;
    }
    let Ok(produce) = ProduceRequest::decode(&mut body.clone(), head.version) else { return };
    for topic in &produce.topic_data {
        for partition in &topic.partition_data {
            if let Some(records) = &partition.records {
                if let Ok(wrapped) = to_ringmq(records, partition.index as u32) {
                    let _ = batch::check(&wrapped.batch, LIMITS);
                }
            }
        }
    }
});
