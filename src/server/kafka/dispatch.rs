//! Decodes a Kafka request, serves it, encodes the response with the
//! header version the request's API and version call for.

use crate::protocol::messages::QueueRef;
use crate::server::core::Core;
use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::list_offsets_response::{ListOffsetsPartitionResponse, ListOffsetsTopicResponse};
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsResponse, BrokerId, CreateTopicsRequest, CreateTopicsResponse, DeleteTopicsRequest,
    DeleteTopicsResponse, FetchRequest, FetchResponse, ListOffsetsRequest, ListOffsetsResponse, MetadataRequest,
    MetadataResponse, ProduceRequest, ProduceResponse, RequestHeader, ResponseHeader, TopicName,
};
use kafka_protocol::protocol::{decode_request_header_from_buffer, Decodable, Encodable, StrBytes};
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use ringmq_shards::batch::BatchBuilder;
use ringmq_shards::record::Headers;
use std::rc::Rc;

/// Kafka's error codes used here.
const UNSUPPORTED_VERSION: i16 = 35;
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;

/// The APIs served, with the versions implemented.
const SERVED: [(ApiKey, i16, i16); 7] = [
    (ApiKey::CreateTopics, 2, 4),
    (ApiKey::DeleteTopics, 1, 3),
    (ApiKey::ApiVersions, 0, 3),
    (ApiKey::Metadata, 0, 12),
    (ApiKey::Produce, 3, 9),
    (ApiKey::Fetch, 4, 11),
    (ApiKey::ListOffsets, 1, 7),
];
const NOT_LEADER_OR_FOLLOWER: i16 = 6;
const OFFSET_OUT_OF_RANGE: i16 = 1;
const CORRUPT_MESSAGE: i16 = 2;

/// Serves one request frame; the response frame (without its length).
pub async fn answer(core: &Rc<Core>, mut frame: Bytes) -> anyhow::Result<Option<Bytes>> {
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
        ApiKey::Produce if (3..=9).contains(&version) => {
            let request = ProduceRequest::decode(&mut frame, version)?;
            let response = produce(core, &request).await;
            if request.acks == 0 {
                return Ok(None);
            }
            respond(&header, key, version, &response, &mut out)?;
        }
        ApiKey::CreateTopics if (2..=4).contains(&version) => {
            let request = CreateTopicsRequest::decode(&mut frame, version)?;
            respond(&header, key, version, &create_topics(core, &request).await, &mut out)?;
        }
        ApiKey::DeleteTopics if (1..=3).contains(&version) => {
            let request = DeleteTopicsRequest::decode(&mut frame, version)?;
            respond(&header, key, version, &delete_topics(core, &request).await, &mut out)?;
        }
        ApiKey::ListOffsets if (1..=7).contains(&version) => {
            let request = ListOffsetsRequest::decode(&mut frame, version)?;
            respond(&header, key, version, &list_offsets(core, &request), &mut out)?;
        }
        ApiKey::Fetch if (4..=11).contains(&version) => {
            let request = FetchRequest::decode(&mut frame, version)?;
            respond(&header, key, version, &fetch(core, &request).await, &mut out)?;
        }
        _ => anyhow::bail!("API {key:?} v{version} is not served"),
    }
    Ok(Some(out.freeze()))
}

/// Stores each partition's records (translated into a ringmq batch: first
/// step; issue 18 stores Kafka batches natively).
async fn produce(core: &Core, request: &ProduceRequest) -> ProduceResponse {
    let mut responses = Vec::new();
    for topic in &request.topic_data {
        let mut partitions = Vec::new();
        for p in &topic.partition_data {
            let queue = QueueRef { topic: topic.name.to_string(), queue: p.index as u32 };
            let stored = match p.records.as_ref().map(|r| translate(&mut r.clone())) {
                Some(Ok(batch)) => core.append(&queue, &batch).await.map_err(|f| {
                    let code = if f.0 == crate::protocol::ErrorCode::UnknownTopic
                        || f.0 == crate::protocol::ErrorCode::UnknownQueue
                    {
                        UNKNOWN_TOPIC_OR_PARTITION
                    } else {
                        CORRUPT_MESSAGE
                    };
                    (code, f.1)
                }),
                Some(Err(e)) => Err((CORRUPT_MESSAGE, e.to_string())),
                None => Err((CORRUPT_MESSAGE, "no records".into())),
            };
            let response = PartitionProduceResponse::default().with_index(p.index);
            partitions.push(match stored {
                Ok((base, _)) => response.with_base_offset(base as i64),
                Err((code, message)) => {
                    tracing::warn!(code, %message, "kafka produce refused");
                    response.with_error_code(code).with_error_message(Some(StrBytes::from_string(message)))
                }
            });
        }
        responses
            .push(TopicProduceResponse::default().with_name(topic.name.clone()).with_partition_responses(partitions));
    }
    ProduceResponse::default().with_responses(responses)
}

