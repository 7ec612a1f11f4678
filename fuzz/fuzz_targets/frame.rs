//! Frame headers, as a broker reads a request and a client a response.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ringmq::protocol::frame::{RequestHeader, Response};

fuzz_target!(|data: &[u8]| {
    if let Ok((header, body)) = RequestHeader::parse(data) {
        assert_eq!(body.len() + 8, data.len(), "{header:?}");
    }
    let _ = Response::parse(data);
});
