//! LockQueues: an ordered consumer takes (or renews) its queues' leases.

use super::{Api, At, Need, Route};
use crate::protocol::codec::{DecodeError, Reader};
use crate::protocol::messages::QueueLocking;
use crate::protocol::{ApiKey, Writer};
use crate::security::acl::Operation::Read;
use crate::server::auth::authorizer::group;
use crate::server::core::Failure;
use crate::server::wire::Services;

pub struct LockQueues;

impl Api for LockQueues {
    const KEY: ApiKey = ApiKey::LockQueues;
    const BODIES: (&'static str, &'static str) =
        ("string group, string holder, u32 lease_ms, [string topic, u32 queue]", "[u8 held] per queue");
    type Request<'a> = QueueLocking;

    fn decode(r: &mut Reader, _: u16) -> Result<QueueLocking, DecodeError> {
        QueueLocking::decode(r)
    }

    fn authorize(l: &QueueLocking, need: &mut Need) -> Result<(), Failure> {
        need(Read, group(&l.group))
    }

    fn route(l: &QueueLocking) -> Route<'_> {
        Route::Group(&l.group)
    }

    async fn serve(s: &Services, l: Self::Request<'_>, _: &At<'_>, w: &mut Writer) -> Result<(), Failure> {
        for held in s.groups.lock(&l) {
            w.u8(u8::from(held));
        }
        Ok(())
    }
}
