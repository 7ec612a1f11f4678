//! PollChecks: a transactional producer's long poll for the half messages
//! whose outcome the broker asks it to check.

use super::{check_wait, Api, At, Need};
use crate::protocol::codec::{DecodeError, Reader};
use crate::protocol::{ApiKey, Writer};
use crate::security::acl::Operation::Write;
use crate::server::auth::authorizer::transactional;
use crate::server::core::{Core, Failure};
use crate::server::wire::Services;
use std::time::Duration;

pub struct PollChecks;

/// A producer group's poll, and how long it may be parked.
pub struct Poll {
    group: String,
    wait_ms: u32,
}

impl Api for PollChecks {
    const KEY: ApiKey = ApiKey::PollChecks;
    const BODIES: (&'static str, &'static str) =
        ("string group, u32 wait_ms", "[u64 half_offset, string topic, u32 queue, bytes batch]");
    type Request<'a> = Poll;

    fn decode(r: &mut Reader, _: u16) -> Result<Poll, DecodeError> {
        Ok(Poll { group: r.string()?, wait_ms: r.u32()? })
    }

    fn check(p: &Poll, core: &Core) -> Result<(), Failure> {
        check_wait("wait_ms", p.wait_ms, core.config().fetch_wait_max, "--fetch-wait-ms-max")
    }

    fn authorize(p: &Poll, need: &mut Need) -> Result<(), Failure> {
        need(Write, transactional(&p.group))
    }

    async fn serve(s: &Services, p: Self::Request<'_>, _: &At<'_>, w: &mut Writer) -> Result<(), Failure> {
        let wait = Duration::from_millis(u64::from(p.wait_ms));
        let found = s.transactions.poll_checks(&p.group, wait).await?;
        w.u32(found.len() as u32);
        for (half, topic, queue, batch) in &found {
            w.u64(*half).string(topic).u32(*queue).bytes(batch);
        }
        Ok(())
    }
}
