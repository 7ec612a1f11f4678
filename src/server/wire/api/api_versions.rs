//! ApiVersions: every API this broker serves with its versions, from the
//! table; served in any role and before a login.

use super::{Api, At, Need, TABLE};
use crate::protocol::codec::{DecodeError, Reader};
use crate::protocol::{ApiKey, Writer};
use crate::server::core::Failure;
use crate::server::wire::Services;

pub struct ApiVersions;

impl Api for ApiVersions {
    const KEY: ApiKey = ApiKey::ApiVersions;
    const BODIES: (&'static str, &'static str) = ("(empty)", "[u16 api_key, u16 min_version, u16 max_version]");
    const ANY_ROLE: bool = true;
    type Request<'a> = ();

    fn decode(_: &mut Reader, _: u16) -> Result<(), DecodeError> {
        Ok(())
    }

    fn authorize(_: &(), _: &mut Need) -> Result<(), Failure> {
        Ok(())
    }

    async fn serve(_: &Services, _: Self::Request<'_>, _: &At<'_>, w: &mut Writer) -> Result<(), Failure> {
        w.u32(TABLE.len() as u32);
        for api in TABLE {
            let (min, max) = api.versions();
            w.u16(api.key() as u16).u16(min).u16(max);
        }
        Ok(())
    }
}
