//! FetchMany: one long poll over many queues of this shard, answered as
//! soon as any has something; version 1 names the consumer group and
//! member (message traces).

use super::{check_wait, Api, At, Need};
use crate::protocol::codec::{DecodeError, Reader};
use crate::protocol::messages as msg;
use crate::protocol::{ApiKey, Writer};
use crate::security::acl::Operation::Read;
use crate::server::auth::authorizer::topic;
use crate::server::core::{Core, Failure};
use crate::server::data::fetch::{self, Isolation};
use crate::server::wire::codes;
use crate::server::wire::traffic::fetched;
use crate::server::wire::Services;
use std::time::Duration;

pub struct FetchMany;

impl Api for FetchMany {
    const KEY: ApiKey = ApiKey::FetchMany;
    const VERSIONS: (u16, u16) = (0, 1);
    const BODIES: (&'static str, &'static str) = (
        "u32 max_wait_ms, (version 1: string group, string member), [string topic, u32 queue, u64 offset, u32 max_bytes, string tags]",
        "[u16 error, string message, then if no error: u64 start, u64 end, u64 next_offset, bytes batches; if CorruptData: u64 first_offset, u64 next_offset (the damaged range)] per entry",
    );
    const FETCHES: bool = true;
    type Request<'a> = msg::FetchMany;

    fn decode(r: &mut Reader, version: u16) -> Result<msg::FetchMany, DecodeError> {
        msg::FetchMany::decode(r, version)
    }

    fn check(f: &msg::FetchMany, core: &Core) -> Result<(), Failure> {
        check_wait("max_wait_ms", f.max_wait_ms, core.config().fetch_wait_max, "--fetch-wait-ms-max")
    }

    fn authorize(f: &msg::FetchMany, need: &mut Need) -> Result<(), Failure> {
        f.entries.iter().try_for_each(|e| need(Read, topic(&e.queue.topic)))
    }

    async fn serve(s: &Services, f: Self::Request<'_>, _: &At<'_>, w: &mut Writer) -> Result<(), Failure> {
        let core = &s.core;
        let wait = Duration::from_millis(u64::from(f.max_wait_ms));
        let reads = fetch::fetch_many(core, &f.entries, wait, Isolation::CommittedOnly).await;
        for (entry, read) in f.entries.iter().zip(&reads) {
            fetched(core, "FetchMany", entry, read.as_ref().ok(), f.consumer.as_ref());
        }
        let outcomes: Vec<_> = reads
            .iter()
            .map(|o| o.as_ref().map(fetch::QueueRead::fetched).map_err(|f| codes::fetch_failed(f.clone())))
            .collect();
        // Sized once: growing to a megabyte copied it several times.
        let batches: usize = outcomes.iter().flatten().map(|f| f.batches.len()).sum();
        w.buf.reserve(batches + 64 * outcomes.len());
        msg::encode_fetched_many(&outcomes, w);
        Ok(())
    }
}
