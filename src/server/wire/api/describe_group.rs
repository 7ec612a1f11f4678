//! DescribeGroup: a consumer group's state, members and committed offsets,
//! from its coordinator.

use super::{Api, At, Need, Route};
use crate::protocol::codec::{DecodeError, Reader};
use crate::protocol::{ApiKey, Writer};
use crate::security::acl::Operation::Describe;
use crate::server::auth::authorizer::group;
use crate::server::core::Failure;
use crate::server::wire::Services;

pub struct DescribeGroup;

impl Api for DescribeGroup {
    const KEY: ApiKey = ApiKey::DescribeGroup;
    const BODIES: (&'static str, &'static str) = (
        "string group",
        "string group, string state, string protocol_type, string protocol, u32 generation, string leader, [string member, string client_id, bytes assignment] members, [string topic, u32 queue, u64 offset] committed",
    );
    type Request<'a> = String;

    fn decode(r: &mut Reader, _: u16) -> Result<String, DecodeError> {
        r.string()
    }

    fn authorize(g: &String, need: &mut Need) -> Result<(), Failure> {
        need(Describe, group(g))
    }

    fn route(g: &String) -> Route<'_> {
        Route::Group(g)
    }

    async fn serve(s: &Services, g: Self::Request<'_>, _: &At<'_>, w: &mut Writer) -> Result<(), Failure> {
        s.groups.describe(&g).encode(w);
        Ok(())
    }
}
