//! The admin listener from a client (`ringmq top`): one HTTP GET of a JSON
//! path, in the clear or over TLS, with a user's Basic credentials when
//! the broker authenticates its users.

use super::error::ClientError;
use crate::tls::{self, ClientTls};
use base64::Engine;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// The largest admin response read (an overview of thousands of queues fits).
const RESPONSE_BYTES_MAX: u64 = 64 << 20;

/// GETs `path` from the admin listener at `addr` and parses its JSON.
pub fn admin_get(
    addr: &str,
    path: &str,
    tls: Option<&ClientTls>,
    login: Option<(&str, &str)>,
    timeout: Duration,
) -> Result<serde_json::Value, ClientError> {
    let closed = |e: std::io::Error| ClientError::ConnectionClosed { addr: addr.to_string(), reason: e.to_string() };
    let socket = TcpStream::connect(addr).map_err(closed)?;
    socket.set_read_timeout(Some(timeout)).map_err(closed)?;
    socket.set_write_timeout(Some(timeout)).map_err(closed)?;
    let mut request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    if let Some((user, password)) = login {
        let basic = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        request.push_str(&format!("Authorization: Basic {basic}\r\n"));
    }
    request.push_str("\r\n");
    let mut response = Vec::new();
    match tls {
        Some(tls) => {
            let (reader, mut writer) =
                tls::handshake(socket, addr, tls).map_err(|e| ClientError::Protocol(e.to_string()))?;
            writer.write_all(request.as_bytes()).map_err(closed)?;
            // The listener closes after its response; a TLS close without notify ends the read too.
            let _ = reader.take(RESPONSE_BYTES_MAX).read_to_end(&mut response);
        }
        None => {
            let mut socket = socket;
            socket.write_all(request.as_bytes()).map_err(closed)?;
            socket.take(RESPONSE_BYTES_MAX).read_to_end(&mut response).map_err(closed)?;
        }
    }
    let text = String::from_utf8_lossy(&response);
    let (head, body) = text.split_once("\r\n\r\n").ok_or_else(|| ClientError::Protocol("no HTTP response".into()))?;
    let status = head.split(' ').nth(1).unwrap_or("");
    if status != "200" {
        return Err(ClientError::Protocol(format!("{addr}{path} answered {status}: {}", body.trim())));
    }
    serde_json::from_str(body).map_err(|e| ClientError::Protocol(format!("{addr}{path}: {e}")))
}
