//! Decodes a Kafka request, serves it, encodes the response with the
//! header version the request's API and version call for.

use crate::server::core::Core;
use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsResponse, BrokerId, MetadataRequest, MetadataResponse, RequestHeader, ResponseHeader, TopicName,
};
use kafka_protocol::protocol::{decode_request_header_from_buffer, Decodable, Encodable, StrBytes};

/// Kafka's error codes used here.
const UNSUPPORTED_VERSION: i16 = 35;
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;

/// The APIs served, with the versions implemented.
const SERVED: [(ApiKey, i16, i16); 2] = [(ApiKey::ApiVersions, 0, 3), (ApiKey::Metadata, 0, 12)];

/// Serves one request frame; the response frame (without its length).
pub fn answer(core: &Core, mut frame: Bytes) -> anyhow::Result<Bytes> {
    let header = decode_request_header_from_buffer(&mut frame)?;
    let key = ApiKey::try_from(header.request_api_key).map_err(|_| anyhow::anyhow!("unknown API key"))?;
    let version = header.request_api_version;
    let mut out = BytesMut::new();
    match key {
        ApiKey::ApiVersions => {
            // A client may ask with a version we do not know: answer v0 with UNSUPPORTED_VERSION.
            let (body, version) = api_versions(version);
            respond(&header, key, version, &body, &mut out)?;
        }
        ApiKey::Metadata if (0..=12).contains(&version) => {
            let request = MetadataRequest::decode(&mut frame, version)?;
            respond(&header, key, version, &metadata(core, &request), &mut out)?;
        }
        _ => anyhow::bail!("API {key:?} v{version} is not served"),
    }
    Ok(out.freeze())
}

fn respond<T: Encodable>(
    header: &RequestHeader,
    key: ApiKey,
    version: i16,
    body: &T,
    out: &mut BytesMut,
) -> anyhow::Result<()> {
    // ApiVersions always answers with a v0 response header.
    let header_version = if key == ApiKey::ApiVersions { 0 } else { key.response_header_version(version) };
    ResponseHeader::default().with_correlation_id(header.correlation_id).encode(out, header_version)?;
    body.encode(out, version)?;
    Ok(())
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

fn metadata(core: &Core, request: &MetadataRequest) -> MetadataResponse {
    let names: Vec<String> =
        request.topics.iter().flatten().filter_map(|t| t.name.as_ref().map(|n| n.to_string())).collect();
    let described = core.describe(&names);
    let port = |shard: u32| core.config().kafka_listen.map_or(0, |a| i32::from(a.port()) + shard as i32);
    let host = core.config().kafka_listen.map_or("127.0.0.1".to_string(), |a| a.ip().to_string());
    let brokers = described
        .shards
        .iter()
        .map(|s| {
            MetadataResponseBroker::default()
                .with_node_id(BrokerId(s.shard as i32))
                .with_host(StrBytes::from_string(host.clone()))
                .with_port(port(s.shard))
        })
        .collect();
    let mut topics: Vec<MetadataResponseTopic> = described
        .topics
        .iter()
        .map(|t| {
            let partitions = t
                .queue_shards
                .iter()
                .enumerate()
                .map(|(q, shard)| {
                    let broker = BrokerId(*shard as i32);
                    MetadataResponsePartition::default()
                        .with_partition_index(q as i32)
                        .with_leader_id(broker)
                        .with_replica_nodes(vec![broker])
                        .with_isr_nodes(vec![broker])
                })
                .collect();
            MetadataResponseTopic::default()
                .with_name(Some(TopicName(StrBytes::from_string(t.name.clone()))))
                .with_partitions(partitions)
        })
        .collect();
    for missing in names.iter().filter(|n| !described.topics.iter().any(|t| &t.name == *n)) {
        topics.push(
            MetadataResponseTopic::default()
                .with_name(Some(TopicName(StrBytes::from_string(missing.clone()))))
                .with_error_code(UNKNOWN_TOPIC_OR_PARTITION),
        );
    }
    MetadataResponse::default().with_brokers(brokers).with_controller_id(BrokerId(0)).with_topics(topics)
}
