//! One pipelined connection to one shard: requests are written as they come,
//! a reader thread routes each response to its waiter by correlation id.

use super::error::ClientError;
use super::sasl::{self, LoginError, SaslLogin};
use crate::tls::{self, ClientTls};
use ringmq_protocol::frame::{self, Response};
use ringmq_protocol::ErrorCode;
use std::collections::HashMap;
use std::io::{IoSlice, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A response as received: error code, message and body.
#[derive(Debug, Clone)]
pub struct Reply {
    pub error: ErrorCode,
    pub message: String,
    pub body: Vec<u8>,
    /// How long the broker held this request back for the client's quota.
    pub throttle_ms: u32,
}

/// A reply with the tag its receiver knows it by.
pub type Tagged = (u64, Result<Reply, ClientError>);

/// Where a reply goes: a channel and a tag the receiver knows it by.
pub type ReplyTo = (mpsc::Sender<Tagged>, u64);

/// The requests awaiting a reply, by correlation id, until the reader
/// ends: then it answers them all with why, and a request sent after that
/// is refused at once. (A socket the broker closed still takes writes: a
/// request written after the reader drained the map was never answered,
/// and an async send's callback never ran.)
#[derive(Default)]
struct Awaiting {
    replies: HashMap<u32, ReplyTo>,
    closed: Option<String>,
}

type Pending = Arc<Mutex<Awaiting>>;

/// A connection to one shard.
pub struct Connection {
    pub addr: String,
    writer: Mutex<Box<dyn Write + Send>>,
    /// Shut down when the connection is dropped, which ends the reader thread.
    socket: TcpStream,
    pending: Pending,
    next_corr: AtomicU32,
    alive: Arc<AtomicBool>,
    max_frame_bytes: usize,
}

impl Connection {
    /// Connects (the TLS handshake when `tls` is set, then the SASL login
    /// when `login` is), all within `timeout`, and starts the reader thread.
    pub fn open(
        addr: &str,
        tls: Option<&ClientTls>,
        login: Option<&SaslLogin>,
        timeout: Duration,
        max_frame_bytes: usize,
    ) -> Result<Arc<Connection>, ClientError> {
        let connect_err = |reason: String| ClientError::Connect { addr: addr.to_string(), reason };
        let sock = addr
            .to_socket_addrs()
            .map_err(|e| connect_err(e.to_string()))?
            .next()
            .ok_or_else(|| connect_err("no address".into()))?;
        let stream = TcpStream::connect_timeout(&sock, timeout).map_err(|e| connect_err(e.to_string()))?;
        stream.set_nodelay(true).map_err(|e| connect_err(e.to_string()))?;
        let socket = stream.try_clone().map_err(|e| connect_err(e.to_string()))?;
        let bound = |t: Option<Duration>| socket.set_read_timeout(t).and_then(|()| socket.set_write_timeout(t));
        bound(Some(timeout)).map_err(|e| connect_err(e.to_string()))?;
        let (mut reader, mut writer): (Box<dyn Read + Send>, Box<dyn Write + Send>) = match tls {
            Some(tls) => {
                let (reader, writer) = tls::handshake(stream, addr, tls).map_err(|e| connect_err(e.to_string()))?;
                (Box::new(reader), Box::new(writer))
            }
            None => (Box::new(stream.try_clone().map_err(|e| connect_err(e.to_string()))?), Box::new(stream)),
        };
        if let Some(login) = login {
            sasl::login(&mut reader, &mut writer, login).map_err(|e| match e {
                LoginError::Refused(code, reason) => {
                    ClientError::Authentication { addr: addr.to_string(), code, reason }
                }
                LoginError::Io(reason) => connect_err(format!("during the SASL login: {reason}")),
            })?;
        }
        bound(None).map_err(|e| connect_err(e.to_string()))?;
        let conn = Arc::new(Connection {
            addr: addr.to_string(),
            writer: Mutex::new(writer),
            socket,
            pending: Arc::default(),
            next_corr: AtomicU32::new(1),
            alive: Arc::new(AtomicBool::new(true)),
            max_frame_bytes,
        });
        let (pending, alive, a) = (conn.pending.clone(), conn.alive.clone(), addr.to_string());
        std::thread::Builder::new()
            .name("ringmq-conn".into())
            .spawn(move || read_loop(reader, pending, alive, a, max_frame_bytes))
            .map_err(|e| connect_err(e.to_string()))?;
        Ok(conn)
    }

    /// True until the connection fails.
    pub fn is_alive(&self) -> bool {
        self.alive.load(Ordering::Relaxed)
    }

    /// Sends a request (`api` at `version`); its reply, if one is expected, goes to `reply_to`.
    pub fn send(&self, (api, version): (u16, u16), body: &[u8], reply_to: Option<ReplyTo>) -> Result<(), ClientError> {
        let corr = self.next_corr.fetch_add(1, Ordering::Relaxed).max(1);
        let head = frame::request_head(api, version, corr, body.len());
        if head.len() + body.len() - 4 > self.max_frame_bytes {
            return Err(ClientError::Invalid(format!(
                "request of {} bytes exceeds the frame limit {}",
                head.len() + body.len(),
                self.max_frame_bytes
            )));
        }
        if let Some(r) = reply_to {
            let mut pending = self.pending.lock().expect("pending lock");
            if let Some(reason) = &pending.closed {
                return Err(ClientError::ConnectionClosed { addr: self.addr.clone(), reason: reason.clone() });
            }
            pending.replies.insert(corr, r);
        }
        let mut w = self.writer.lock().expect("writer lock");
        if let Err(e) = write_all_parts(&mut *w, &mut [IoSlice::new(&head), IoSlice::new(body)]) {
            self.pending.lock().expect("pending lock").replies.remove(&corr);
            self.alive.store(false, Ordering::Relaxed);
            return Err(ClientError::ConnectionClosed { addr: self.addr.clone(), reason: e.to_string() });
        }
        Ok(())
    }

    /// Sends a request and waits for its reply.
    pub fn call(&self, api: (u16, u16), body: &[u8], timeout: Duration) -> Result<Reply, ClientError> {
        let (tx, rx) = mpsc::channel();
        self.send(api, body, Some((tx, 0)))?;
        match rx.recv_timeout(timeout) {
            Ok((_, reply)) => reply,
            Err(_) => Err(ClientError::Timeout { addr: self.addr.clone(), timeout_ms: timeout.as_millis() as u64 }),
        }
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        let _ = self.socket.shutdown(std::net::Shutdown::Both);
    }
}

/// Writes `parts` in order, each write taking as many as the stream does (a
/// socket: one writev for a request's head and body, no copy into one frame).
fn write_all_parts(w: &mut dyn Write, mut parts: &mut [IoSlice<'_>]) -> std::io::Result<()> {
    while !parts.is_empty() {
        match w.write_vectored(parts) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => IoSlice::advance_slices(&mut parts, n),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Read buffer of the reader thread: responses that arrive together cost one recv.
const READ_BUFFER_BYTES: usize = 64 << 10;

fn read_loop(
    stream: Box<dyn Read + Send>,
    pending: Pending,
    alive: Arc<AtomicBool>,
    addr: String,
    max_frame_bytes: usize,
) {
    let mut stream = std::io::BufReader::with_capacity(READ_BUFFER_BYTES, stream);
    let reason = loop {
        let mut len = [0u8; 4];
        if let Err(e) = stream.read_exact(&mut len) {
            break e.to_string();
        }
        let len = u32::from_le_bytes(len) as usize;
        if len < 10 || len > max_frame_bytes.max(1 << 20) {
            break format!("broker sent a frame of {len} bytes");
        }
        let mut payload = vec![0u8; len];
        if let Err(e) = stream.read_exact(&mut payload) {
            break e.to_string();
        }
        let Ok(r) = Response::parse(&payload) else { break "broker sent an undecodable response".into() };
        if r.correlation_id == 0 {
            // A connection-level error (too many connections, frame too large): the broker closes.
            break format!("{:?}: {}", r.error, r.message);
        }
        if let Some((tx, tag)) = pending.lock().expect("pending lock").replies.remove(&r.correlation_id) {
            let _ = tx.send((
                tag,
                Ok(Reply { error: r.error, message: r.message, body: r.body.to_vec(), throttle_ms: r.throttle_ms }),
            ));
        }
    };
    alive.store(false, Ordering::Relaxed);
    let unanswered = {
        let mut pending = pending.lock().expect("pending lock");
        pending.closed = Some(reason.clone());
        std::mem::take(&mut pending.replies)
    };
    for (_, (tx, tag)) in unanswered {
        let _ = tx.send((tag, Err(ClientError::ConnectionClosed { addr: addr.clone(), reason: reason.clone() })));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The broker closed the connection and the reader ended: a request
    /// sent now is refused at once. (A closed socket still takes writes;
    /// before, the request was written, its reply awaited for ever, and an
    /// async send's callback never ran: the soak's load generator hung.)
    #[test]
    fn a_request_sent_after_the_broker_closed_the_connection_is_refused_not_left_waiting() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let closer = std::thread::spawn(move || drop(listener.accept().unwrap()));
        let conn = Connection::open(&addr, None, None, Duration::from_secs(5), 1 << 20).unwrap();
        closer.join().unwrap();
        while conn.is_alive() {
            std::thread::sleep(Duration::from_millis(1));
        }
        let (tx, rx) = mpsc::channel();
        let sent = conn.send((0, 0), b"ping", Some((tx, 7)));
        assert!(matches!(sent, Err(ClientError::ConnectionClosed { .. })), "{sent:?}");
        assert!(rx.try_recv().is_err(), "nothing was left pending");
    }
}
