//! Kafka connections, run by the shared connection loop (`net::connection`):
//! frames are a 4-byte big-endian length then the request; each is decoded
//! whole as it arrives (a frame that does not decode, or one past
//! `frame_bytes_max`, stops the reading: the requests before it are
//! answered, then the connection closes), and the responses are written in
//! the order the requests came, as Kafka's clients require. SASL is served
//! in order on the connection's session (v0's bare tokens too). At a stop
//! the requests read get the grace, then the connection closes and the
//! client retries (a deposed leader's produces are answered
//! NOT_LEADER_OR_FOLLOWER within it).

use super::api::{self, Decoded, Head, Outcome};
use super::{sasl, KafkaError, Services};
use crate::server::auth::session::Session;
use crate::server::core::Core;
use crate::server::net::admission::Refused;
use crate::server::net::connection::{Lane, Next, Protocol};
use crate::server::net::stream::Stream;
use bytes::Bytes;
use kafka_protocol::messages::ApiKey;
use std::net::SocketAddr;
use std::rc::Rc;

/// Kafka's protocol, as one shard's Kafka listener serves it.
pub struct Kafka {
    services: Rc<Services>,
}

impl Kafka {
    pub fn new(services: Rc<Services>) -> Rc<Kafka> {
        Rc::new(Kafka { services })
    }
}

/// A Kafka connection's login.
pub struct Login {
    session: Session,
    /// The next frames are bare SASL tokens (after a v0 handshake).
    bare_tokens: bool,
}

impl Protocol for Kafka {
    const NAME: &'static str = "kafka";
    const IN_ORDER: bool = true;
    type Session = Login;
    type Error = KafkaError;

    fn core(&self) -> &Rc<Core> {
        &self.services.core
    }

    /// Kafka has no answer before a request: the connection just closes.
    fn refused(_: &Refused) -> Option<Vec<u8>> {
        None
    }

    fn session(&self, stream: &Stream, peer: Option<SocketAddr>) -> Login {
        Login { session: Session::new(stream.is_tls(), stream.certificate_user(), peer), bare_tokens: false }
    }

    fn frame_len(&self, prefix: [u8; 4]) -> Result<usize, (KafkaError, Option<Vec<u8>>)> {
        let (len, max) = (u32::from_be_bytes(prefix) as usize, self.services.core.config().frame_bytes_max);
        if len > max {
            return Err((KafkaError::FrameTooLarge { len, max }, None));
        }
        Ok(len)
    }

    async fn next(&self, login: &mut Login, frame: Vec<u8>) -> Next<KafkaError> {
        let s = &self.services;
        let frame = Bytes::from(frame).slice(4..);
        if login.bare_tokens {
            let served = sasl::bare_token(s, &mut login.session, &frame).await;
            login.bare_tokens = served.bare_tokens;
            return answer(served.outcome);
        }
        next_request(s, login, frame).await.unwrap_or_else(Next::Close)
    }

    /// Kafka's clients retry what a closed connection left unanswered.
    fn unanswered(&self, _: u32) -> Option<Vec<u8>> {
        None
    }
}

/// Decodes a request and starts serving it (SASL's served here, in order,
/// on the session); an error for a frame that does not decode, or a request
/// before a required login.
async fn next_request(s: &Rc<Services>, login: &mut Login, frame: Bytes) -> Result<Next<KafkaError>, KafkaError> {
    let (api, head, body) = match api::decode(frame)? {
        Decoded::Unsupported { correlation } => return Ok(answer(api::refuse(correlation))),
        Decoded::Served { api, head, body } => (api, head, body),
    };
    let Head { correlation, version, .. } = head;
    let served = match api.key() {
        ApiKey::SaslHandshake => api::sasl_handshake::serve_on(s, &mut login.session, correlation, version, body)?,
        ApiKey::SaslAuthenticate => {
            api::sasl_authenticate::serve_on(s, &mut login.session, correlation, version, body).await?
        }
        key => {
            if key != ApiKey::ApiVersions && !login.session.admitted(&s.core) {
                // As Kafka: a request other than ApiVersions before the login ends the connection.
                return Err(KafkaError::NotAuthenticated(head.client_id));
            }
            let lane = if key == ApiKey::Produce { Lane::Produce } else { Lane::Other };
            let serving = api.start(s, head, body, login.session.caller())?;
            let serving = Box::pin(async move { Ok(serving.await?.map(Vec::from)) });
            return Ok(Next::Serve { correlation: correlation as u32, lane, serving });
        }
    };
    login.bare_tokens = served.bare_tokens;
    Ok(answer(served.outcome))
}

/// A request answered at once.
fn answer(outcome: Outcome) -> Next<KafkaError> {
    match outcome {
        Outcome::Respond(response) => Next::Answer { response: response.into(), close: false },
        Outcome::Last(response) => Next::Answer { response: response.into(), close: true },
    }
}
