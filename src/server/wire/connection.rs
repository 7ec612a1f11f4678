//! Client connections of one shard: frames are read one after another
//! (through a buffer, so requests that arrive together cost one recv), each
//! request is served in its own task (pipelining, bounded per connection) and
//! its response is written as soon as it is ready, tagged with its
//! correlation id. Responses that become ready together (every produce a
//! flush round acknowledges, every fetch it wakes) go out in one send. A
//! framing error closes that connection only. When the shard stops, the
//! connection stops reading, answers every request it read (`InFlight`)
//! and closes.

use super::caller::Caller;
use super::{api, dispatch, sasl, Services};
use crate::protocol::frame::{self, REQUEST_HEADER_BYTES};
use crate::protocol::{ApiKey, ErrorCode};
use crate::server::auth::authorizer::Principal;
use crate::server::auth::session::Session;
use crate::server::core::context::ShardRole;
use crate::server::core::in_flight::{InFlight, STOP_GRACE};
use crate::server::core::stream::Stream;
use futures_lite::io::{AsyncReadExt, AsyncWriteExt, BufReader, ReadHalf, WriteHalf};
use glommio::net::{TcpListener, TcpStream};
use ringmq_shards::Signal;
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Duration;

/// Read buffer per connection: bigger requests bypass it.
const READ_BUFFER_BYTES: usize = 64 << 10;
/// Responses up to this size are joined into one send; bigger ones are sent
/// on their own rather than copied.
const JOIN_MAX_BYTES: usize = 64 << 10;

/// Accepts connections until the shard stops.
pub async fn accept_loop(s: Rc<Services>, listener: TcpListener) {
    let shard = s.core.id();
    loop {
        let stream = match s.core.tasks().unless_stopping(listener.accept()).await {
            None => return,
            Some(Ok(stream)) => stream,
            Some(Err(error)) => {
                tracing::warn!(shard, %error, "accept failed");
                glommio::timer::sleep(std::time::Duration::from_millis(10)).await;
                continue;
            }
        };
        let admitted = match stream.peer_addr() {
            Ok(peer) => s.core.admit_connection(peer.ip(), "native"),
            Err(e) => Err(format!("the client's address: {e}")),
        };
        let admitted = match admitted {
            Ok(admitted) => admitted,
            Err(m) => {
                let mut stream = stream;
                let _ = stream.write_all(&frame::response(0, ErrorCode::TooManyConnections, &m, &[])).await;
                let _ = stream.close().await;
                continue;
            }
        };
        let s = s.clone();
        glommio::spawn_local(async move {
            // It ends, answered and closed, while the executor still runs (a
            // node restarting in a new role must not leave clients waiting on
            // a dead socket): the shard waits for its connections to close.
            serve(s, stream).await;
            drop(admitted);
        })
        .detach();
    }
}

/// The write side. The first response to arrive while no write is in
/// progress becomes the writer: it lets the other tasks made ready in the same
/// tick queue theirs, then writes the queue until it is empty.
struct Writer {
    half: RefCell<Option<WriteHalf<Stream>>>,
    queued: RefCell<Vec<Vec<u8>>>,
    writing: Cell<bool>,
    /// A write of the queue ended (`close` waits for it).
    wrote: Signal,
}

impl Writer {
    async fn send(&self, response: Vec<u8>) {
        self.queued.borrow_mut().push(response);
        if self.writing.replace(true) {
            return;
        }
        futures_lite::future::yield_now().await;
        loop {
            let responses = std::mem::take(&mut *self.queued.borrow_mut());
            if responses.is_empty() || !self.write(responses).await {
                break;
            }
        }
        self.writing.set(false);
        self.wrote.notify();
    }

    /// Closes the connection once the responses queued so far are written
    /// (or after `limit`); later responses are dropped.
    async fn close(&self, limit: Duration) {
        let deadline = std::time::Instant::now() + limit;
        while self.writing.get() {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() || !self.wrote.wait_for(left).await {
                break;
            }
        }
        let half = self.half.borrow_mut().take();
        if let Some(mut half) = half {
            let _ = half.close().await;
        }
    }

    /// Writes `responses` in order, small ones joined; false once the
    /// connection failed (later responses are dropped with it).
    async fn write(&self, responses: Vec<Vec<u8>>) -> bool {
        let Some(mut half) = self.half.borrow_mut().take() else { return false };
        let mut joined = Vec::new();
        let mut ok = true;
        for r in responses {
            if r.len() <= JOIN_MAX_BYTES {
                joined.extend_from_slice(&r);
                continue;
            }
            ok = ok && (joined.is_empty() || half.write_all(&joined).await.is_ok());
            joined.clear();
            ok = ok && half.write_all(&r).await.is_ok();
        }
        ok = ok && (joined.is_empty() || half.write_all(&joined).await.is_ok());
        // A TLS session may hold the last record until flushed.
        ok = ok && half.flush().await.is_ok();
        if ok {
            *self.half.borrow_mut() = Some(half);
        }
        ok
    }
}

