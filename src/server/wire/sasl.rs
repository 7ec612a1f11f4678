//! SASL on a native connection: SaslHandshake and SaslAuthenticate are
//! served in order by the connection itself (they change who it is), on its
//! session, by their API files. A handshake's response lists the mechanisms
//! offered; an authentication's carries the server's token and whether it
//! is the last.

use super::api::{self, sasl_authenticate::SaslAuthenticate, sasl_handshake::SaslHandshake};
use super::{codes, Services};
use crate::protocol::frame::{self, RequestHeader};
use crate::protocol::{ApiKey, ErrorCode, Writer};
use crate::server::auth::session::Session;
use crate::server::core::Failure;

/// Serves a SASL frame (length prefix included): the response, and whether
/// the connection closes after it (a failed authentication).
pub async fn serve(s: &Services, session: &mut Session, frame: &[u8]) -> (Vec<u8>, bool) {
    let (header, body) = match RequestHeader::parse(&frame[4..]) {
        Ok(parsed) => parsed,
        Err(e) => return (frame::response(0, ErrorCode::Malformed, &e.to_string(), &[]), true),
    };
    let corr = header.correlation_id;
    let mut w = Writer::new(frame::ok_response_buffer());
    let served = serve_api(s, session, header.api_key, header.api_version, body, &mut w).await;
    match served {
        Ok(()) => (frame::finish_ok_response(corr, w.buf), false),
        Err(f) => {
            let (code, m) = codes::failed(f);
            // Only a refused mechanism is answered with the mechanisms offered (PROTOCOL.md).
            let listed = code == ErrorCode::UnsupportedSaslMechanism;
            let body = if listed { &w.buf[frame::ok_response_buffer().len()..] } else { &[] };
            (frame::response(corr, code, &m, body), code == ErrorCode::AuthenticationFailed)
        }
    }
}

async fn serve_api(
    s: &Services,
    session: &mut Session,
    key: u16,
    version: u16,
    body: &[u8],
    w: &mut Writer,
) -> Result<(), Failure> {
    let Some(handler) = api::find(key) else { return Err(Failure::invalid("not a SASL request")) };
    api::check_version(handler, version)?;
    match handler.key() {
        ApiKey::SaslHandshake => {
            let mechanism = api::decode_whole::<SaslHandshake>(version, body)?;
            api::sasl_handshake::serve_on(s, session, &mechanism, w)
        }
        ApiKey::SaslAuthenticate => {
            let token = api::decode_whole::<SaslAuthenticate>(version, body)?;
            api::sasl_authenticate::serve_on(s, session, token, w).await
        }
        other => Err(Failure::invalid(format!("{other:?} is not a SASL request"))),
    }
}
