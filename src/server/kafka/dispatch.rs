//! Decodes a Kafka request, serves it, and encodes the response with the
//! header version its API and version call for. The APIs and versions in
//! `SERVED` are the ones implemented and tested, and ApiVersions advertises
//! exactly them. A request is decoded whole before anything is served, so
//! nothing is stored from one that does not decode.

use super::codes::UNSUPPORTED_VERSION;
use super::{fetch, groups, metadata, produce, topics, Services};
use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{decode_request_header_from_buffer, Decodable, Encodable};

/// The APIs served, with the versions implemented.
const SERVED: [(ApiKey, i16, i16); 16] = [
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
];

/// Request header fields every version has: api key, api version, correlation id.
const HEADER_BYTES: usize = 8;

/// What the connection does with a request.
pub enum Outcome {
    /// Send this response frame.
    Respond(Bytes),
    /// Send nothing (a produce with acks=0).
    Silent,
    /// An API or version not served: send this UNSUPPORTED_VERSION answer, then close.
    Refuse(Bytes),
}

/// Serves one request frame (without its length prefix).
pub async fn answer(s: &Services, mut frame: Bytes) -> anyhow::Result<Outcome> {
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
        _ => return Ok(Outcome::Refuse(unsupported(correlation))),
    };
    let header = decode_request_header_from_buffer(&mut frame)?;
    let header_version = key.response_header_version(version);
    macro_rules! serve {
        ($request:ty, |$r:ident| $answer:expr) => {{
            let $r = <$request>::decode(&mut frame, version)?;
            respond(correlation, header_version, &$answer, version)?
        }};
    }
    let client_id = header.client_id.as_deref().unwrap_or("kafka").to_string();
    let response = match key {
        ApiKey::ApiVersions => {
            let (body, version) = api_versions(version);
            // ApiVersions always answers with a v0 response header.
            respond(correlation, 0, &body, version)?
        }
        ApiKey::Produce => {
            let r = ProduceRequest::decode(&mut frame, version)?;
            let body = produce::produce(s, &r).await;
            if r.acks == 0 {
                return Ok(Outcome::Silent);
            }
            respond(correlation, header_version, &body, version)?
        }
        ApiKey::Fetch => serve!(FetchRequest, |r| fetch::fetch(&s.core, &r).await),
        ApiKey::ListOffsets => serve!(ListOffsetsRequest, |r| fetch::list_offsets(&s.core, &r).await),
        ApiKey::Metadata => serve!(MetadataRequest, |r| metadata::metadata(&s.core, &r)),
        ApiKey::OffsetCommit => serve!(OffsetCommitRequest, |r| groups::commit(s, &r).await),
        ApiKey::OffsetFetch => serve!(OffsetFetchRequest, |r| groups::committed(s, &r)),
        ApiKey::FindCoordinator => serve!(FindCoordinatorRequest, |r| groups::find_coordinator(s, &r)),
        ApiKey::JoinGroup => serve!(JoinGroupRequest, |r| groups::join(s, &client_id, &r).await),
        ApiKey::Heartbeat => serve!(HeartbeatRequest, |r| groups::heartbeat(s, &r).await),
        ApiKey::LeaveGroup => serve!(LeaveGroupRequest, |r| groups::leave(s, &r, version)),
        ApiKey::SyncGroup => serve!(SyncGroupRequest, |r| groups::sync(s, &r).await),
        ApiKey::CreateTopics => serve!(CreateTopicsRequest, |r| topics::create(&s.core, &r).await),
        ApiKey::DeleteTopics => serve!(DeleteTopicsRequest, |r| topics::delete(&s.core, &r).await),
        ApiKey::DescribeConfigs => serve!(DescribeConfigsRequest, |r| topics::describe_configs(&s.core, &r)),
        ApiKey::InitProducerId => serve!(InitProducerIdRequest, |r| produce::init_producer_id(s, &r)),
        other => unreachable!("{other:?} is in SERVED but not served"),
    };
    Ok(Outcome::Respond(response))
}

fn respond<T: Encodable>(correlation: i32, header_version: i16, body: &T, version: i16) -> anyhow::Result<Bytes> {
    let mut out = BytesMut::new();
    ResponseHeader::default().with_correlation_id(correlation).encode(&mut out, header_version)?;
    body.encode(&mut out, version)?;
    Ok(out.freeze())
}

/// The answer to an API or version not served: the correlation id and
/// UNSUPPORTED_VERSION, laid out as ApiVersions v0 begins.
fn unsupported(correlation: i32) -> Bytes {
    let mut out = correlation.to_be_bytes().to_vec();
    out.extend_from_slice(&UNSUPPORTED_VERSION.to_be_bytes());
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
        (response.with_error_code(UNSUPPORTED_VERSION), 0)
    }
}
