//! Heartbeat: a member is alive; parked up to `wait_ms` until its group
//! changes, so members learn of a rebalance at once.

use super::{check_wait, Api, At, Need, Route};
use crate::protocol::codec::{DecodeError, Reader};
use crate::protocol::messages::Membership;
use crate::protocol::{ApiKey, Writer};
use crate::security::acl::Operation::Read;
use crate::server::auth::authorizer::group;
use crate::server::core::{Core, Failure};
use crate::server::wire::Services;
use std::time::Duration;

pub struct Heartbeat;

/// A heartbeat: who, and how long it may be parked.
pub struct Beat {
    member: Membership,
    wait_ms: u32,
}

impl Api for Heartbeat {
    const KEY: ApiKey = ApiKey::Heartbeat;
    const BODIES: (&'static str, &'static str) = ("membership, u32 wait_ms", "(empty)");
    type Request<'a> = Beat;

    fn decode(r: &mut Reader, _: u16) -> Result<Beat, DecodeError> {
        Ok(Beat { member: Membership::decode(r)?, wait_ms: r.u32()? })
    }

    fn check(b: &Beat, core: &Core) -> Result<(), Failure> {
        check_wait("wait_ms", b.wait_ms, core.config().group_wait_max, "--group-wait-ms-max")
    }

    fn authorize(b: &Beat, need: &mut Need) -> Result<(), Failure> {
        need(Read, group(&b.member.group))
    }

    fn route(b: &Beat) -> Route<'_> {
        Route::Group(&b.member.group)
    }

    async fn serve(s: &Services, b: Self::Request<'_>, _: &At<'_>, _: &mut Writer) -> Result<(), Failure> {
        s.groups.heartbeat(&b.member, Duration::from_millis(u64::from(b.wait_ms))).await
    }
}
