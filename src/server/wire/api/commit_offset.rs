//! CommitOffset: a member's committed offset of a queue, on the group's
//! coordinator, fenced by the member's generation.

use super::{Api, At, Need, Route};
use crate::protocol::codec::{DecodeError, Reader};
use crate::protocol::messages::GroupOffset;
use crate::protocol::{ApiKey, Writer};
use crate::security::acl::Operation::Read;
use crate::server::auth::authorizer::{group, topic};
use crate::server::core::Failure;
use crate::server::wire::Services;

pub struct CommitOffset;

impl Api for CommitOffset {
    const KEY: ApiKey = ApiKey::CommitOffset;
    const BODIES: (&'static str, &'static str) = ("membership, string topic, u32 queue, u64 offset", "(empty)");
    const WRITES: bool = true;
    type Request<'a> = GroupOffset;

    fn decode(r: &mut Reader, _: u16) -> Result<GroupOffset, DecodeError> {
        GroupOffset::decode(r)
    }

    fn authorize(c: &GroupOffset, need: &mut Need) -> Result<(), Failure> {
        need(Read, group(&c.member.group))?;
        need(Read, topic(&c.queue.topic))
    }

    fn route(c: &GroupOffset) -> Route<'_> {
        Route::Group(&c.member.group)
    }

    async fn serve(s: &Services, c: Self::Request<'_>, _: &At<'_>, _: &mut Writer) -> Result<(), Failure> {
        s.groups.commit(&c, "").await
    }
}
