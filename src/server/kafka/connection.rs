//! Kafka connections: 4-byte big-endian length frames, read through a
//! buffer and decoded whole as they arrive; each request is served in its
//! own task (pipelining, at most `max_inflight_per_connection` per
//! connection) and the responses are written in the order the requests
//! came, as Kafka's clients require. A frame past `max_frame_bytes`, or one
//! that does not decode, stops the reading: the requests before it are
//! answered, then the connection closes (that connection only). So does a
//! stopping shard, giving the requests read `STOP_GRACE` (a deposed
//! leader's produces are answered NOT_LEADER_OR_FOLLOWER within it).

use super::api::{self, Decoded, Head, Outcome};
use super::{sasl, KafkaError, Services};
use crate::server::auth::authorizer::Principal;
use crate::server::auth::session::Session;
use crate::server::core::in_flight::STOP_GRACE;
use crate::server::core::request_budget::{ConnectionBudget, Reserved};
use crate::server::core::stream::Stream;
use bytes::Bytes;
use futures_lite::io::{AsyncReadExt, AsyncWriteExt, BufReader, WriteHalf};
use glommio::channels::local_channel;
use glommio::net::{TcpListener, TcpStream};
use glommio::Task;
use kafka_protocol::messages::ApiKey;
use std::rc::Rc;

/// Read buffer per connection: bigger requests bypass it.
const READ_BUFFER_BYTES: usize = 64 << 10;

/// Accepts Kafka connections until the shard stops.
pub async fn accept_loop(services: Rc<Services>, listener: TcpListener) {
    let core = services.core.clone();
    loop {
        let stream = match core.tasks().unless_stopping(listener.accept()).await {
            None => return,
            Some(Ok(stream)) => stream,
            Some(Err(error)) => {
                tracing::warn!(shard = core.id(), %error, "kafka accept failed");
                glommio::timer::sleep(std::time::Duration::from_millis(10)).await;
                continue;
            }
        };
        let admitted = match stream.peer_addr().map(|peer| core.admit_connection(peer.ip(), "kafka")) {
            Ok(Ok(admitted)) => admitted,
            Ok(Err(why)) => {
                tracing::info!(shard = core.id(), %why, "a Kafka connection refused");
                continue;
            }
            Err(_) => continue,
        };
        let services = services.clone();
        glommio::spawn_local(async move {
            // It ends while the executor still runs; the shard waits for it.
            serve(services, stream).await;
            drop(admitted);
        })
        .detach();
    }
}

/// A request being served: its task's outcome.
type Serving = Task<Result<Outcome, KafkaError>>;

/// A request in the order it came, with the bytes its frame holds in the
/// request budgets until its response is written.
type Pending = (Serving, Reserved);

type Reader = BufReader<futures_lite::io::ReadHalf<Stream>>;

async fn serve(s: Rc<Services>, tcp: TcpStream) {
    let peer = tcp.peer_addr().ok();
    let Some(Some(stream)) = s.core.tasks().unless_stopping(Stream::accept_on(&s.core, tcp, "kafka")).await else {
        return;
    };
    let mut session = Session::new(stream.is_tls(), stream.certificate_user());
    let mut principal = Rc::new(Principal::new(session.principal(), peer));
    let (reader, writer) = futures_lite::io::split(stream);
    let mut reader = BufReader::with_capacity(READ_BUFFER_BYTES, reader);
    let (pending, answers) = local_channel::new_bounded(s.core.config().max_inflight_per_connection.max(1));
    let writing = glommio::spawn_local(write_in_order(answers, writer));
    let mut bare_tokens = false;
    let budget = s.core.request_budget().connection();
    loop {
        let (frame, reserved) = match s.core.tasks().unless_stopping(read_frame(&s, &budget, &mut reader)).await {
            // The shard stops: no more requests are read.
            None => break,
            Some(Ok(read)) => read,
            Some(Err(error)) => {
                tracing::debug!(shard = s.core.id(), %error, "kafka connection closed");
                break;
            }
        };
        let next = if bare_tokens {
            let served = sasl::bare_token(&s, &mut session, &frame).await;
            bare_tokens = served.bare_tokens;
            Ok(ready(served.outcome))
        } else {
            if principal.user() != session.principal().as_deref() {
                principal = Rc::new(Principal::new(session.principal(), peer));
            }
            next_request(&s, &mut session, &principal, &mut bare_tokens, frame).await
        };
        match next {
            Ok((task, last)) => {
                if pending.send((task, reserved)).await.is_err() || last {
                    break;
                }
            }
            Err(error) => {
                tracing::debug!(shard = s.core.id(), %error, "kafka connection closed");
                break;
            }
        }
    }
    drop(pending);
    let mut writing = writing;
    if s.core.tasks().unless_stopping(&mut writing).await.is_none() {
        // The requests read get STOP_GRACE to be answered, in order; the
        // connection then closes and the client retries the rest elsewhere.
        let answered = async {
            (&mut writing).await;
        };
        futures_lite::future::or(answered, glommio::timer::sleep(STOP_GRACE)).await;
    }
}

