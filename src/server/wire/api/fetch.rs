//! Fetch: one queue's batches from an offset, on the shard that owns it,
//! long-polled up to `max_wait_ms` for new ones.

use super::{check_wait, Api, At, Need, Route};
use crate::protocol::codec::{DecodeError, Reader};
use crate::protocol::messages as msg;
use crate::protocol::{ApiKey, Writer};
use crate::security::acl::Operation::Read;
use crate::server::auth::authorizer::topic;
use crate::server::core::{Core, Failure};
use crate::server::data::fetch::{self, Isolation};
use crate::server::wire::caller::Caller;
use crate::server::wire::traffic::fetched;
use crate::server::wire::Services;
use std::time::Duration;

pub struct Fetch;

impl Api for Fetch {
    const KEY: ApiKey = ApiKey::Fetch;
    const BODIES: (&'static str, &'static str) = (
        "string topic, u32 queue, u64 offset, u32 max_bytes, u32 max_wait_ms, string tags",
        "u64 start, u64 end, u64 next_offset, bytes batches",
    );
    const FETCHES: bool = true;
    type Request<'a> = msg::Fetch;

    fn decode(r: &mut Reader, _: u16) -> Result<msg::Fetch, DecodeError> {
        msg::Fetch::decode(r)
    }

    fn check(f: &msg::Fetch, core: &Core) -> Result<(), Failure> {
        check_wait("max_wait_ms", f.max_wait_ms, core.config().fetch_wait_max, "--fetch-wait-ms-max")
    }

    fn authorize(f: &msg::Fetch, need: &mut Need) -> Result<(), Failure> {
        need(Read, topic(&f.queue.topic))
    }

    fn route(f: &msg::Fetch) -> Route<'_> {
        Route::Queue(&f.queue)
    }

    fn refused(core: &Core, f: &msg::Fetch, _: &Caller) {
        fetched(core, "Fetch", f, None, None);
    }

    async fn serve(s: &Services, f: Self::Request<'_>, at: &At<'_>, w: &mut Writer) -> Result<(), Failure> {
        let core = &s.core;
        let wait = Duration::from_millis(u64::from(f.max_wait_ms));
        let read = fetch::read_queue(core, at.slot()?, &f, wait, Isolation::CommittedOnly).await;
        fetched(core, "Fetch", &f, read.as_ref().ok(), None);
        let read = read.map_err(|f| f.failure)?;
        read.fetched().encode(w);
        Ok(())
    }
}