async fn serve(s: Rc<Services>, tcp: TcpStream) {
    let peer = tcp.peer_addr().ok();
    let Some(Some(stream)) = s.core.tasks().unless_stopping(Stream::accept_on(&s.core, tcp, "native")).await else {
        return;
    };
    let session = Session::new(stream.is_tls(), stream.certificate_user());
    let (reader, writer) = futures_lite::io::split(stream);
    let reader = BufReader::with_capacity(READ_BUFFER_BYTES, reader);
    let writer = Rc::new(Writer {
        half: RefCell::new(Some(writer)),
        queued: RefCell::default(),
        writing: Cell::new(false),
        wrote: Signal::default(),
    });
    let in_flight = Rc::new(InFlight::default());
    let reading = read_requests(&s, reader, &writer, &in_flight, session, peer);
    if s.core.tasks().unless_stopping(reading).await.is_none() {
        answer_the_rest(&s, &writer, &in_flight).await;
    }
}

/// The shard stops: the requests still in flight after `STOP_GRACE` are
/// answered with a retriable error, and the connection closes.
async fn answer_the_rest(s: &Services, writer: &Writer, in_flight: &InFlight) {
    let left = in_flight.settle(STOP_GRACE).await;
    let deposed = matches!(s.core.role(), ShardRole::Leader(r) if r.deposed());
    let (code, m) = match deposed {
        true => (ErrorCode::NotLeader, "this node no longer leads its broker group; refresh metadata and retry"),
        false => (ErrorCode::ShuttingDown, "the broker is shutting down; retry on another node or once it is back"),
    };
    for correlation in left {
        writer.send(frame::response(correlation, code, m, &[])).await;
    }
    writer.close(STOP_GRACE).await;
}

/// Reads and serves requests until the client closes or sends a bad frame.
async fn read_requests(
    s: &Rc<Services>,
    mut reader: BufReader<ReadHalf<Stream>>,
    writer: &Rc<Writer>,
    in_flight: &Rc<InFlight>,
    mut session: Session,
    peer: Option<std::net::SocketAddr>,
) {
    let mut principal = Rc::new(Principal::new(session.principal(), peer));
    // Produces and everything else draw on separate in-flight budgets: produces
    // parked by back-pressure must not keep a fetch on the same connection
    // from being read (consumers starved that way at overload), nor parked
    // long-poll fetches a produce.
    let limit = s.core.config().max_inflight_per_connection as u64;
    let produce_slots = Rc::new(glommio::sync::Semaphore::new(limit));
    let other_slots = Rc::new(glommio::sync::Semaphore::new(limit));
    let budget = s.core.request_budget().connection();
    loop {
        let mut len_bytes = [0u8; 4];
        if reader.read_exact(&mut len_bytes).await.is_err() {
            return;
        }
        let len = u32::from_le_bytes(len_bytes) as usize;
        if len < REQUEST_HEADER_BYTES || len > s.core.config().max_frame_bytes {
            let (code, m) = if len < REQUEST_HEADER_BYTES {
                (
                    ErrorCode::Malformed,
                    format!("frame of {len} bytes is shorter than the {REQUEST_HEADER_BYTES}-byte request header"),
                )
            } else {
                (
                    ErrorCode::FrameTooLarge,
                    format!("frame of {len} bytes exceeds max_frame_bytes {}", s.core.config().max_frame_bytes),
                )
            };
            writer.send(frame::response(0, code, &format!("{m}; closing the connection"), &[])).await;
            return;
        }
        // The limit was checked above, and the bytes are held in the
        // connection's and the shard's budgets until the response is written.
        let reserved = budget.reserve(4 + len).await;
        let mut request = vec![0u8; 4 + len];
        request[..4].copy_from_slice(&len_bytes);
        if reader.read_exact(&mut request[4..]).await.is_err() {
            return;
        }
        let correlation = u32::from_le_bytes([request[8], request[9], request[10], request[11]]);
        if correlation == 0 {
            // Its answer could not be told from a framing error's.
            let m = "correlation id 0 is reserved for framing errors; number requests from 1; closing the connection";
            writer.send(frame::response(0, ErrorCode::Malformed, m, &[])).await;
            return;
        }
        let handler = api::find(u16::from_le_bytes([request[4], request[5]]));
        let api = handler.map(|h| h.key());
        if handler.is_some_and(|h| h.by_connection()) {
            let (response, close) = sasl::serve(s, &mut session, &request).await;
            writer.send(response).await;
            if close {
                return;
            }
            continue;
        }
        if api != Some(ApiKey::ApiVersions) && !session.admitted(&s.core) {
            let m = "this broker authenticates clients: SaslHandshake and SaslAuthenticate first \
                     (ClientConfig::sasl; the CLI's --user)";
            writer.send(frame::response(correlation, ErrorCode::AuthenticationRequired, m, &[])).await;
            continue;
        }
        if principal.user() != session.principal().as_deref() {
            principal = Rc::new(Principal::new(session.principal(), peer));
        }
        let caller = Caller::Client(principal.clone());
        let is_produce = matches!(api, Some(ApiKey::Produce | ApiKey::ProduceMany));
        let slots = if is_produce { &produce_slots } else { &other_slots };
        let Ok(permit) = slots.clone().acquire_static_permit(1).await else { return };
        in_flight.begin(correlation);
        let (s, writer, in_flight) = (s.clone(), writer.clone(), in_flight.clone());
        glommio::spawn_local(async move {
            let response = dispatch::handle(&s, request, &caller).await;
            if in_flight.answer(correlation) {
                if let Some(response) = response {
                    writer.send(response).await;
                }
            }
            drop((permit, reserved));
        })
        .detach();
    }
}
