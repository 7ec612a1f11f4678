//! Decodes a Kafka request, serves it, and encodes the response with the
//! header version its API and version call for. The APIs and versions in
//! `SERVED` are the ones implemented and tested, and ApiVersions advertises
//! exactly them. A request is decoded whole before anything is served, so
//! nothing is stored from one that does not decode.

use super::{fetch, groups, metadata, produce, topics, Services};
use crate::server::auth::authorizer::Principal;
use crate::server::auth::quotas;
use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{decode_request_header_from_buffer, Decodable, Encodable};
use kafka_protocol::ResponseError;
use std::rc::Rc;
use std::time::Duration;

/// The APIs served, with the versions implemented.
const SERVED: [(ApiKey, i16, i16); 18] = [
    (ApiKey::Produce, 3, 9),
    (ApiKey::Fetch, 4, 11),
    (ApiKey::ListOffsets, 1, 7),
    (ApiKey::Metadata, 0, 12),
    (ApiKey::OffsetCommit, 2, 8),
    (ApiKey::OffsetFetch, 1, 7),
    (ApiKey::FindCoordinator, 0, 3),
    (ApiKey::JoinGroup, 0, 7),
    (ApiKey::Heartbeat, 0, 4),
    (ApiKey::LeaveGroup, 0, 4),
    (ApiKey::SyncGroup, 0, 5),
    (ApiKey::ApiVersions, 0, 3),
    (ApiKey::CreateTopics, 2, 4),
    (ApiKey::DeleteTopics, 1, 3),
    (ApiKey::DescribeConfigs, 1, 4),
    (ApiKey::InitProducerId, 0, 4),
    (ApiKey::SaslHandshake, 0, 1),
    (ApiKey::SaslAuthenticate, 0, 2),
];

/// Request header fields every version has: api key, api version, correlation id.
const HEADER_BYTES: usize = 8;

/// What the connection does with a request.
pub enum Outcome {
    /// Send this response frame (its length first).
    Respond(Bytes),
    /// Send nothing (a produce with acks=0).
    Silent,
    /// Send this response, then close the connection (an API or version not
    /// served, answered UNSUPPORTED_VERSION; a failed authentication).
    Last(Bytes),
}

/// A decoded request of an API and version we serve.
pub enum Request {
    ApiVersions,
    Produce(ProduceRequest),
    Fetch(FetchRequest),
    ListOffsets(ListOffsetsRequest),
    Metadata(MetadataRequest),
    OffsetCommit(OffsetCommitRequest),
    OffsetFetch(OffsetFetchRequest),
    FindCoordinator(FindCoordinatorRequest),
    JoinGroup(JoinGroupRequest),
    Heartbeat(HeartbeatRequest),
    LeaveGroup(LeaveGroupRequest),
    SyncGroup(SyncGroupRequest),
    CreateTopics(CreateTopicsRequest),
    DeleteTopics(DeleteTopicsRequest),
    DescribeConfigs(DescribeConfigsRequest),
    InitProducerId(InitProducerIdRequest),
    /// Served by the connection on its session (`sasl.rs`).
    SaslHandshake(SaslHandshakeRequest),
    SaslAuthenticate(SaslAuthenticateRequest),
}

/// A request frame, decoded whole.
pub enum Decoded {
    Served {
        correlation: i32,
        version: i16,
        client_id: String,
        request: Box<Request>,
    },
    /// An API or version that is not served.
    Unsupported {
        correlation: i32,
    },
}

