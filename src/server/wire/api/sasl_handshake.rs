//! SaslHandshake: the mechanism a client will log in with; answered with
//! the mechanisms this connection offers. Served in order by the connection
//! on its session (`wire/sasl.rs`), never dispatched.

use super::{Api, At, Need};
use crate::protocol::codec::{DecodeError, Reader};
use crate::protocol::{ApiKey, Writer};
use crate::server::auth::session::Session;
use crate::server::core::Failure;
use crate::server::wire::Services;

pub struct SaslHandshake;

impl Api for SaslHandshake {
    const KEY: ApiKey = ApiKey::SaslHandshake;
    const BODIES: (&'static str, &'static str) = (
        "string mechanism (SCRAM-SHA-256, SCRAM-SHA-512, PLAIN)",
        "[string mechanism] offered on this connection (also with UnsupportedSaslMechanism)",
    );
    const ANY_ROLE: bool = true;
    const BY_CONNECTION: bool = true;
    type Request<'a> = String;

    fn decode(r: &mut Reader, _: u16) -> Result<String, DecodeError> {
        r.string()
    }

    fn authorize(_: &String, _: &mut Need) -> Result<(), Failure> {
        Ok(())
    }

    async fn serve(_: &Services, _: Self::Request<'_>, _: &At<'_>, _: &mut Writer) -> Result<(), Failure> {
        Err(Failure::invalid("SASL requests are served by the connection, not forwarded"))
    }
}

/// Serves a handshake on the connection's session: the mechanisms offered
/// are written whether or not the one asked for is among them.
pub fn serve_on(s: &Services, session: &mut Session, mechanism: &str, w: &mut Writer) -> Result<(), Failure> {
    let offered = session.offered(&s.core);
    let chosen = session.handshake(&s.core, mechanism);
    w.u32(offered.len() as u32);
    for m in offered {
        w.string(m);
    }
    chosen.map(drop)
}
