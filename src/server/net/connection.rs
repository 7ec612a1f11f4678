//! The connection loop of a client listener, the same for both protocols:
//! accept and admit (`Net::admit`), the TLS handshake, frames read one
//! after another through a buffer (so requests that arrive together cost
//! one recv) with the length checked first and the bytes reserved in the
//! request budgets before the buffer is allocated, each request served in
//! its own task within the connection's in-flight bounds, and the responses
//! written either as each is ready (native: pipelined by correlation id;
//! responses ready together go out in one send) or in the order the
//! requests came (Kafka). A protocol (`Protocol`) says how frames are
//! framed and what each one asks for. When the shard stops, the connection
//! stops reading, gives what it read `STOP_GRACE`, answers the rest itself
//! where its protocol can (native) or closes (Kafka), and the shard waits
//! for it before closing storage.

use super::admission::Refused;
use super::in_flight::{InFlight, STOP_GRACE};
use super::request_budget::{ConnectionBudget, Reserved};
use super::socket::accept;
use super::stream::Stream;
use super::{Listener, Net};
use crate::server::core::Core;
use futures_lite::io::{AsyncReadExt, AsyncWriteExt, BufReader, ReadHalf, WriteHalf};
use futures_util::future::LocalBoxFuture;
use glommio::channels::local_channel::{self, LocalReceiver, LocalSender};
use glommio::net::{TcpListener, TcpStream};
use glommio::sync::{Semaphore, StaticPermit};
use glommio::Task;
use ringmq_shards::Signal;
use std::cell::{Cell, RefCell};
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

/// Read buffer per connection: bigger requests bypass it.
const READ_BUFFER_BYTES: usize = 64 << 10;
/// How long a stopping connection waits for each further request already
/// sent to it: those in its socket arrive at once.
const READ_AFTER_STOP: Duration = Duration::from_millis(10);
/// Responses up to this size are joined into one send; bigger ones are sent
/// on their own rather than copied.
const JOIN_MAX_BYTES: usize = 64 << 10;

/// A client protocol, as the connection loop serves it.
#[allow(async_fn_in_trait)] // one shard's executor: its futures are never sent between threads
pub trait Protocol: 'static {
    /// The listener's name (metrics, logs).
    const NAME: &'static str;
    /// Responses go out in the order the requests came (Kafka's clients
    /// require it) rather than as each is ready.
    const IN_ORDER: bool;

    /// A connection's own state (its login session, who it is).
    type Session;

    /// Why a connection closes (logged).
    type Error: std::fmt::Display;

    fn core(&self) -> &Rc<Core>;

    /// What a connection refused admission is sent before it is closed.
    fn refused(why: &Refused) -> Option<Vec<u8>>;

    /// A new connection's state.
    fn session(&self, stream: &Stream, peer: Option<SocketAddr>) -> Self::Session;

    /// The length after the 4-byte prefix that a frame announces, if the
    /// broker takes it; else why not, and the answer to send before closing.
    fn frame_len(&self, prefix: [u8; 4]) -> Result<usize, (Self::Error, Option<Vec<u8>>)>;

    /// What to do with a frame read whole (its 4-byte prefix first).
    async fn next(&self, session: &mut Self::Session, frame: Vec<u8>) -> Next<Self::Error>;

    /// The answer to a request still unanswered when the shard stops (None:
    /// the connection closes without one and the client retries).
    fn unanswered(&self, correlation: u32) -> Option<Vec<u8>>;

    /// The answer to a request found in the socket after the shard stopped
    /// (None, the default: the connection closes without one).
    fn unread(&self, frame: &[u8]) -> Option<Vec<u8>> {
        let _ = frame;
        None
    }
}

/// What a frame asks of the connection.
pub enum Next<E> {
    /// Answer at once (a login step, a refusal); then close if `close`.
    Answer { response: Vec<u8>, close: bool },
    /// Serve it in a task of its own, within `lane`'s in-flight bound;
    /// `correlation` names it if the shard stops before it is answered.
    Serve { correlation: u32, lane: Lane, serving: Serving<E> },
    /// Close the connection without an answer, for this reason.
    Close(E),
}

/// A request's serving: its response (None: none, acks none), or why the
/// connection closes.
pub type Serving<E> = LocalBoxFuture<'static, Result<Option<Vec<u8>>, E>>;

/// Separate in-flight bounds: produces parked by back-pressure must not keep
/// a fetch on the same connection from being read (consumers starved that
/// way at overload), nor parked long polls a produce.
#[derive(Debug, Clone, Copy)]
pub enum Lane {
    Produce,
    Other,
}

