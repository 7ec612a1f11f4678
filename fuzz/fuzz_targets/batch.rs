//! A producer's record batch as the broker checks it before storing (either
//! kind: ringmq's records, or a Kafka batch inflated within a bound), and a
//! stored batch as a reader verifies and reads it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ringmq_shards::batch::{self, Limits};

const LIMITS: Limits = Limits { batch_bytes: 1 << 20, inflated_bytes: 4 << 20 };

fuzz_target!(|data: &[u8]| {
    if let Ok(checked) = batch::check(data, LIMITS) {
        let mut inflated = Vec::new();
        let records = batch::records(data, &mut inflated).expect("a checked batch's records open");
        let records = records.collect::<Result<Vec<_>, _>>().expect("a checked batch's records iterate");
        assert_eq!(records.len() as u32, checked.record_count);
    }
    let _ = batch::verify_stored(data);
});
