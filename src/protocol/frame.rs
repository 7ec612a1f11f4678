//! Frames: `u32 length` (bytes after it), then for a request
//! `u16 api_key, u16 api_version, u32 correlation_id, body`, and for a
//! response `u32 correlation_id, u16 error_code, u32 throttle_ms,
//! [u16 len, message if the code is not 0], body` (`throttle_ms`: how long
//! the broker held the request or its response back for the client's quota).

use super::api::ErrorCode;
use super::codec::{DecodeError, Reader, Writer};

/// Bytes of a request header after the length field.
pub const REQUEST_HEADER_BYTES: usize = 8;

/// The fixed part of a request frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestHeader {
    pub api_key: u16,
    pub api_version: u16,
    pub correlation_id: u32,
}

impl RequestHeader {
    /// Splits a request frame payload (after the length) into header and body.
    pub fn parse(payload: &[u8]) -> Result<(RequestHeader, &[u8]), DecodeError> {
        let mut r = Reader::new(payload);
        let header = RequestHeader { api_key: r.u16()?, api_version: r.u16()?, correlation_id: r.u32()? };
        Ok((header, &payload[REQUEST_HEADER_BYTES..]))
    }
}

/// Builds a complete request frame.
pub fn request(api_key: u16, api_version: u16, correlation_id: u32, body: &[u8]) -> Vec<u8> {
    let head = request_head(api_key, api_version, correlation_id, body.len());
    let mut frame = Vec::with_capacity(head.len() + body.len());
    frame.extend_from_slice(&head);
    frame.extend_from_slice(body);
    frame
}

/// The start of a request frame whose body of `body_bytes` follows: the
/// length prefix and the header.
pub fn request_head(
    api_key: u16,
    api_version: u16,
    correlation_id: u32,
    body_bytes: usize,
) -> [u8; 4 + REQUEST_HEADER_BYTES] {
    let mut head = [0u8; 4 + REQUEST_HEADER_BYTES];
    head[0..4].copy_from_slice(&((REQUEST_HEADER_BYTES + body_bytes) as u32).to_le_bytes());
    head[4..6].copy_from_slice(&api_key.to_le_bytes());
    head[6..8].copy_from_slice(&api_version.to_le_bytes());
    head[8..12].copy_from_slice(&correlation_id.to_le_bytes());
    head
}

/// Builds a complete response frame.
pub fn response(correlation_id: u32, error: ErrorCode, message: &str, body: &[u8]) -> Vec<u8> {
    let mut w = Writer::new(Vec::with_capacity(16 + message.len() + body.len()));
    w.u32(0).u32(correlation_id).u16(error as u16).u32(0);
    if error != ErrorCode::None {
        w.string(message);
    }
    w.buf.extend_from_slice(body);
    let len = (w.buf.len() - 4) as u32;
    w.buf[0..4].copy_from_slice(&len.to_le_bytes());
    w.buf
}

/// Bytes of a successful response frame's header: length, correlation id, error code, throttle.
const OK_RESPONSE_HEADER_BYTES: usize = 14;

/// Where a response frame holds its `throttle_ms`.
const THROTTLE_AT: std::ops::Range<usize> = 10..14;

/// Where a response frame holds its error code.
const ERROR_AT: std::ops::Range<usize> = 8..10;

/// A response frame's error code.
pub fn response_error(frame: &[u8]) -> ErrorCode {
    ErrorCode::from_u16(u16::from_le_bytes([frame[ERROR_AT.start], frame[ERROR_AT.start + 1]]))
}

/// Sets a response frame's `throttle_ms`.
pub fn set_throttle(frame: &mut [u8], throttle_ms: u32) {
    frame[THROTTLE_AT].copy_from_slice(&throttle_ms.to_le_bytes());
}

/// A buffer to write a successful response's body into, with room for the
/// frame header in front, so `finish_ok_response` need not copy the body
/// (a fetch response of a megabyte was copied whole, into fresh pages).
pub fn ok_response_buffer() -> Vec<u8> {
    vec![0; OK_RESPONSE_HEADER_BYTES]
}

/// The frame of a successful response whose body was written after the
/// room `ok_response_buffer` left: the same bytes as `response` with
/// `ErrorCode::None`.
pub fn finish_ok_response(correlation_id: u32, mut buf: Vec<u8>) -> Vec<u8> {
    let len = (buf.len() - 4) as u32;
    buf[0..4].copy_from_slice(&len.to_le_bytes());
    buf[4..8].copy_from_slice(&correlation_id.to_le_bytes());
    buf[8..10].copy_from_slice(&(ErrorCode::None as u16).to_le_bytes());
    buf[THROTTLE_AT].fill(0);
    buf
}

/// A decoded response frame payload (after the length).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response<'a> {
    pub correlation_id: u32,
    pub error: ErrorCode,
    /// How long the broker held the request or response back for a quota.
    pub throttle_ms: u32,
    pub message: String,
    pub body: &'a [u8],
}

impl<'a> Response<'a> {
    /// Parses a response payload.
    pub fn parse(payload: &'a [u8]) -> Result<Response<'a>, DecodeError> {
        let mut r = Reader::new(payload);
        let correlation_id = r.u32()?;
        let error = ErrorCode::from_u16(r.u16()?);
        let throttle_ms = r.u32()?;
        let mut at = 10;
        let mut message = String::new();
        if error != ErrorCode::None {
            message = r.string()?;
            at += 2 + message.len();
        }
        Ok(Response { correlation_id, error, throttle_ms, message, body: &payload[at..] })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_and_response_frames_round_trip() {
        let f = request(5, 0, 77, b"body");
        assert_eq!(u32::from_le_bytes(f[0..4].try_into().unwrap()) as usize, f.len() - 4);
        let (h, body) = RequestHeader::parse(&f[4..]).unwrap();
        assert_eq!((h.api_key, h.api_version, h.correlation_id, body), (5, 0, 77, &b"body"[..]));
        let r = response(77, ErrorCode::UnknownTopic, "no topic t", b"");
        let parsed = Response::parse(&r[4..]).unwrap();
        assert_eq!(
            (parsed.correlation_id, parsed.error, parsed.message.as_str()),
            (77, ErrorCode::UnknownTopic, "no topic t")
        );
        let ok = response(1, ErrorCode::None, "", b"xyz");
        assert_eq!(Response::parse(&ok[4..]).unwrap().body, b"xyz");
    }

    #[test]
    fn a_response_finished_in_place_equals_one_built_around_its_body() {
        for body in [&b""[..], b"xyz", &[7u8; 5000]] {
            let mut buf = ok_response_buffer();
            buf.extend_from_slice(body);
            assert_eq!(finish_ok_response(0xdead_beef, buf), response(0xdead_beef, ErrorCode::None, "", body));
        }
    }
}
