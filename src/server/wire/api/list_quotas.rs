//! ListQuotas: every quota set.

use super::{Api, At, Need};
use crate::protocol::codec::{DecodeError, Reader};
use crate::protocol::security::encode_quotas;
use crate::protocol::{ApiKey, Writer};
use crate::security::acl::Operation::Describe;
use crate::server::auth::{self, authorizer::cluster};
use crate::server::core::Failure;
use crate::server::wire::Services;

pub struct ListQuotas;

impl Api for ListQuotas {
    const KEY: ApiKey = ApiKey::ListQuotas;
    const BODIES: (&'static str, &'static str) = ("(empty)", "[quota]");
    type Request<'a> = ();

    fn decode(_: &mut Reader, _: u16) -> Result<(), DecodeError> {
        Ok(())
    }

    fn authorize(_: &(), need: &mut Need) -> Result<(), Failure> {
        need(Describe, cluster())
    }

    async fn serve(s: &Services, _: Self::Request<'_>, _: &At<'_>, w: &mut Writer) -> Result<(), Failure> {
        encode_quotas(&auth::admin::quotas(&s.core), w);
        Ok(())
    }
}
