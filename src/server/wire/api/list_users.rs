//! ListUsers: the users and the SASL mechanisms each has credentials for.

use super::{Api, At, Need};
use crate::protocol::codec::{DecodeError, Reader};
use crate::protocol::{ApiKey, Writer};
use crate::security::acl::Operation::Describe;
use crate::server::auth::{self, authorizer::cluster};
use crate::server::core::Failure;
use crate::server::wire::Services;

pub struct ListUsers;

impl Api for ListUsers {
    const KEY: ApiKey = ApiKey::ListUsers;
    const BODIES: (&'static str, &'static str) = ("(empty)", "[string user, [string mechanism]]");
    type Request<'a> = ();

    fn decode(_: &mut Reader, _: u16) -> Result<(), DecodeError> {
        Ok(())
    }

    fn authorize(_: &(), need: &mut Need) -> Result<(), Failure> {
        need(Describe, cluster())
    }

    async fn serve(s: &Services, _: Self::Request<'_>, _: &At<'_>, w: &mut Writer) -> Result<(), Failure> {
        auth::admin::users(&s.core).encode(w);
        Ok(())
    }
}
