//! ListAcls: the ACL rules a filter matches.

use super::{Api, At, Need};
use crate::protocol::acl::AclFilter;
use crate::protocol::codec::{DecodeError, Reader};
use crate::protocol::security::{decode_filter, encode_acls};
use crate::protocol::{ApiKey, Writer};
use crate::security::acl::Operation::Describe;
use crate::server::auth::{self, authorizer::cluster};
use crate::server::core::Failure;
use crate::server::wire::Services;

pub struct ListAcls;

impl Api for ListAcls {
    const KEY: ApiKey = ApiKey::ListAcls;
    const BODIES: (&'static str, &'static str) = ("acl filter", "[acl]");
    type Request<'a> = AclFilter;

    fn decode(r: &mut Reader, _: u16) -> Result<AclFilter, DecodeError> {
        decode_filter(r)
    }

    fn authorize(_: &AclFilter, need: &mut Need) -> Result<(), Failure> {
        need(Describe, cluster())
    }

    async fn serve(s: &Services, filter: Self::Request<'_>, _: &At<'_>, w: &mut Writer) -> Result<(), Failure> {
        encode_acls(&auth::admin::acls(&s.core, &filter), w);
        Ok(())
    }
}
