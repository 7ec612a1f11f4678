//! SyncGroup: the leader hands out the assignment; every member gets its share.

use super::{Api, At, Need, Route};
use crate::protocol::codec::{DecodeError, Reader};
use crate::protocol::messages::{self as msg, Assignment};
use crate::protocol::{ApiKey, Writer};
use crate::security::acl::Operation::Read;
use crate::server::auth::authorizer::group;
use crate::server::core::Failure;
use crate::server::wire::Services;

pub struct SyncGroup;

impl Api for SyncGroup {
    const KEY: ApiKey = ApiKey::SyncGroup;
    const BODIES: (&'static str, &'static str) =
        ("membership, [string member, bytes assignment] (leader only)", "bytes assignment");
    type Request<'a> = msg::SyncGroup;

    fn decode(r: &mut Reader, _: u16) -> Result<msg::SyncGroup, DecodeError> {
        msg::SyncGroup::decode(r)
    }

    fn authorize(sync: &msg::SyncGroup, need: &mut Need) -> Result<(), Failure> {
        need(Read, group(&sync.member.group))
    }

    fn route(sync: &msg::SyncGroup) -> Route<'_> {
        Route::Group(&sync.member.group)
    }

    async fn serve(s: &Services, sync: Self::Request<'_>, _: &At<'_>, w: &mut Writer) -> Result<(), Failure> {
        let parse = |b: &[u8]| Ok(Assignment::decode(b)?);
        let share = s.groups.sync(&sync.member, &sync.assignments, parse).await?;
        // A member the leader left out gets no queues (the coordinator hands out no bytes).
        let bytes = if share.bytes.is_empty() { Assignment::default().encode() } else { share.bytes };
        w.bytes(&bytes);
        Ok(())
    }
}
