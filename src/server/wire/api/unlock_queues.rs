//! UnlockQueues: an ordered consumer gives its queues' leases back.

use super::{Api, At, Need, Route};
use crate::protocol::codec::{DecodeError, Reader};
use crate::protocol::messages::QueueLocking;
use crate::protocol::{ApiKey, Writer};
use crate::security::acl::Operation::Read;
use crate::server::auth::authorizer::group;
use crate::server::core::Failure;
use crate::server::wire::Services;

pub struct UnlockQueues;

impl Api for UnlockQueues {
    const KEY: ApiKey = ApiKey::UnlockQueues;
    const BODIES: (&'static str, &'static str) =
        ("string group, string holder, u32 lease_ms (0), [string topic, u32 queue]", "(empty)");
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

    async fn serve(s: &Services, l: Self::Request<'_>, _: &At<'_>, _: &mut Writer) -> Result<(), Failure> {
        s.groups.unlock(&l);
        Ok(())
    }
}
