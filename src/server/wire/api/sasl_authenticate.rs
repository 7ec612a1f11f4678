//! SaslAuthenticate: one token of the login exchange the handshake chose;
//! answered with the server's token and whether the login is done. Served
//! in order by the connection on its session (`wire/sasl.rs`), never
//! dispatched; a failed login closes the connection.

use super::{Api, At, Need};
use crate::protocol::codec::{DecodeError, Reader};
use crate::protocol::{ApiKey, Writer};
use crate::server::auth::session::{Session, Step};
use crate::server::core::Failure;
use crate::server::wire::Services;

pub struct SaslAuthenticate;

impl Api for SaslAuthenticate {
    const KEY: ApiKey = ApiKey::SaslAuthenticate;
    const BODIES: (&'static str, &'static str) = ("bytes token", "bytes token, u8 done (1: authenticated)");
    const ANY_ROLE: bool = true;
    const BY_CONNECTION: bool = true;
    type Request<'a> = &'a [u8];

    fn decode<'a>(r: &mut Reader<'a>, _: u16) -> Result<&'a [u8], DecodeError> {
        r.bytes()
    }

    fn authorize(_: &&[u8], _: &mut Need) -> Result<(), Failure> {
        Ok(())
    }

    async fn serve(_: &Services, _: Self::Request<'_>, _: &At<'_>, _: &mut Writer) -> Result<(), Failure> {
        Err(Failure::invalid("SASL requests are served by the connection, not forwarded"))
    }
}

/// Serves a token on the connection's session.
pub async fn serve_on(s: &Services, session: &mut Session, token: &[u8], w: &mut Writer) -> Result<(), Failure> {
    let (token, done) = match session.authenticate(&s.core, token).await? {
        Step::Continue(token) => (token, 0),
        Step::Authenticated(token) => (token, 1),
    };
    w.bytes(&token).u8(done);
    Ok(())
}