/// Reads each partition this shard owns (first step: no long poll beyond one
/// short wait when nothing is there), as record batches v2.
async fn fetch(core: &Core, request: &FetchRequest) -> FetchResponse {
    let mut responses = Vec::new();
    let mut any = false;
    for topic in &request.topics {
        let mut partitions = Vec::new();
        for p in &topic.partitions {
            let queue = QueueRef { topic: topic.topic.to_string(), queue: p.partition as u32 };
            let data = PartitionData::default().with_partition_index(p.partition);
            let slot = match core.locate(&queue) {
                Ok(slot) if core.owns(slot) => slot,
                Ok(_) => {
                    partitions.push(data.with_error_code(NOT_LEADER_OR_FOLLOWER));
                    continue;
                }
                Err(_) => {
                    partitions.push(data.with_error_code(UNKNOWN_TOPIC_OR_PARTITION));
                    continue;
                }
            };
            let offset = p.fetch_offset.max(0) as u64;
            let max = p.partition_max_bytes.max(1) as usize;
            match core.read_here(slot, offset, max, std::time::Duration::ZERO).await {
                Ok(read) => {
                    let records = kafka_records(&read.bytes, offset);
                    any |= !records.is_empty();
                    let end = read.end_offset as i64;
                    let data = data.with_high_watermark(end).with_last_stable_offset(end).with_log_start_offset(0);
                    partitions.push(data.with_records(Some(encode_records(&records))));
                }
                Err(_) => partitions.push(data.with_error_code(OFFSET_OUT_OF_RANGE)),
            }
        }
        responses.push(FetchableTopicResponse::default().with_topic(topic.topic.clone()).with_partitions(partitions));
    }
    if !any && request.max_wait_ms > 0 {
        let wait = std::time::Duration::from_millis(request.max_wait_ms.min(100) as u64);
        glommio::timer::sleep(wait).await;
    }
    FetchResponse::default().with_responses(responses)
}

/// Kafka's code for a ringmq failure a topic change met.
fn topic_error(code: crate::protocol::ErrorCode) -> i16 {
    use crate::protocol::ErrorCode as E;
    match code {
        E::TopicExists => 36, // TOPIC_ALREADY_EXISTS
        E::UnknownTopic => UNKNOWN_TOPIC_OR_PARTITION,
        E::InvalidTopic => 17,   // INVALID_TOPIC_EXCEPTION
        E::InvalidRequest => 37, // INVALID_PARTITIONS
        _ => -1,                 // UNKNOWN_SERVER_ERROR
    }
}

/// Each topic as a ringmq topic of `num_partitions` queues (-1: one).
async fn create_topics(core: &Rc<Core>, request: &CreateTopicsRequest) -> CreateTopicsResponse {
    let mut topics = Vec::new();
    for t in &request.topics {
        let queues = if t.num_partitions < 0 { 1 } else { t.num_partitions as u32 };
        let ask = crate::protocol::messages::CreateTopic { name: t.name.to_string(), queues, flush: 0 };
        let result = CreatableTopicResult::default().with_name(t.name.clone()).with_num_partitions(queues as i32);
        let created = if request.validate_only { Ok(()) } else { core.create_topic(ask).await };
        topics.push(match created {
            Ok(()) => result,
            Err(f) => result.with_error_code(topic_error(f.0)).with_error_message(Some(StrBytes::from_string(f.1))),
        });
    }
    CreateTopicsResponse::default().with_topics(topics)
}

async fn delete_topics(core: &Rc<Core>, request: &DeleteTopicsRequest) -> DeleteTopicsResponse {
    let mut responses = Vec::new();
    for name in &request.topic_names {
        let result = DeletableTopicResult::default().with_name(Some(name.clone()));
        responses.push(match core.delete_topic(name).await {
            Ok(()) => result,
            Err(f) => result.with_error_code(topic_error(f.0)).with_error_message(Some(StrBytes::from_string(f.1))),
        });
    }
    DeleteTopicsResponse::default().with_responses(responses)
}

