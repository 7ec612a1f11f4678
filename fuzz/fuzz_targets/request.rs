//! Every API's request body (the first byte picks the API), and the
//! response bodies a client decodes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ringmq::protocol::messages as msg;
use ringmq::protocol::request::Request;
use ringmq::protocol::{ApiKey, Reader};

fuzz_target!(|data: &[u8]| {
    let Some((&pick, body)) = data.split_first() else { return };
    let api = ApiKey::ALL[usize::from(pick) % ApiKey::ALL.len()];
    let _ = Request::decode(api, u16::from(pick >> 7), body);
    let _ = msg::MetadataResponse::decode(&mut Reader::new(body));
    let _ = msg::decode_produced(&mut Reader::new(body));
    let _ = msg::decode_produced_many(&mut Reader::new(body));
    let _ = msg::decode_fetched_many(&mut Reader::new(body));
    let _ = msg::Joined::decode(&mut Reader::new(body));
    let _ = msg::Assignment::decode(body);
    let _ = msg::LookedUp::decode(&mut Reader::new(body));
    let _ = msg::SentBack::decode(&mut Reader::new(body));
});
