//! Kafka request frames as the listener decodes them: the header, the body
//! of every API and version served, and each produce's record sets through
//! the translation (record batch v2, CRC-32C, the four decompressions, each
//! bounded). Nothing may panic or allocate from a count alone.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ringmq::server::kafka::{decode, to_ringmq, Decoded, Request};

/// The broker's default batch limit.
const MAX_BATCH_BYTES: usize = 4 << 20;

fuzz_target!(|data: &[u8]| {
    let Ok(Decoded::Served { request, .. }) = decode(bytes::Bytes::copy_from_slice(data)) else { return };
    if let Request::Produce(produce) = *request {
        for topic in &produce.topic_data {
            for partition in &topic.partition_data {
                if let Some(records) = &partition.records {
                    let _ = to_ringmq(records, partition.index as u32, MAX_BATCH_BYTES);
                }
            }
        }
    }
});
