//! Built without the `tls` feature: no `ClientTls` can be made, so every
//! connection is in the clear and the TLS branches are never taken.

use super::{ClientFiles, TlsError};
use std::io;
use std::net::TcpStream;

/// A client's TLS configuration: none can exist without the `tls` feature.
#[derive(Debug, Clone)]
pub enum ClientTls {}

impl ClientTls {
    /// Refuses: this build has no TLS.
    pub fn load(_files: &ClientFiles) -> Result<ClientTls, TlsError> {
        Err(TlsError("this build of ringmq-client has no TLS: turn on its `tls` feature".into()))
    }
}

/// The session's plaintext reader (never made without the feature).
pub enum TlsReader {}

/// The session's plaintext writer (never made without the feature).
pub enum TlsWriter {}

/// Never called: no `ClientTls` exists to call it with.
pub fn handshake(_socket: TcpStream, _addr: &str, tls: &ClientTls) -> Result<(TlsReader, TlsWriter), TlsError> {
    match *tls {}
}

impl io::Read for TlsReader {
    fn read(&mut self, _buf: &mut [u8]) -> io::Result<usize> {
        match *self {}
    }
}

impl io::Write for TlsWriter {
    fn write(&mut self, _buf: &[u8]) -> io::Result<usize> {
        match *self {}
    }

    fn flush(&mut self) -> io::Result<()> {
        match *self {}
    }
}
