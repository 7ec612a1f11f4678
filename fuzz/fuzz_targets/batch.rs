//! A producer's record batch as the broker checks it before storing, and a
//! stored batch as a reader verifies it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ringmq_shards::batch::{self, HEADER_BYTES};
use ringmq_shards::record::RecordIter;

fuzz_target!(|data: &[u8]| {
    if let Ok(checked) = batch::check(data, 1 << 20) {
        let records = RecordIter::new(&data[HEADER_BYTES..]).collect::<Result<Vec<_>, _>>();
        let records = records.expect("a checked batch's records iterate");
        assert_eq!(records.len() as u32, checked.record_count);
    }
    let _ = batch::verify_stored(data);
});
