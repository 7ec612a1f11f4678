//! SASL on a Kafka connection, served in order by the connection itself on
//! its session: SaslHandshake v1 then SaslAuthenticate requests (librdkafka,
//! confluent-kafka), or SaslHandshake v0 then the tokens as bare frames
//! (kafka-python). A failed authentication is answered (v1) and the
//! connection closed, as Kafka does.

use super::codes;
use super::dispatch::{respond, Outcome};
use super::{text, Services};
use crate::protocol::ErrorCode;
use crate::server::auth::session::{Session, Step};
use crate::server::core::Failure;
use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, SaslAuthenticateResponse, SaslHandshakeResponse};
use kafka_protocol::ResponseError;

/// What the connection does after a SASL request.
pub struct Served {
    /// What to send (`Outcome::Last` after a failed authentication).
    pub outcome: Outcome,
    /// The next frames are bare tokens (after a successful v0 handshake).
    pub bare_tokens: bool,
}

/// A SaslHandshake: the mechanism the client names, answered with those offered.
pub fn handshake(s: &Services, session: &mut Session, correlation: i32, version: i16, mechanism: &str) -> Served {
    let offered = session.offered(&s.core).into_iter().map(text).collect();
    let chosen = session.handshake(&s.core, mechanism);
    let code = match &chosen {
        Ok(_) => codes::NONE,
        Err(Failure(ErrorCode::UnsupportedSaslMechanism, _)) => ResponseError::UnsupportedSaslMechanism.code(),
        Err(_) => ResponseError::IllegalSaslState.code(),
    };
    let body = SaslHandshakeResponse::default().with_error_code(code).with_mechanisms(offered);
    let header = ApiKey::SaslHandshake.response_header_version(version);
    Served {
        outcome: encoded(respond(correlation, header, &body, version), false),
        bare_tokens: chosen.is_ok() && version == 0,
    }
}

/// A SaslAuthenticate request's token.
pub async fn authenticate(s: &Services, session: &mut Session, correlation: i32, version: i16, token: &[u8]) -> Served {
    let step = session.authenticate(&s.core, token).await;
    let body = match &step {
        Ok(Step::Continue(token) | Step::Authenticated(token)) => {
            SaslAuthenticateResponse::default().with_auth_bytes(Bytes::copy_from_slice(token))
        }
        Err(Failure(code, message)) => SaslAuthenticateResponse::default()
            .with_error_code(codes::of(*code))
            .with_error_message(Some(text(message.clone()))),
    };
    let header = ApiKey::SaslAuthenticate.response_header_version(version);
    Served { outcome: encoded(respond(correlation, header, &body, version), step.is_err()), bare_tokens: false }
}

/// A bare token after a v0 handshake: the server's token as a bare frame,
/// whether more bare tokens follow; on a failure the connection just closes.
pub async fn bare_token(s: &Services, session: &mut Session, token: &[u8]) -> Served {
    match session.authenticate(&s.core, token).await {
        Ok(step) => {
            let (token, more) = match step {
                Step::Continue(token) => (token, true),
                Step::Authenticated(token) => (token, false),
            };
            let mut frame = (token.len() as u32).to_be_bytes().to_vec();
            frame.extend_from_slice(&token);
            Served { outcome: Outcome::Respond(Bytes::from(frame)), bare_tokens: more }
        }
        Err(_) => Served { outcome: Outcome::Last(Bytes::new()), bare_tokens: false },
    }
}

/// The response, the last one on the connection if `last`.
fn encoded(response: anyhow::Result<Bytes>, last: bool) -> Outcome {
    match response {
        Ok(frame) if last => Outcome::Last(frame),
        Ok(frame) => Outcome::Respond(frame),
        Err(error) => {
            tracing::error!(%error, "a SASL response did not encode");
            Outcome::Last(Bytes::new())
        }
    }
}
