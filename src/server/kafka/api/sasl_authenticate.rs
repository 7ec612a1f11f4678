//! SaslAuthenticate: one token of the login exchange the handshake chose,
//! answered with the server's token; a failed authentication is answered
//! and the connection closed, as Kafka does. Served in order by the
//! connection on its session, never spawned.

use super::{respond, Api, At};
use crate::server::auth::session::{Session, Step};
use crate::server::core::Failure;
use crate::server::kafka::sasl::{encoded, Served};
use crate::server::kafka::{codes, text, KafkaError, Services};
use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, SaslAuthenticateRequest, SaslAuthenticateResponse};
use kafka_protocol::ResponseError;

pub struct SaslAuthenticate;

impl Api for SaslAuthenticate {
    const KEY: ApiKey = ApiKey::SaslAuthenticate;
    const VERSIONS: (i16, i16) = (0, 2);
    const NAME: &'static str = "kafka_SaslAuthenticate";
    const NOTE: &'static str = "SCRAM-SHA-256/512 and PLAIN (over TLS) on the connection's session";
    type Request = SaslAuthenticateRequest;
    type Response = SaslAuthenticateResponse;

    async fn serve(_: &Services, _: SaslAuthenticateRequest, _: &At) -> Option<SaslAuthenticateResponse> {
        // The connection serves it on its session (`serve_on`).
        Some(SaslAuthenticateResponse::default().with_error_code(ResponseError::IllegalSaslState.code()))
    }
}

/// Serves a token on the connection's session.
pub async fn serve_on(
    s: &Services,
    session: &mut Session,
    correlation: i32,
    version: i16,
    mut body: Bytes,
) -> Result<Served, KafkaError> {
    let request = SaslAuthenticate::decode(&mut body, version)?;
    let step = session.authenticate(&s.core, &request.auth_bytes).await;
    let body = match &step {
        Ok(Step::Continue(token) | Step::Authenticated(token)) => {
            SaslAuthenticateResponse::default().with_auth_bytes(Bytes::copy_from_slice(token))
        }
        Err(Failure(code, message)) => SaslAuthenticateResponse::default()
            .with_error_code(codes::of(*code))
            .with_error_message(Some(text(message.clone()))),
    };
    let header = SaslAuthenticate::KEY.response_header_version(version);
    Ok(Served { outcome: encoded(respond(correlation, header, &body, version), step.is_err()), bare_tokens: false })
}