/// Accepts connections for `protocol` until the shard stops.
pub async fn accept_loop<P: Protocol>(protocol: Rc<P>, net: Rc<Net>, listener: TcpListener) {
    let core = protocol.core().clone();
    while let Some(stream) = accept(&core, &listener, P::NAME).await {
        let admitted = match net.admit_peer(&stream, Listener::Client(P::NAME)) {
            Ok(admitted) => admitted,
            Err(why) => {
                tracing::info!(shard = core.id(), listener = P::NAME, %why, "a connection refused");
                let mut stream = stream;
                if let Some(answer) = P::refused(&why) {
                    let _ = stream.write_all(&answer).await;
                }
                let _ = stream.close().await;
                continue;
            }
        };
        let (protocol, net) = (protocol.clone(), net.clone());
        glommio::spawn_local(async move {
            // It ends, answered and closed, while the executor still runs (a
            // node restarting in a new role must not leave clients waiting on
            // a dead socket): the shard waits for its connections to close.
            serve(protocol, net, stream).await;
            drop(admitted);
        })
        .detach();
    }
}

type Reader = BufReader<ReadHalf<Stream>>;

async fn serve<P: Protocol>(protocol: Rc<P>, net: Rc<Net>, tcp: TcpStream) {
    let core = protocol.core().clone();
    let peer = tcp.peer_addr().ok();
    let Some(Some(stream)) = core.tasks().unless_stopping(Stream::accept_on(&core, tcp, P::NAME)).await else {
        return;
    };
    let session = protocol.session(&stream, peer);
    let (reader, writer) = futures_lite::io::split(stream);
    let mut reader = BufReader::with_capacity(READ_BUFFER_BYTES, reader);
    let limit = core.config().inflight_per_connection_max.max(1) as u64;
    let mut connection = Connection {
        protocol,
        budget: net.request_budget().connection(),
        produce_slots: Rc::new(Semaphore::new(limit)),
        other_slots: Rc::new(Semaphore::new(limit)),
        in_flight: Rc::new(InFlight::default()),
    };
    if P::IN_ORDER {
        let (queue, answers) = local_channel::new_unbounded();
        let mut writing = glommio::spawn_local(write_in_order(answers, writer));
        let mut out = Out::InOrder(queue);
        core.tasks().unless_stopping(connection.read(&mut reader, session, &mut out)).await;
        // The writer ends once it wrote what was queued.
        drop(out);
        // The requests read get STOP_GRACE to be answered, in order; the
        // connection then closes and the client retries the rest.
        if core.tasks().unless_stopping(&mut writing).await.is_none() {
            futures_lite::future::or(async { (&mut writing).await }, glommio::timer::sleep(STOP_GRACE)).await;
        }
        return;
    }
    let writer = Rc::new(Writer::new(writer));
    let mut out = Out::AsReady(writer.clone());
    if core.tasks().unless_stopping(connection.read(&mut reader, session, &mut out)).await.is_none() {
        connection.answer_the_rest(&mut reader, &writer).await;
    }
}

/// One connection's reading side.
struct Connection<P: Protocol> {
    protocol: Rc<P>,
    budget: ConnectionBudget,
    produce_slots: Rc<Semaphore>,
    other_slots: Rc<Semaphore>,
    in_flight: Rc<InFlight>,
}

/// Where responses go.
enum Out<E> {
    AsReady(Rc<Writer>),
    InOrder(LocalSender<Pending<E>>),
}

/// A response in the order its request came, with the bytes its request
/// holds until it is written.
struct Pending<E> {
    response: Response<E>,
    held: Held,
}

enum Response<E> {
    Ready { response: Vec<u8>, close: bool },
    Serving(Task<Result<Option<Vec<u8>>, E>>),
}

/// What a request holds until its response is written (given back when
/// dropped): its frame's bytes in the request budgets and its in-flight slot.
struct Held {
    _reserved: Option<Reserved>,
    _slot: Option<StaticPermit>,
}

