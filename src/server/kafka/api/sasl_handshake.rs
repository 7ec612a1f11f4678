//! SaslHandshake: the mechanism a client will log in with, answered with
//! those offered. v1 is followed by SaslAuthenticate requests (librdkafka,
//! confluent-kafka); v0 by the tokens as bare frames (kafka-python). Served
//! in order by the connection on its session, never spawned.

use super::{respond, Api, At};
use crate::server::auth::session::Session;
use crate::server::core::Failure;
use crate::server::core::Reason;
use crate::server::kafka::sasl::{encoded, Served};
use crate::server::kafka::{codes, text, KafkaError, Services};
use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, SaslHandshakeRequest, SaslHandshakeResponse};
use kafka_protocol::ResponseError;

pub struct SaslHandshake;

impl Api for SaslHandshake {
    const KEY: ApiKey = ApiKey::SaslHandshake;
    const VERSIONS: (i16, i16) = (0, 1);
    const NAME: &'static str = "kafka_SaslHandshake";
    const NOTE: &'static str = "v1 then SaslAuthenticate, or v0 then bare tokens; served in order on the connection";
    type Request = SaslHandshakeRequest;
    type Response = SaslHandshakeResponse;

    async fn serve(_: &Services, _: SaslHandshakeRequest, _: &At) -> Option<SaslHandshakeResponse> {
        // The connection serves it on its session (`serve_on`).
        Some(SaslHandshakeResponse::default().with_error_code(ResponseError::IllegalSaslState.code()))
    }
}

/// Serves a handshake on the connection's session.
pub fn serve_on(
    s: &Services,
    session: &mut Session,
    correlation: i32,
    version: i16,
    mut body: Bytes,
) -> Result<Served, KafkaError> {
    let request = SaslHandshake::decode(&mut body, version)?;
    let offered = session.offered(&s.core).into_iter().map(text).collect();
    let chosen = session.handshake(&s.core, &request.mechanism);
    let code = match &chosen {
        Ok(_) => codes::NONE,
        Err(Failure(Reason::UnsupportedSaslMechanism, _)) => ResponseError::UnsupportedSaslMechanism.code(),
        Err(_) => ResponseError::IllegalSaslState.code(),
    };
    let body = SaslHandshakeResponse::default().with_error_code(code).with_mechanisms(offered);
    let header = SaslHandshake::KEY.response_header_version(version);
    Ok(Served {
        outcome: encoded(respond(correlation, header, &body, version), false),
        bare_tokens: chosen.is_ok() && version == 0,
    })
}
