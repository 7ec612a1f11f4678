//! Just enough HTTP/1.1 for the admin listener: one GET (or HEAD) request
//! per connection, its head read whole within `HEAD_BYTES_MAX` and the
//! admin timeout and parsed by httparse; a bodiless request only; one
//! response, then the connection closes (Prometheus, curl and browsers all
//! take that).

use crate::server::net::stream::Stream;
use futures_lite::io::{AsyncReadExt, AsyncWriteExt};
use std::time::Duration;

/// The largest request head read (request line and headers).
pub const HEAD_BYTES_MAX: usize = 16 << 10;
/// Most headers a request may carry.
const HEADERS_MAX: usize = 64;

/// A parsed request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub method: String,
    /// The path without its query.
    pub path: String,
    /// The query's `key=value` pairs, percent-decoded.
    pub query: Vec<(String, String)>,
    /// The Authorization header's value, if any.
    pub authorization: Option<String>,
}

/// A response to write.
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub content_type: &'static str,
    pub body: Vec<u8>,
    /// Extra header lines (`Name: value`).
    pub headers: Vec<String>,
}

impl Response {
    pub fn new(status: u16, content_type: &'static str, body: impl Into<Vec<u8>>) -> Response {
        Response { status, content_type, body: body.into(), headers: Vec::new() }
    }

    /// A plain-text response.
    pub fn text(status: u16, body: impl Into<String>) -> Response {
        Response::new(status, "text/plain; charset=utf-8", body.into())
    }

    /// A JSON response.
    pub fn json(body: &serde_json::Value) -> Response {
        Response::new(200, "application/json", body.to_string())
    }
}

/// Why a request could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("the connection closed before a whole request arrived")]
    Closed,
    #[error("the request head is larger than {HEAD_BYTES_MAX} bytes")]
    TooLarge,
    #[error("the request did not arrive within {0:?}")]
    Timeout(Duration),
    #[error("malformed request: {0}")]
    Malformed(String),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

impl ReadError {
    /// The status to answer with, if the client can still be answered.
    pub fn status(&self) -> Option<u16> {
        match self {
            ReadError::TooLarge => Some(431),
            ReadError::Timeout(_) => Some(408),
            ReadError::Malformed(_) => Some(400),
            ReadError::Closed | ReadError::Io(_) => None,
        }
    }
}

/// Reads one request's head within `timeout`.
pub async fn read_request(stream: &mut Stream, timeout: Duration) -> Result<Request, ReadError> {
    let read = async {
        let mut buf = Vec::with_capacity(1024);
        let mut chunk = [0u8; 2048];
        loop {
            let n = stream.read(&mut chunk).await?;
            if n == 0 {
                return Err(ReadError::Closed);
            }
            buf.extend_from_slice(&chunk[..n]);
            if let Some(request) = parse(&buf)? {
                return Ok(request);
            }
            if buf.len() > HEAD_BYTES_MAX {
                return Err(ReadError::TooLarge);
            }
        }
    };
    let late = async {
        glommio::timer::sleep(timeout).await;
        Err(ReadError::Timeout(timeout))
    };
    futures_lite::future::or(read, late).await
}

/// The request in `buf`, or None while its head is incomplete.
pub fn parse(buf: &[u8]) -> Result<Option<Request>, ReadError> {
    let mut headers = [httparse::EMPTY_HEADER; HEADERS_MAX];
    let mut parsed = httparse::Request::new(&mut headers);
    let malformed = |e: httparse::Error| ReadError::Malformed(e.to_string());
    if parsed.parse(buf).map_err(malformed)?.is_partial() {
        return Ok(None);
    }
    let header = |name: &str| {
        let found = parsed.headers.iter().find(|h| h.name.eq_ignore_ascii_case(name));
        found.map(|h| String::from_utf8_lossy(h.value).into_owned())
    };
    if header("content-length").is_some_and(|l| l.trim() != "0") || header("transfer-encoding").is_some() {
        return Err(ReadError::Malformed("the admin listener takes no request bodies".into()));
    }
    let target = parsed.path.unwrap_or("/");
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let query = query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect();
    Ok(Some(Request {
        method: parsed.method.unwrap_or("GET").to_string(),
        path: percent_decode(path),
        query,
        authorization: header("authorization"),
    }))
}

/// Decodes `%XX` escapes and `+` (a space, in a query); bad escapes stay as they are.
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |at: usize| bytes.get(at).and_then(|b| (*b as char).to_digit(16));
        match bytes[i] {
            b'%' if hex(i + 1).is_some() && hex(i + 2).is_some() => {
                out.push((hex(i + 1).unwrap_or(0) * 16 + hex(i + 2).unwrap_or(0)) as u8);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Writes `response` (its head only for a HEAD request) and closes the stream.
pub async fn write_response(stream: &mut Stream, response: &Response, head_only: bool) -> std::io::Result<()> {
    let mut head = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nCache-Control: no-store\r\nConnection: close\r\n",
        response.status,
        reason(response.status),
        response.content_type,
        response.body.len()
    );
    for line in &response.headers {
        head.push_str(line);
        head.push_str("\r\n");
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).await?;
    if !head_only {
        stream.write_all(&response.body).await?;
    }
    stream.flush().await?;
    stream.close().await
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_is_parsed_once_its_head_is_whole() {
        assert!(parse(b"GET /metrics HTTP/1.1\r\nHost: x\r\n").unwrap().is_none());
        let r = parse(b"GET /api/message?key=a%20b&topic=t+1 HTTP/1.1\r\nAuthorization: Basic eA==\r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!(r.method, "GET");
        assert_eq!(r.path, "/api/message");
        assert_eq!(r.query, vec![("key".to_string(), "a b".to_string()), ("topic".to_string(), "t 1".to_string())]);
        assert_eq!(r.authorization.as_deref(), Some("Basic eA=="));
    }

    #[test]
    fn garbage_and_bodies_are_refused() {
        assert!(matches!(parse(b"\x00\x01 nonsense\r\n\r\n"), Err(ReadError::Malformed(_))));
        let post = b"POST /x HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello";
        assert!(matches!(parse(post), Err(ReadError::Malformed(_))));
    }

    #[test]
    fn bad_escapes_stay_as_they_are() {
        assert_eq!(percent_decode("a%zz%4"), "a%zz%4");
        assert_eq!(percent_decode("%41%42"), "AB");
    }
}