impl<P: Protocol> Connection<P> {
    /// Reads and serves requests until the client closes, a frame ends the
    /// connection, or the shard stops (the caller stops awaiting).
    async fn read(&mut self, reader: &mut Reader, mut session: P::Session, out: &mut Out<P::Error>) {
        loop {
            let (frame, reserved) = match self.read_frame(reader).await {
                Ok(read) => read,
                Err(None) => return,
                Err(Some((why, answer))) => {
                    tracing::debug!(shard = self.protocol.core().id(), listener = P::NAME, %why, "closing a connection");
                    if let Some(response) = answer {
                        out.answer(response, true, Held { _reserved: None, _slot: None }).await;
                    }
                    return;
                }
            };
            match self.protocol.next(&mut session, frame).await {
                Next::Answer { response, close } => {
                    out.answer(response, close, Held { _reserved: Some(reserved), _slot: None }).await;
                    if close {
                        return;
                    }
                }
                Next::Serve { correlation, lane, serving } => {
                    let slots = match lane {
                        Lane::Produce => &self.produce_slots,
                        Lane::Other => &self.other_slots,
                    };
                    let Ok(permit) = slots.clone().acquire_static_permit(1).await else { return };
                    self.serve(out, correlation, serving, Held { _reserved: Some(reserved), _slot: Some(permit) })
                        .await;
                }
                Next::Close(why) => {
                    tracing::debug!(shard = self.protocol.core().id(), listener = P::NAME, %why, "connection closed");
                    return;
                }
            }
        }
    }

    /// Reads the next frame whole, its prefix first; Err(None) when the
    /// client closed, else why the connection closes and what it is told.
    async fn read_frame(
        &self,
        reader: &mut Reader,
    ) -> Result<(Vec<u8>, Reserved), Option<(P::Error, Option<Vec<u8>>)>> {
        let mut prefix = [0u8; 4];
        reader.read_exact(&mut prefix).await.map_err(|_| None)?;
        let len = self.protocol.frame_len(prefix).map_err(Some)?;
        // The limit was checked above, and the bytes are held in the
        // connection's and the shard's budgets until the response is written.
        let reserved = self.budget.reserve(4 + len).await;
        let mut frame = vec![0u8; 4 + len];
        frame[..4].copy_from_slice(&prefix);
        reader.read_exact(&mut frame[4..]).await.map_err(|_| None)?;
        Ok((frame, reserved))
    }

    async fn serve(&self, out: &mut Out<P::Error>, correlation: u32, serving: Serving<P::Error>, held: Held) {
        match out {
            Out::InOrder(queue) => {
                let task = glommio::spawn_local(serving);
                // The writer ends only after the reader: the queue is open.
                let _ = queue.send(Pending { response: Response::Serving(task), held }).await;
            }
            Out::AsReady(writer) => {
                self.in_flight.begin(correlation);
                let (writer, in_flight) = (writer.clone(), self.in_flight.clone());
                glommio::spawn_local(async move {
                    let served = serving.await;
                    if in_flight.answer(correlation) {
                        match served {
                            Ok(Some(response)) => writer.send(response).await,
                            Ok(None) => {}
                            Err(why) => {
                                tracing::error!(%why, "a response failed; closing the connection");
                                writer.close(Duration::ZERO).await;
                            }
                        }
                    }
                    drop(held);
                })
                .detach();
            }
        }
    }

    /// The shard stops: the requests already in the socket (a node resumed
    /// from a pause finds its clients' there, read for up to `STOP_GRACE`)
    /// and those still in flight after `STOP_GRACE` are answered as the
    /// protocol can, and the connection closes; no request is left to a
    /// closed connection.
    async fn answer_the_rest(&self, reader: &mut Reader, writer: &Writer) {
        // At most STOP_GRACE in all: a client that keeps sending must not hold the shard's stop.
        let unread = async {
            while let Some(frame) = self.sent_frame(reader).await {
                if let Some(response) = self.protocol.unread(&frame) {
                    writer.send(response).await;
                }
            }
        };
        futures_lite::future::or(unread, glommio::timer::sleep(STOP_GRACE)).await;
        for correlation in self.in_flight.settle(STOP_GRACE).await {
            if let Some(response) = self.protocol.unanswered(correlation) {
                writer.send(response).await;
            }
        }
        writer.close(STOP_GRACE).await;
    }

    /// The next frame the client already sent, if it comes within
    /// `READ_AFTER_STOP` (None too for a frame the broker refuses).
    async fn sent_frame(&self, reader: &mut Reader) -> Option<Vec<u8>> {
        let read = async { self.read_frame(reader).await.ok().map(|(frame, _)| frame) };
        futures_lite::future::or(read, async {
            glommio::timer::sleep(READ_AFTER_STOP).await;
            None
        })
        .await
    }
}

impl<E> Out<E> {
    async fn answer(&mut self, response: Vec<u8>, close: bool, held: Held) {
        match self {
            Out::AsReady(writer) => {
                writer.send(response).await;
                drop(held);
            }
            Out::InOrder(queue) => {
                let _ = queue.send(Pending { response: Response::Ready { response, close }, held }).await;
            }
        }
    }
}