/// Reads the next frame whole (its length checked first, its bytes held in
/// the request budgets before they are allocated).
async fn read_frame(
    s: &Services,
    budget: &ConnectionBudget,
    reader: &mut Reader,
) -> Result<(Bytes, Reserved), KafkaError> {
    let mut len = [0u8; 4];
    reader.read_exact(&mut len).await?;
    let len = u32::from_be_bytes(len) as usize;
    let max = s.core.config().max_frame_bytes;
    if len > max {
        return Err(KafkaError::FrameTooLarge { len, max });
    }
    // Checked against the limit above, so the allocation is bounded.
    let reserved = budget.reserve(len).await;
    let mut frame = vec![0u8; len];
    reader.read_exact(&mut frame).await?;
    Ok((frame.into(), reserved))
}

/// Decodes a request and starts serving it (SASL's served here, in order,
/// on the session), and whether it is the last on the connection; an error
/// for a frame that does not decode, or a request before a required login.
async fn next_request(
    s: &Rc<Services>,
    session: &mut Session,
    principal: &Rc<Principal>,
    bare_tokens: &mut bool,
    frame: Bytes,
) -> Result<(Serving, bool), KafkaError> {
    let (api, head, body) = match api::decode(frame)? {
        Decoded::Unsupported { correlation } => return Ok(ready(api::refuse(correlation))),
        Decoded::Served { api, head, body } => (api, head, body),
    };
    let Head { correlation, version, .. } = head;
    let served = match api.key() {
        ApiKey::SaslHandshake => api::sasl_handshake::serve_on(s, session, correlation, version, body)?,
        ApiKey::SaslAuthenticate => api::sasl_authenticate::serve_on(s, session, correlation, version, body).await?,
        key => {
            if key != ApiKey::ApiVersions && !session.admitted(&s.core) {
                // As Kafka: a request other than ApiVersions before the login ends the connection.
                return Err(KafkaError::NotAuthenticated(head.client_id));
            }
            let serving = api.start(s, head, body, principal.clone())?;
            return Ok((glommio::spawn_local(serving), false));
        }
    };
    *bare_tokens = served.bare_tokens;
    Ok(ready(served.outcome))
}

/// A request answered at once, and whether it is the last.
fn ready(outcome: Outcome) -> (Serving, bool) {
    let last = matches!(outcome, Outcome::Last(_));
    (glommio::spawn_local(async move { Ok(outcome) }), last)
}

/// Writes each request's response as its turn comes; stops at a write
/// failure, a response that would not encode, or a refusal.
async fn write_in_order(answers: local_channel::LocalReceiver<Pending>, mut writer: WriteHalf<Stream>) {
    while let Some((task, reserved)) = answers.recv().await {
        let (response, close) = match task.await {
            Ok(Outcome::Silent) => continue,
            Ok(Outcome::Respond(response)) => (response, false),
            Ok(Outcome::Last(response)) => (response, true),
            Err(error) => {
                tracing::error!(%error, "a Kafka response did not encode");
                break;
            }
        };
        // Flushed: a TLS session may hold the last record until then.
        if writer.write_all(&response).await.is_err() || writer.flush().await.is_err() || close {
            break;
        }
        drop(reserved);
    }
    let _ = writer.close().await;
}
