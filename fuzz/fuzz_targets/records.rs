//! Record iteration over any bytes, in ringmq's encoding and as a Kafka
//! batch's: every record or an error, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ringmq_shards::kafka::KafkaBatch;
use ringmq_shards::record::RecordIter;

fuzz_target!(|data: &[u8]| {
    for record in RecordIter::new(data) {
        if record.is_err() {
            break;
        }
    }
    // A Kafka batch whose CRC does not hold is refused before its records
    // are read; past the CRC, the records are what is fuzzed.
    let mut fixed = data.to_vec();
    if fixed.len() >= 61 {
        let crc = crc32c::crc32c(&fixed[21..]);
        fixed[17..21].copy_from_slice(&crc.to_be_bytes());
    }
    if let Ok(batch) = KafkaBatch::parse(&fixed) {
        let mut inflated = Vec::new();
        if let Ok(records) = batch.records([0; 16], 4 << 20, &mut inflated) {
            for record in records {
                if let Ok(r) = record {
                    r.headers.iter().for_each(drop);
                } else {
                    break;
                }
            }
        }
    }
});