/// Writes each request's response as its turn comes, with those after it
/// that are made by then in the same send (one system call for the answers
/// of a group commit, where there was one each); stops at a write failure,
/// a response that fails, or one after which the connection closes.
async fn write_in_order<E: std::fmt::Display>(answers: LocalReceiver<Pending<E>>, mut writer: WriteHalf<Stream>) {
    // Taken from the queue but not served yet: the next to answer.
    let mut next: Option<Pending<E>> = None;
    loop {
        let pending = match next.take() {
            Some(pending) => pending,
            None => match answers.recv().await {
                Some(pending) => pending,
                None => break,
            },
        };
        let mut out = Answers::default();
        out.add(pending.response.answer().await, pending.held);
        if !out.done() {
            // The requests served in this tick (a group commit acks several
            // produces at once) finish, and go out in the same write.
            futures_lite::future::yield_now().await;
            while !out.done() {
                let Some(Some(pending)) = futures_lite::future::poll_once(answers.recv()).await else { break };
                match pending.response.answered().await {
                    Ok(answer) => out.add(answer, pending.held),
                    Err(response) => {
                        next = Some(Pending { response, held: pending.held });
                        break;
                    }
                }
            }
        }
        if !write_joined(&mut writer, std::mem::take(&mut out.responses)).await || out.close || out.failed {
            break;
        }
    }
    let _ = writer.close().await;
}

/// What a request answers once served.
enum Answer {
    /// Its response, and whether the connection closes after it.
    Write(Vec<u8>, bool),
    /// No response (acks none).
    Nothing,
    /// Serving it failed: the connection closes.
    Failed,
}

impl<E: std::fmt::Display> Response<E> {
    async fn answer(self) -> Answer {
        match self {
            Response::Ready { response, close } => Answer::Write(response, close),
            Response::Serving(task) => served(task.await),
        }
    }

    /// Its answer if it has one now, else itself.
    async fn answered(self) -> Result<Answer, Response<E>> {
        match self {
            Response::Ready { response, close } => Ok(Answer::Write(response, close)),
            Response::Serving(mut task) => match futures_lite::future::poll_once(&mut task).await {
                Some(result) => Ok(served(result)),
                None => Err(Response::Serving(task)),
            },
        }
    }
}

fn served<E: std::fmt::Display>(result: Result<Option<Vec<u8>>, E>) -> Answer {
    match result {
        Ok(Some(response)) => Answer::Write(response, false),
        Ok(None) => Answer::Nothing,
        Err(why) => {
            tracing::error!(%why, "a response failed; closing the connection");
            Answer::Failed
        }
    }
}

/// Responses to write together, in order, and what their requests hold
/// until they are written.
#[derive(Default)]
struct Answers {
    responses: Vec<Vec<u8>>,
    bytes: usize,
    held: Vec<Held>,
    close: bool,
    failed: bool,
}

impl Answers {
    fn add(&mut self, answer: Answer, held: Held) {
        match answer {
            Answer::Write(response, close) => {
                self.bytes += response.len();
                self.responses.push(response);
                self.close = close;
            }
            Answer::Nothing => {}
            Answer::Failed => self.failed = true,
        }
        self.held.push(held);
    }

    /// Nothing more joins: the connection closes after these, or they fill a write.
    fn done(&self) -> bool {
        self.close || self.failed || self.bytes >= JOIN_MAX_BYTES
    }
}

/// The write side of an as-ready connection. The first response to arrive
/// while no write is in progress becomes the writer: it lets the other tasks
/// made ready in the same tick queue theirs, then writes the queue until it
/// is empty.
struct Writer {
    half: RefCell<Option<WriteHalf<Stream>>>,
    queued: RefCell<Vec<Vec<u8>>>,
    writing: Cell<bool>,
    /// A write of the queue ended (`close` waits for it).
    wrote: Signal,
}

impl Writer {
    fn new(half: WriteHalf<Stream>) -> Writer {
        Writer {
            half: RefCell::new(Some(half)),
            queued: RefCell::default(),
            writing: Cell::new(false),
            wrote: Signal::default(),
        }
    }

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

    /// Writes `responses` in order; false once the connection failed (later
    /// responses are dropped with it).
    async fn write(&self, responses: Vec<Vec<u8>>) -> bool {
        let Some(mut half) = self.half.borrow_mut().take() else { return false };
        let ok = write_joined(&mut half, responses).await;
        if ok {
            *self.half.borrow_mut() = Some(half);
        }
        ok
    }
}

/// Writes `responses` in order, small ones joined into one send; false once
/// the connection failed.
async fn write_joined(half: &mut WriteHalf<Stream>, responses: Vec<Vec<u8>>) -> bool {
    if responses.is_empty() {
        return true;
    }
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
    ok && half.flush().await.is_ok()
}
