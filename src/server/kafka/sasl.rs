//! SASL on a Kafka connection, served in order by the connection itself on
//! its session: the handshake and authentication requests by their API
//! files (`api/sasl_handshake.rs`, `api/sasl_authenticate.rs`), and after
//! a v0 handshake the tokens as bare frames (kafka-python), here.

use super::api::Outcome;
use super::{KafkaError, Services};
use crate::server::auth::session::{Session, Step};
use bytes::Bytes;

/// What the connection does after a SASL request.
pub struct Served {
    /// What to send (`Outcome::Last` after a failed authentication).
    pub outcome: Outcome,
    /// The next frames are bare tokens (after a successful v0 handshake).
    pub bare_tokens: bool,
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
pub fn encoded(response: Result<Bytes, KafkaError>, last: bool) -> Outcome {
    match response {
        Ok(frame) if last => Outcome::Last(frame),
        Ok(frame) => Outcome::Respond(frame),
        Err(error) => {
            tracing::error!(%error, "a SASL response did not encode");
            Outcome::Last(Bytes::new())
        }
    }
}
