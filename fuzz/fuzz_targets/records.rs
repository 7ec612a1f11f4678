//! Record iteration over any bytes: every record or an error, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ringmq_shards::record::RecordIter;

fuzz_target!(|data: &[u8]| {
    for record in RecordIter::new(data) {
        if record.is_err() {
            break;
        }
    }
});