/// Decodes a request frame (without its length prefix); an error if it
/// does not decode.
pub fn decode(mut frame: Bytes) -> anyhow::Result<Decoded> {
    if frame.len() < HEADER_BYTES {
        anyhow::bail!("a Kafka request header takes {HEADER_BYTES} bytes; the frame has {}", frame.len());
    }
    let (key, version) = (i16::from_be_bytes([frame[0], frame[1]]), i16::from_be_bytes([frame[2], frame[3]]));
    let correlation = i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
    let served = SERVED.iter().find(|(k, min, max)| *k as i16 == key && (*min..=*max).contains(&version));
    let key = match (served, ApiKey::try_from(key)) {
        (Some((key, ..)), _) => *key,
        // A client asks for ApiVersions first, maybe at a version newer than
        // ours: Kafka answers v0 with UNSUPPORTED_VERSION and the versions it has.
        (None, Ok(ApiKey::ApiVersions)) => ApiKey::ApiVersions,
        _ => return Ok(Decoded::Unsupported { correlation }),
    };
    let header = decode_request_header_from_buffer(&mut frame)?;
    let client_id = header.client_id.as_deref().unwrap_or("kafka").to_string();
    let frame = &mut frame;
    let request = match key {
        // Its body may be of a version we do not know: only the header matters.
        ApiKey::ApiVersions => Request::ApiVersions,
        ApiKey::Produce => Request::Produce(Decodable::decode(frame, version)?),
        ApiKey::Fetch => Request::Fetch(Decodable::decode(frame, version)?),
        ApiKey::ListOffsets => Request::ListOffsets(Decodable::decode(frame, version)?),
        ApiKey::Metadata => Request::Metadata(Decodable::decode(frame, version)?),
        ApiKey::OffsetCommit => Request::OffsetCommit(Decodable::decode(frame, version)?),
        ApiKey::OffsetFetch => Request::OffsetFetch(Decodable::decode(frame, version)?),
        ApiKey::FindCoordinator => Request::FindCoordinator(Decodable::decode(frame, version)?),
        ApiKey::JoinGroup => Request::JoinGroup(Decodable::decode(frame, version)?),
        ApiKey::Heartbeat => Request::Heartbeat(Decodable::decode(frame, version)?),
        ApiKey::LeaveGroup => Request::LeaveGroup(Decodable::decode(frame, version)?),
        ApiKey::SyncGroup => Request::SyncGroup(Decodable::decode(frame, version)?),
        ApiKey::CreateTopics => Request::CreateTopics(Decodable::decode(frame, version)?),
        ApiKey::DeleteTopics => Request::DeleteTopics(Decodable::decode(frame, version)?),
        ApiKey::DescribeConfigs => Request::DescribeConfigs(Decodable::decode(frame, version)?),
        ApiKey::InitProducerId => Request::InitProducerId(Decodable::decode(frame, version)?),
        ApiKey::SaslHandshake => Request::SaslHandshake(Decodable::decode(frame, version)?),
        ApiKey::SaslAuthenticate => Request::SaslAuthenticate(Decodable::decode(frame, version)?),
        other => unreachable!("{other:?} is in SERVED but not decoded"),
    };
    Ok(Decoded::Served { correlation, version, client_id, request: Box::new(request) })
}

/// The answer to a request that is not served: UNSUPPORTED_VERSION, then close.
pub fn refuse(correlation: i32) -> Outcome {
    Outcome::Last(unsupported(correlation))
}

/// Serves one decoded request; an error only if its response does not encode.
pub async fn answer(
    s: &Services,
    correlation: i32,
    version: i16,
    client_id: String,
    request: Box<Request>,
    p: Rc<Principal>,
) -> anyhow::Result<Outcome> {
    let reply =
        |key: ApiKey, body: &dyn Encode| respond(correlation, key.response_header_version(version), body, version);
    // Every request but ApiVersions counts against the client's quota (a
    // produce's records too); the wait is each response's throttle time.
    let produced = match &*request {
        Request::ApiVersions => None,
        Request::Produce(r) => Some(produce::record_bytes(r)),
        _ => Some(0),
    };
    let waited = match produced {
        Some(bytes) => quotas::before(&s.core, p.user(), &client_id, bytes).await,
        None => Duration::ZERO,
    };
    let t = waited.as_millis().min(i32::MAX as u128) as i32;
    s.core.traffic().request(api_name(&request), None);
    let response = match *request {
        Request::ApiVersions => {
            let (body, version) = api_versions(version);
            // ApiVersions always answers with a v0 response header.
            respond(correlation, 0, &body, version)?
        }
        Request::Produce(r) => {
            let body = produce::produce(s, &p, &r).await;
            if r.acks == 0 {
                return Ok(Outcome::Silent);
            }
            reply(ApiKey::Produce, &body.with_throttle_time_ms(t))?
        }
        Request::Fetch(r) => {
            let body = fetch::fetch(&s.core, &p, &r).await;
            let fetched = fetch::record_bytes(&body);
            let more = quotas::after_fetch(&s.core, p.user(), &client_id, fetched).await;
            let t = (waited + more).as_millis().min(i32::MAX as u128) as i32;
            reply(ApiKey::Fetch, &body.with_throttle_time_ms(t))?
        }
        Request::ListOffsets(r) => {
            reply(ApiKey::ListOffsets, &fetch::list_offsets(&s.core, &p, &r).await.with_throttle_time_ms(t))?
        }
        Request::Metadata(r) => reply(ApiKey::Metadata, &metadata::metadata(&s.core, &p, &r).with_throttle_time_ms(t))?,
        Request::OffsetCommit(r) => {
            reply(ApiKey::OffsetCommit, &groups::commit(s, &p, &r).await.with_throttle_time_ms(t))?
        }
        Request::OffsetFetch(r) => reply(ApiKey::OffsetFetch, &groups::committed(s, &p, &r).with_throttle_time_ms(t))?,
        Request::FindCoordinator(r) => {
            reply(ApiKey::FindCoordinator, &groups::find_coordinator(s, &p, &r).with_throttle_time_ms(t))?
        }
        Request::JoinGroup(r) => {
            reply(ApiKey::JoinGroup, &groups::join(s, &p, &client_id, &r).await.with_throttle_time_ms(t))?
        }
        Request::Heartbeat(r) => {
            reply(ApiKey::Heartbeat, &groups::heartbeat(s, &p, &r).await.with_throttle_time_ms(t))?
        }
        Request::LeaveGroup(r) => {
            reply(ApiKey::LeaveGroup, &groups::leave(s, &p, &r, version).with_throttle_time_ms(t))?
        }
        Request::SyncGroup(r) => reply(ApiKey::SyncGroup, &groups::sync(s, &p, &r).await.with_throttle_time_ms(t))?,
        Request::CreateTopics(r) => {
            reply(ApiKey::CreateTopics, &topics::create(&s.core, &p, &r).await.with_throttle_time_ms(t))?
        }
        Request::DeleteTopics(r) => {
            reply(ApiKey::DeleteTopics, &topics::delete(&s.core, &p, &r).await.with_throttle_time_ms(t))?
        }
        Request::DescribeConfigs(r) => {
            reply(ApiKey::DescribeConfigs, &topics::describe_configs(&s.core, &p, &r).with_throttle_time_ms(t))?
        }
        Request::InitProducerId(r) => {
            reply(ApiKey::InitProducerId, &produce::init_producer_id(s, &p, &r).with_throttle_time_ms(t))?
        }
        Request::SaslHandshake(_) | Request::SaslAuthenticate(_) => {
            anyhow::bail!("SASL requests are served by the connection")
        }
    };
    Ok(Outcome::Respond(response))
}

