//! LeaveGroup: a member leaves its group, which rebalances without it.

use super::{Api, At, Need, Route};
use crate::protocol::codec::{DecodeError, Reader};
use crate::protocol::messages::Membership;
use crate::protocol::{ApiKey, Writer};
use crate::security::acl::Operation::Read;
use crate::server::auth::authorizer::group;
use crate::server::core::Failure;
use crate::server::wire::Services;

pub struct LeaveGroup;

impl Api for LeaveGroup {
    const KEY: ApiKey = ApiKey::LeaveGroup;
    const BODIES: (&'static str, &'static str) = ("membership", "(empty)");
    type Request<'a> = Membership;

    fn decode(r: &mut Reader, _: u16) -> Result<Membership, DecodeError> {
        Membership::decode(r)
    }

    fn authorize(m: &Membership, need: &mut Need) -> Result<(), Failure> {
        need(Read, group(&m.group))
    }

    fn route(m: &Membership) -> Route<'_> {
        Route::Group(&m.group)
    }

    async fn serve(s: &Services, m: Self::Request<'_>, _: &At<'_>, _: &mut Writer) -> Result<(), Failure> {
        s.groups.leave(&m)
    }
}
