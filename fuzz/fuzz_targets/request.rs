//! Every API's request body as the broker's API table decodes it (the
//! first byte picks the API and the version), and the response bodies a
//! client decodes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ringmq::protocol::messages as msg;
use ringmq::protocol::Reader;
use ringmq::server::wire::api::TABLE;

fuzz_target!(|data: &[u8]| {
    let Some((&pick, body)) = data.split_first() else { return };
    let api = TABLE[usize::from(pick) % TABLE.len()];
    let _ = api.decodes(u16::from(pick >> 7), body);
    let _ = msg::MetadataResponse::decode(&mut Reader::new(body));
    let _ = msg::decode_produced(&mut Reader::new(body));
    let _ = msg::decode_produced_many(&mut Reader::new(body));
    let _ = msg::decode_fetched_many(&mut Reader::new(body));
    let _ = msg::Joined::decode(&mut Reader::new(body));
    let _ = msg::Assignment::decode(body);
    let _ = msg::LookedUp::decode(&mut Reader::new(body));
    let _ = msg::SentBack::decode(&mut Reader::new(body));
});