/// A request's API as metrics name it (Kafka's errors are per partition, in
/// the response: the produce and fetch ones are counted per topic).
fn api_name(request: &Request) -> &'static str {
    match request {
        Request::ApiVersions => "kafka_ApiVersions",
        Request::Produce(_) => "kafka_Produce",
        Request::Fetch(_) => "kafka_Fetch",
        Request::ListOffsets(_) => "kafka_ListOffsets",
        Request::Metadata(_) => "kafka_Metadata",
        Request::OffsetCommit(_) => "kafka_OffsetCommit",
        Request::OffsetFetch(_) => "kafka_OffsetFetch",
        Request::FindCoordinator(_) => "kafka_FindCoordinator",
        Request::JoinGroup(_) => "kafka_JoinGroup",
        Request::Heartbeat(_) => "kafka_Heartbeat",
        Request::LeaveGroup(_) => "kafka_LeaveGroup",
        Request::SyncGroup(_) => "kafka_SyncGroup",
        Request::CreateTopics(_) => "kafka_CreateTopics",
        Request::DeleteTopics(_) => "kafka_DeleteTopics",
        Request::DescribeConfigs(_) => "kafka_DescribeConfigs",
        Request::InitProducerId(_) => "kafka_InitProducerId",
        Request::SaslHandshake(_) => "kafka_SaslHandshake",
        Request::SaslAuthenticate(_) => "kafka_SaslAuthenticate",
    }
}

/// A response body, encodable at a version (object-safe, unlike `Encodable`).
pub trait Encode {
    fn encode_at(&self, out: &mut BytesMut, version: i16) -> anyhow::Result<()>;
}

impl<T: Encodable> Encode for T {
    fn encode_at(&self, out: &mut BytesMut, version: i16) -> anyhow::Result<()> {
        self.encode(out, version)
    }
}

/// The response frame, its 4-byte length first.
pub fn respond(correlation: i32, header_version: i16, body: &dyn Encode, version: i16) -> anyhow::Result<Bytes> {
    let mut out = BytesMut::from(&[0u8; 4][..]);
    ResponseHeader::default().with_correlation_id(correlation).encode(&mut out, header_version)?;
    body.encode_at(&mut out, version)?;
    let len = (out.len() - 4) as u32;
    out[..4].copy_from_slice(&len.to_be_bytes());
    Ok(out.freeze())
}

/// The answer to an API or version not served: the correlation id and
/// UNSUPPORTED_VERSION, laid out as ApiVersions v0 begins (length first).
fn unsupported(correlation: i32) -> Bytes {
    let mut out = 6u32.to_be_bytes().to_vec();
    out.extend_from_slice(&correlation.to_be_bytes());
    out.extend_from_slice(&ResponseError::UnsupportedVersion.code().to_be_bytes());
    Bytes::from(out)
}

fn api_versions(asked: i16) -> (ApiVersionsResponse, i16) {
    let keys = SERVED
        .iter()
        .map(|(k, min, max)| {
            ApiVersion::default().with_api_key(*k as i16).with_min_version(*min).with_max_version(*max)
        })
        .collect();
    let response = ApiVersionsResponse::default().with_api_keys(keys);
    if (0..=3).contains(&asked) {
        (response, asked)
    } else {
        (response.with_error_code(ResponseError::UnsupportedVersion.code()), 0)
    }
}
