//! ListGroups: the consumer groups this shard coordinates that the caller
//! may describe (a client asks every shard: `Client::list_groups`).

use super::{Api, At, Need};
use crate::protocol::codec::{DecodeError, Reader};
use crate::protocol::groups::encode_listings;
use crate::protocol::{ApiKey, Writer};
use crate::server::core::Failure;
use crate::server::wire::Services;

pub struct ListGroups;

impl Api for ListGroups {
    const KEY: ApiKey = ApiKey::ListGroups;
    const BODIES: (&'static str, &'static str) =
        ("(empty)", "[string group, string state, u32 members] (the groups this shard coordinates)");
    type Request<'a> = ();

    fn decode(_: &mut Reader, _: u16) -> Result<(), DecodeError> {
        Ok(())
    }

    /// Filtered instead: a caller sees the groups it may describe.
    fn authorize(_: &(), _: &mut Need) -> Result<(), Failure> {
        Ok(())
    }

    async fn serve(s: &Services, _: Self::Request<'_>, at: &At<'_>, w: &mut Writer) -> Result<(), Failure> {
        let mut groups = s.groups.list();
        groups.retain(|g| at.caller.sees_group(&s.core, &g.group));
        encode_listings(&groups, w);
        Ok(())
    }
}
