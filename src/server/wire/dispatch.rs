//! Serves one request frame on the shard that received it: the header is
//! checked, the request's API found in the table (`api::TABLE`) and its
//! version checked, then the API decodes, checks, routes and serves it
//! (`api::Entry`); the response frame is made here. A refused request
//! stores nothing.

use super::api::{self, Handled, Reply};
use super::caller::Caller;
use super::codes;
use super::Services;
use crate::protocol::frame::{self, RequestHeader};
use crate::protocol::{ApiKey, ErrorCode};

/// Serves a request frame (length prefix included). None: no response (acks none).
pub async fn handle(s: &Services, frame: Vec<u8>, caller: &Caller) -> Option<Vec<u8>> {
    let started = std::time::Instant::now();
    let (response, api) = respond(s, &frame, caller).await;
    if let Caller::Client(_) = caller {
        // Counted where the client's request arrived (a forwarded one is not counted again).
        let error = response.as_deref().map(frame::response_error).filter(|code| *code != ErrorCode::None);
        let name = api.map_or("(unknown)", ApiKey::name);
        s.core.traffic().answered(name, error.map(ErrorCode::name), started.elapsed());
    }
    response
}

async fn respond(s: &Services, frame: &[u8], caller: &Caller) -> (Option<Vec<u8>>, Option<ApiKey>) {
    let (header, body) = match RequestHeader::parse(&frame[4..]) {
        Ok(parsed) => parsed,
        Err(e) => return (Some(frame::response(0, ErrorCode::Malformed, &e.to_string(), &[])), None),
    };
    let corr = header.correlation_id;
    let Some(handler) = api::find(header.api_key) else {
        let m = format!("unknown API key {}", header.api_key);
        return (Some(frame::response(corr, ErrorCode::UnknownApi, &m, &[])), None);
    };
    let key = Some(handler.key());
    if let Err(f) = api::check_version(handler, header.api_version) {
        let (code, m) = codes::failed(f);
        return (Some(frame::response(corr, code, &m, &[])), key);
    }
    let Handled { outcome, throttle } = handler.handle(s, header.api_version, frame, body, caller).await;
    let mut response = match outcome {
        Ok(Reply::Body(buf)) => frame::finish_ok_response(corr, buf),
        Ok(Reply::Frame(frame)) => frame,
        Ok(Reply::Nothing) => return (None, key),
        Err(f) => {
            let (code, m) = codes::failed(f);
            frame::response(corr, code, &m, &[])
        }
    };
    if !throttle.is_zero() {
        frame::set_throttle(&mut response, throttle.as_millis().min(u128::from(u32::MAX)) as u32);
    }
    (Some(response), key)
}