/// Earliest (-2) or latest (-1, and for now any timestamp) offset of each partition this shard owns.
fn list_offsets(core: &Core, request: &ListOffsetsRequest) -> ListOffsetsResponse {
    let topics = request
        .topics
        .iter()
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let queue = QueueRef { topic: t.name.to_string(), queue: p.partition_index as u32 };
                    let response = ListOffsetsPartitionResponse::default().with_partition_index(p.partition_index);
                    match core.locate(&queue) {
                        Ok(slot) if core.owns(slot) => {
                            let id = ringmq_shards::QueueId(slot.storage_id);
                            let (start, end) = core.storage().offsets(id).unwrap_or((0, 0));
                            let offset = if p.timestamp == -2 { start } else { end };
                            response.with_offset(offset as i64).with_timestamp(-1)
                        }
                        Ok(_) => response.with_error_code(NOT_LEADER_OR_FOLLOWER),
                        Err(_) => response.with_error_code(UNKNOWN_TOPIC_OR_PARTITION),
                    }
                })
                .collect();
            ListOffsetsTopicResponse::default().with_name(t.name.clone()).with_partitions(partitions)
        })
        .collect();
    ListOffsetsResponse::default().with_topics(topics)
}

/// The records of stored ringmq batches from `from` on, as Kafka records.
fn kafka_records(bytes: &[u8], from: u64) -> Vec<Record> {
    let mut out = Vec::new();
    for batch in ringmq_shards::batch::split(bytes) {
        let Some(header) = ringmq_shards::batch::BatchHeader::decode(batch) else { continue };
        let body = &batch[ringmq_shards::batch::HEADER_BYTES..];
        for (i, r) in ringmq_shards::record::RecordIter::new(body).enumerate() {
            let Ok(r) = r else { break };
            let offset = header.base_offset + i as u64;
            if offset < from {
                continue;
            }
            let headers = r
                .headers
                .iter()
                .map(|(k, v)| {
                    (StrBytes::from_string(String::from_utf8_lossy(k).into_owned()), Some(Bytes::copy_from_slice(v)))
                })
                .collect();
            out.push(Record {
                transactional: false,
                control: false,
                delete_horizon: false,
                partition_leader_epoch: 0,
                producer_id: -1,
                producer_epoch: -1,
                timestamp_type: TimestampType::Creation,
                offset: offset as i64,
                sequence: -1,
                timestamp: header.first_timestamp_ms + i64::from(r.timestamp_delta_ms),
                key: (!r.key.is_empty()).then(|| Bytes::copy_from_slice(r.key)),
                value: Some(Bytes::copy_from_slice(r.value)),
                headers,
            });
        }
    }
    out
}

fn encode_records(records: &[Record]) -> Bytes {
    let mut buf = BytesMut::new();
    if !records.is_empty() {
        let options = RecordEncodeOptions { version: 2, compression: Compression::None };
        if let Err(error) = RecordBatchEncoder::encode(&mut buf, records.iter(), &options) {
            tracing::error!(%error, "encoding Kafka records failed");
            return Bytes::new();
        }
    }
    buf.freeze()
}

/// A Kafka record set as one ringmq batch.
fn translate(records: &mut Bytes) -> anyhow::Result<Vec<u8>> {
    let sets = RecordBatchDecoder::decode_all(records)?;
    let records: Vec<_> = sets.iter().flat_map(|s| s.records.iter()).collect();
    let first = records.first().map_or(0, |r| r.timestamp);
    let mut batch = BatchBuilder::new(first);
    for r in records {
        let pairs: Vec<(&[u8], &[u8])> =
            r.headers.iter().map(|(k, v)| (k.as_bytes(), v.as_deref().unwrap_or_default())).collect();
        let mut encoded = Vec::new();
        Headers::encode(&pairs, &mut encoded);
        let record = ringmq_shards::Record {
            timestamp_delta_ms: (r.timestamp - first).max(0) as u32,
            key: r.key.as_deref().unwrap_or_default(),
            value: r.value.as_deref().unwrap_or_default(),
            headers: Headers::from_encoded(pairs.len() as u16, &encoded),
            ..ringmq_shards::Record::default()
        };
        batch.push(&record);
    }
    Ok(batch.finish())
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
