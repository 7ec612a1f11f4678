//! SASL on a native connection: SaslHandshake and SaslAuthenticate are
//! served in order by the connection itself (they change who it is), on its
//! session. A handshake's response lists the mechanisms offered; an
//! authentication's carries the server's token and whether it is the last.

use super::Services;
use crate::protocol::frame::{self, RequestHeader};
use crate::protocol::request::Request;
use crate::protocol::{ApiKey, ErrorCode, Writer};
use crate::server::auth::session::{Session, Step};
use crate::server::core::Failure;

/// Whether a frame is SASL's (the connection serves it on its session).
pub fn is_sasl(api: Option<ApiKey>) -> bool {
    matches!(api, Some(ApiKey::SaslHandshake | ApiKey::SaslAuthenticate))
}

/// Serves a SASL frame (length prefix included): the response, and whether
/// the connection closes after it (a failed authentication).
pub async fn serve(s: &Services, session: &mut Session, frame: &[u8]) -> (Vec<u8>, bool) {
    let (header, body) = match RequestHeader::parse(&frame[4..]) {
        Ok(parsed) => parsed,
        Err(e) => return (frame::response(0, ErrorCode::Malformed, &e.to_string(), &[]), true),
    };
    let corr = header.correlation_id;
    let api = ApiKey::from_wire(header.api_key).expect("a SASL API key");
    if let Err(m) = api.check_version(header.api_version) {
        return (frame::response(corr, ErrorCode::UnsupportedVersion, &m, &[]), false);
    }
    let mut w = Writer::new(frame::ok_response_buffer());
    let served = match Request::decode(api, header.api_version, body) {
        Err(e) => Err(Failure::from(e)),
        Ok(Request::SaslHandshake(name)) => {
            let offered = session.offered(&s.core);
            let chosen = session.handshake(&s.core, &name);
            w.u32(offered.len() as u32);
            offered.iter().for_each(|m| {
                w.string(m);
            });
            chosen.map(|_| ())
        }
        Ok(Request::SaslAuthenticate(token)) => session.authenticate(&s.core, token).await.map(|step| match step {
            Step::Continue(token) => {
                w.bytes(&token).u8(0);
            }
            Step::Authenticated(token) => {
                w.bytes(&token).u8(1);
            }
        }),
        Ok(other) => unreachable!("{other:?} is not a SASL request"),
    };
    match served {
        Ok(()) => (frame::finish_ok_response(corr, w.buf), false),
        Err(Failure(code, m)) => {
            // Only a refused mechanism is answered with the mechanisms offered (PROTOCOL.md).
            let listed = code == ErrorCode::UnsupportedSaslMechanism;
            let body = if listed { &w.buf[frame::ok_response_buffer().len()..] } else { &[] };
            (frame::response(corr, code, &m, body), code == ErrorCode::AuthenticationFailed)
        }
    }
}
