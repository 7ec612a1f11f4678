//! TLS for the SDK's blocking connections: the handshake on the socket,
//! then one session shared by the connection's writer (callers' threads)
//! and its reader thread. Each side uses its own handle of the socket, so a
//! blocked read never holds up a write; the session itself is locked only
//! while bytes are moved in or out of it, never across socket I/O.

use super::{server_name, ClientTls, TlsError};
use rustls::ClientConnection;
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::sync::{Arc, Mutex};

/// Bytes read from the socket at a time.
const READ_CHUNK_BYTES: usize = 64 << 10;

type Session = Arc<Mutex<ClientConnection>>;
/// The socket's write side, shared so that TLS records go out whole and in order.
type SocketWriter = Arc<Mutex<TcpStream>>;

/// Runs the handshake with `addr` (its certificate must name the host; the
/// socket's timeouts bound it), then gives the reader and the writer of the session.
pub fn handshake(socket: TcpStream, addr: &str, tls: &ClientTls) -> Result<(TlsReader, TlsWriter), TlsError> {
    let name = server_name(addr)?;
    let mut session = ClientConnection::new(tls.config(), name).map_err(|e| TlsError(format!("TLS: {e}")))?;
    let mut sock = socket;
    while session.is_handshaking() {
        session.complete_io(&mut sock).map_err(|e| TlsError(handshake_error(&e)))?;
    }
    let read_half = sock.try_clone().map_err(|e| TlsError(format!("the socket: {e}")))?;
    let session = Arc::new(Mutex::new(session));
    let socket = Arc::new(Mutex::new(sock));
    let reader = TlsReader {
        session: session.clone(),
        socket: read_half,
        writer: socket.clone(),
        raw: vec![0; READ_CHUNK_BYTES],
        start: 0,
        end: 0,
    };
    Ok((reader, TlsWriter { session, socket }))
}

/// What a failed handshake tells the user: rustls's reason (unknown CA,
/// expired certificate, wrong name) or that the broker closed or does not speak TLS.
fn handshake_error(e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::UnexpectedEof | io::ErrorKind::ConnectionReset => {
            format!("the TLS handshake failed: the broker closed the connection ({e}); does it serve TLS, and does it need a client certificate (--cert, --key)?")
        }
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => "the TLS handshake timed out".into(),
        _ => format!("the TLS handshake failed: {e}"),
    }
}

/// The session's plaintext, read by the connection's reader thread.
pub struct TlsReader {
    session: Session,
    socket: TcpStream,
    writer: SocketWriter,
    /// Bytes read off the socket that the session has not taken yet.
    raw: Vec<u8>,
    start: usize,
    end: usize,
}

impl Read for TlsReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            let mut session = self.session.lock().expect("tls session lock");
            match session.reader().read(buf) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
            if self.start < self.end {
                self.start += session.read_tls(&mut &self.raw[self.start..self.end])?;
                session.process_new_packets().map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
                // Only a post-handshake message (a key update) makes the reader write.
                let mut out = Vec::new();
                while session.wants_write() {
                    session.write_tls(&mut out)?;
                }
                drop(session);
                if !out.is_empty() {
                    self.writer.lock().expect("tls socket lock").write_all(&out)?;
                }
                continue;
            }
            drop(session);
            let n = self.socket.read(&mut self.raw)?;
            if n == 0 {
                return Ok(0);
            }
            (self.start, self.end) = (0, n);
        }
    }
}

/// Writes plaintext through the session; shared by the connection's callers.
pub struct TlsWriter {
    session: Session,
    socket: SocketWriter,
}

impl Write for TlsWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.write_vectored(&[io::IoSlice::new(buf)])
    }

    /// A request's header and body go into the same TLS records.
    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        let mut socket = self.socket.lock().expect("tls socket lock");
        let mut out = Vec::with_capacity(bufs.iter().map(|b| b.len()).sum::<usize>() + 64);
        let n = {
            let mut session = self.session.lock().expect("tls session lock");
            let n = session.writer().write_vectored(bufs)?;
            while session.wants_write() {
                session.write_tls(&mut out)?;
            }
            n
        };
        socket.write_all(&out)?;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
