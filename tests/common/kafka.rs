//! Hand-made Kafka requests for the tests that speak the Kafka wire
//! protocol directly (bad input, a paused leader's answers).

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use kafka_protocol::records::{Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType};
use std::io::{Read, Write};
use std::net::TcpStream;

/// The correlation id of `request`'s frames.
pub const CORRELATION: i32 = 7;

pub fn send_frame(stream: &mut TcpStream, frame: &[u8]) {
    let mut out = (frame.len() as u32).to_be_bytes().to_vec();
    out.extend_from_slice(frame);
    stream.write_all(&out).unwrap();
}

/// The next response frame; None once the broker closed the connection.
pub fn read_frame(stream: &mut TcpStream) -> Option<Bytes> {
    next_frame(stream).ok()
}

/// The next response frame, or why there is none (the connection closed,
/// or the read timed out).
pub fn next_frame(stream: &mut TcpStream) -> std::io::Result<Bytes> {
    let mut len = [0u8; 4];
    stream.read_exact(&mut len)?;
    let mut frame = vec![0u8; u32::from_be_bytes(len) as usize];
    stream.read_exact(&mut frame)?;
    Ok(frame.into())
}

/// A request frame (without its length) with correlation id CORRELATION.
pub fn request<T: Encodable>(key: ApiKey, version: i16, body: &T) -> Vec<u8> {
    request_numbered(key, version, CORRELATION, body)
}

/// A request frame (without its length) with correlation id `correlation`.
pub fn request_numbered<T: Encodable>(key: ApiKey, version: i16, correlation: i32, body: &T) -> Vec<u8> {
    let header = RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(correlation)
        .with_client_id(Some(StrBytes::from_static_str("wire-test")));
    let mut buf = BytesMut::new();
    header.encode(&mut buf, key.request_header_version(version)).unwrap();
    body.encode(&mut buf, version).unwrap();
    buf.to_vec()
}

pub fn call<Q: Encodable, R: Decodable>(stream: &mut TcpStream, key: ApiKey, version: i16, body: &Q) -> R {
    send_frame(stream, &request(key, version, body));
    let mut frame = read_frame(stream).expect("a response");
    let header = ResponseHeader::decode(&mut frame, key.response_header_version(version)).unwrap();
    assert_eq!(header.correlation_id, CORRELATION);
    R::decode(&mut frame, version).unwrap()
}

/// A connection whose reads give up after 30 s.
pub fn connect(addr: &str) -> TcpStream {
    let stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(std::time::Duration::from_secs(30))).unwrap();
    stream
}

/// `n` records "k<i>"/"v<i>", of the idempotent producer (id, epoch, first sequence) if given.
pub fn records(n: usize, producer: Option<(i64, i16, i32)>) -> Vec<Record> {
    let (producer_id, producer_epoch, first) = producer.unwrap_or((-1, -1, -1));
    (0..n)
        .map(|i| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: 0,
            producer_id,
            producer_epoch,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            // The codec puts records in one batch while offset minus sequence stays the same
            // (a batch without a producer has base sequence -1).
            sequence: first + i as i32,
            timestamp: 1_700_000_000_000 + i as i64,
            key: Some(Bytes::from(format!("k{i}"))),
            value: Some(Bytes::from(format!("v{i}"))),
            headers: Default::default(),
        })
        .collect()
}

/// `records` as one uncompressed v2 record batch.
pub fn batch(records: &[Record]) -> Bytes {
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions { version: 2, compression: Compression::None };
    RecordBatchEncoder::encode(&mut buf, records.iter(), &options).unwrap();
    buf.freeze()
}

/// A Produce v9 body (acks=all) of `records` to `topic`'s partition `partition`.
pub fn produce_body(topic: &str, partition: i32, records: Bytes) -> ProduceRequest {
    let data = PartitionProduceData::default().with_index(partition).with_records(Some(records));
    let topic = TopicProduceData::default()
        .with_name(TopicName(StrBytes::from_string(topic.into())))
        .with_partition_data(vec![data]);
    ProduceRequest::default().with_acks(-1).with_timeout_ms(10_000).with_topic_data(vec![topic])
}

/// Fetch v11 of `topic` queue 0 from `offset`: the records bytes.
pub fn fetch(kafka: &str, topic: &str, offset: i64) -> Bytes {
    let partition = kafka_protocol::messages::fetch_request::FetchPartition::default()
        .with_partition(0)
        .with_fetch_offset(offset)
        .with_partition_max_bytes(1 << 20);
    let topic = kafka_protocol::messages::fetch_request::FetchTopic::default()
        .with_topic(TopicName(StrBytes::from_string(topic.into())))
        .with_partitions(vec![partition]);
    let request = FetchRequest::default().with_max_wait_ms(5_000).with_min_bytes(1).with_max_bytes(1 << 20);
    let response: FetchResponse = call(&mut connect(kafka), ApiKey::Fetch, 11, &request.with_topics(vec![topic]));
    let p = &response.responses[0].partitions[0];
    assert_eq!(p.error_code, 0);
    p.records.clone().expect("records")
}
