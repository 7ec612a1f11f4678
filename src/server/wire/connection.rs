//! The native protocol's connections, run by the shared connection loop
//! (`net::connection`): frames are a 4-byte little-endian length then the
//! request header and body; responses go out as each is ready, tagged with
//! the request's correlation id. A framing error closes that connection
//! only, after an answer with correlation id 0. SASL is served in order on
//! the connection's session; with `--auth-required` nothing but
//! ApiVersions is served before the login. At a stop, what is still
//! unanswered after the grace is answered here (NotLeader when deposed,
//! else ShuttingDown).

use super::caller::Caller;
use super::{api, dispatch, sasl, Services};
use crate::protocol::frame::{self, REQUEST_HEADER_BYTES};
use crate::protocol::{ApiKey, ErrorCode};
use crate::server::auth::session::Session;
use crate::server::core::context::ShardRole;
use crate::server::core::Core;
use crate::server::net::admission::Refused;
use crate::server::net::connection::{Lane, Next, Protocol};
use crate::server::net::stream::Stream;
use std::net::SocketAddr;
use std::rc::Rc;

/// The native protocol, as one shard's listener serves it.
pub struct Native {
    services: Rc<Services>,
}

/// A frame the connection cannot read (too short, too long): answered with
/// correlation id 0, and the connection is closed.
#[derive(Debug, thiserror::Error)]
#[error("{code:?}: {message}")]
pub struct FrameError {
    code: ErrorCode,
    message: String,
}

impl Native {
    pub fn new(services: Rc<Services>) -> Rc<Native> {
        Rc::new(Native { services })
    }
}

impl Protocol for Native {
    const NAME: &'static str = "native";
    const IN_ORDER: bool = false;
    type Session = Session;
    type Error = FrameError;

    fn core(&self) -> &Rc<Core> {
        &self.services.core
    }

    fn refused(why: &Refused) -> Option<Vec<u8>> {
        Some(frame::response(0, ErrorCode::TooManyConnections, &why.to_string(), &[]))
    }

    fn session(&self, stream: &Stream, peer: Option<SocketAddr>) -> Session {
        Session::new(stream.is_tls(), stream.certificate_user(), peer)
    }

    fn frame_len(&self, prefix: [u8; 4]) -> Result<usize, (FrameError, Option<Vec<u8>>)> {
        let len = u32::from_le_bytes(prefix) as usize;
        let max = self.services.core.config().frame_bytes_max;
        let (code, m) = if len < REQUEST_HEADER_BYTES {
            let m = format!("frame of {len} bytes is shorter than the {REQUEST_HEADER_BYTES}-byte request header");
            (ErrorCode::Malformed, m)
        } else if len > max {
            (ErrorCode::FrameTooLarge, format!("frame of {len} bytes exceeds --frame-bytes-max {max}"))
        } else {
            return Ok(len);
        };
        let answer = frame::response(0, code, &format!("{m}; closing the connection"), &[]);
        Err((FrameError { code, message: m }, Some(answer)))
    }

    async fn next(&self, session: &mut Session, request: Vec<u8>) -> Next<FrameError> {
        let s = &self.services;
        let correlation = correlation_of(&request);
        if correlation == 0 {
            // Its answer could not be told from a framing error's.
            let m = "correlation id 0 is reserved for framing errors; number requests from 1; closing the connection";
            return Next::Answer { response: frame::response(0, ErrorCode::Malformed, m, &[]), close: true };
        }
        let handler = api::find(u16::from_le_bytes([request[4], request[5]]));
        if handler.is_some_and(|h| h.by_connection()) {
            let (response, close) = sasl::serve(s, session, &request).await;
            return Next::Answer { response, close };
        }
        let api = handler.map(|h| h.key());
        if api != Some(ApiKey::ApiVersions) && !session.admitted(&s.core) {
            let m = "this broker authenticates clients: SaslHandshake and SaslAuthenticate first \
                     (ClientConfig::sasl; the CLI's --user)";
            let response = frame::response(correlation, ErrorCode::AuthenticationRequired, m, &[]);
            return Next::Answer { response, close: false };
        }
        let caller = Caller::Client(session.caller());
        let lane = match api {
            Some(ApiKey::Produce | ApiKey::ProduceMany) => Lane::Produce,
            _ => Lane::Other,
        };
        let s = s.clone();
        let serving = Box::pin(async move { Ok(dispatch::handle(&s, request, &caller).await) });
        Next::Serve { correlation, lane, serving }
    }

    fn unanswered(&self, correlation: u32) -> Option<Vec<u8>> {
        let deposed = matches!(self.services.core.role(), ShardRole::Leader(r) if r.deposed());
        let (code, m) = match deposed {
            true => (ErrorCode::NotLeader, "this node no longer leads its broker group; refresh metadata and retry"),
            false => (ErrorCode::ShuttingDown, "the broker is shutting down; retry on another node or once it is back"),
        };
        Some(frame::response(correlation, code, m, &[]))
    }

    fn unread(&self, frame: &[u8]) -> Option<Vec<u8>> {
        self.unanswered(correlation_of(frame))
    }
}

/// A request frame's correlation id (its length checked to hold a header).
fn correlation_of(frame: &[u8]) -> u32 {
    u32::from_le_bytes([frame[8], frame[9], frame[10], frame[11]])
}
