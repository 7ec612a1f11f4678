//! Kafka records kept exactly: generated record batches (null and empty
//! keys and values, repeated header names, null header values, timestamps
//! on either side of the batch's first, every compression) go in through
//! Produce and come back from Fetch as the producer's own bytes, decoded by
//! Kafka's codec field by field, and read by the native SDK the same; what
//! the native SDK sends reads back through Kafka's codec as it was sent.

mod common;

use bytes::{Bytes, BytesMut};
use common::kafka::{call, connect, fetch, produce_body};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use ringmq::client::{Consumer, Message, Producer, StartFrom};
use std::io::{Read, Write};
use std::time::Duration;

const BASE_TS: i64 = 1_700_000_000_000;

/// One generated record: key, value, headers, timestamp delta.
type Shape = (Option<Vec<u8>>, Option<Vec<u8>>, Vec<(String, Option<Vec<u8>>)>, i64);

fn bytes(max: usize) -> impl Strategy<Value = Option<Vec<u8>>> {
    prop::option::weighted(0.8, prop::collection::vec(any::<u8>(), 0..max))
}

fn shape() -> impl Strategy<Value = Shape> {
    // Few names, so that they repeat.
    let header = (prop::sample::select(vec!["a", "b", "trace"]), bytes(16)).prop_map(|(n, v)| (n.to_string(), v));
    let delta = prop_oneof![-5_000i64..5_000, -(1i64 << 40)..(1i64 << 40)];
    (bytes(24), bytes(300), prop::collection::vec(header, 0..5), delta)
}

fn compression() -> impl Strategy<Value = Compression> {
    prop::sample::select(vec![
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ])
}

fn record(i: usize, (key, value, headers, delta): &Shape) -> Record {
    Record {
        transactional: false,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: 0,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: TimestampType::Creation,
        offset: i as i64,
        // One batch: offset minus sequence stays the same (base sequence -1).
        sequence: i as i32 - 1,
        timestamp: BASE_TS + delta,
        key: key.clone().map(Bytes::from),
        value: value.clone().map(Bytes::from),
        headers: headers.iter().map(|(n, v)| (StrBytes::from_string(n.clone()), v.clone().map(Bytes::from))).collect(),
    }
}

/// The producer's compressions (as the Java client writes them, snappy in xerial framing).
fn compress(raw: &mut BytesMut, out: &mut BytesMut, c: Compression) -> anyhow::Result<()> {
    let packed = match c {
        Compression::None => raw.to_vec(),
        Compression::Gzip => {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(raw)?;
            e.finish()?
        }
        Compression::Snappy => {
            let mut framed = b"\x82SNAPPY\0\0\0\0\x01\0\0\0\x01".to_vec();
            let block = snap::raw::Encoder::new().compress_vec(raw)?;
            framed.extend_from_slice(&(block.len() as u32).to_be_bytes());
            framed.extend_from_slice(&block);
            framed
        }
        Compression::Lz4 => {
            let mut e = lz4_flex::frame::FrameEncoder::new(Vec::new());
            e.write_all(raw)?;
            e.finish()?
        }
        Compression::Zstd => ruzstd::encoding::compress_to_vec(&raw[..], ruzstd::encoding::CompressionLevel::Fastest),
    };
    out.extend_from_slice(&packed);
    Ok(())
}

fn inflate(compressed: &mut Bytes, c: Compression) -> anyhow::Result<Bytes> {
    let mut out = Vec::new();
    match c {
        Compression::None => out.extend_from_slice(compressed),
        Compression::Gzip => {
            flate2::read::MultiGzDecoder::new(&compressed[..]).read_to_end(&mut out)?;
        }
        Compression::Snappy => {
            let mut rest = &compressed[16..];
            while !rest.is_empty() {
                let len = u32::from_be_bytes(rest[..4].try_into()?) as usize;
                out.extend_from_slice(&snap::raw::Decoder::new().decompress_vec(&rest[4..4 + len])?);
                rest = &rest[4 + len..];
            }
        }
        Compression::Lz4 => {
            lz4_flex::frame::FrameDecoder::new(&compressed[..]).read_to_end(&mut out)?;
        }
        Compression::Zstd => {
            ruzstd::decoding::StreamingDecoder::new(&compressed[..])?.read_to_end(&mut out)?;
        }
    }
    Ok(Bytes::from(out))
}

fn encode(records: &[Record], compression: Compression) -> Bytes {
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions { version: 2, compression };
    RecordBatchEncoder::encode_with_custom_compression(&mut buf, records.iter(), &options, Some(compress)).unwrap();
    buf.freeze()
}

fn assert_decoded(decoded: &[Record], shapes: &[Shape], base_offset: i64, check_time: bool) {
    assert_eq!(decoded.len(), shapes.len());
    for (i, (r, (key, value, headers, delta))) in decoded.iter().zip(shapes).enumerate() {
        assert_eq!(r.offset, base_offset + i as i64);
        assert_eq!(r.key.as_deref(), key.as_deref(), "key of record {i}");
        assert_eq!(r.value.as_deref(), value.as_deref(), "value of record {i}");
        let got: Vec<(String, Option<Vec<u8>>)> =
            r.headers.iter().map(|(n, v)| (n.to_string(), v.as_ref().map(|v| v.to_vec()))).collect();
        assert_eq!(&got, headers, "headers of record {i}");
        if check_time {
            assert_eq!(r.timestamp, BASE_TS + delta, "timestamp of record {i}");
        }
    }
}

#[test]
fn generated_kafka_batches_come_back_byte_for_byte_and_field_by_field_through_kafka_and_the_sdk() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, kafka) = common::kafka_broker(dir.path(), &[]);
    broker.client().create_topic("p", 1, 0).unwrap();
    let consumer = std::cell::RefCell::new(Consumer::new(broker.client(), None));
    let mut runner = TestRunner::new(Config { cases: 64, failure_persistence: None, ..Config::default() });
    let strategy = (prop::collection::vec(shape(), 1..8), compression());
    runner
        .run(&strategy, |(shapes, c)| {
            let records: Vec<Record> = shapes.iter().enumerate().map(|(i, s)| record(i, s)).collect();
            let sent = encode(&records, c);
            let response: ProduceResponse =
                call(&mut connect(&kafka), ApiKey::Produce, 9, &produce_body("p", 0, sent.clone()));
            let p = &response.responses[0].partition_responses[0];
            assert_eq!(p.error_code, 0, "{:?}", p.error_message);
            let base = p.base_offset;

            // The producer's bytes, but for the base offset and leader epoch (outside the CRC).
            let fetched = fetch(&kafka, "p", base);
            let one = &fetched[..sent.len()];
            assert_eq!(i64::from_be_bytes(one[..8].try_into().unwrap()), base);
            assert_eq!(&one[8..12], &sent[8..12]);
            assert_eq!(&one[16..], &sent[16..], "the stored batch is the producer's ({c:?})");
            let mut first = Bytes::copy_from_slice(one);
            let set = RecordBatchDecoder::decode_with_custom_compression(&mut first, Some(inflate)).unwrap();
            assert_decoded(&set.records, &shapes, base, true);

            // The native SDK reads the same records.
            let mut consumer = consumer.borrow_mut();
            consumer.assign("p", &[0], StartFrom::Offset(base as u64)).unwrap();
            let got = common::consume(&mut consumer, shapes.len(), Duration::from_secs(20));
            for (m, (key, value, headers, delta)) in got.iter().zip(&shapes) {
                assert_eq!((&m.key, &m.value, &m.headers), (key, value, headers));
                assert_eq!(m.timestamp_ms, BASE_TS + delta);
            }
            assert_eq!(got.len(), shapes.len());
            Ok(())
        })
        .unwrap();
}

#[test]
fn what_the_native_sdk_sends_reads_back_through_kafkas_codec_as_sent() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, kafka) = common::kafka_broker(dir.path(), &[]);
    broker.client().create_topic("n", 1, 0).unwrap();
    let producer = Producer::new(broker.client(), Default::default());
    let mut runner = TestRunner::new(Config { cases: 32, failure_persistence: None, ..Config::default() });
    runner
        .run(&prop::collection::vec(shape(), 1..6), |shapes| {
            let mut first = None;
            for (key, value, headers, _) in &shapes {
                let m =
                    Message { key: key.clone(), value: value.clone(), headers: headers.clone(), ..Message::default() };
                let sent = producer.send("n", &m).unwrap();
                first.get_or_insert(sent.offset);
            }
            let base = first.unwrap() as i64;
            let mut fetched = fetch(&kafka, "n", base);
            let sets = RecordBatchDecoder::decode_all(&mut fetched).unwrap();
            let decoded: Vec<Record> = sets.into_iter().flat_map(|s| s.records).take(shapes.len()).collect();
            assert_decoded(&decoded, &shapes, base, false);
            Ok(())
        })
        .unwrap();
}

/// A native producer's retry of a batch to a LogAppendTime topic is told
/// by what the producer sent (the stored copy carries the broker's time):
/// stored once, both answers at its offset, the records at the broker's time.
#[test]
fn a_retried_batch_to_a_log_append_time_topic_is_stored_once_at_the_brokers_time() {
    use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
    use ringmq::protocol::api::ApiKey as Native;
    use ringmq::protocol::messages::{decode_produced, Produce, QueueRef, ACKS_DURABLE};
    let dir = tempfile::tempdir().unwrap();
    let (broker, kafka) = common::kafka_broker(dir.path(), &[]);
    let config = CreatableTopicConfig::default()
        .with_name(StrBytes::from_static_str("message.timestamp.type"))
        .with_value(Some(StrBytes::from_static_str("LogAppendTime")));
    let topic = CreatableTopic::default()
        .with_name(TopicName(StrBytes::from_static_str("stamped")))
        .with_num_partitions(1)
        .with_replication_factor(1)
        .with_configs(vec![config]);
    let request = CreateTopicsRequest::default().with_topics(vec![topic]).with_timeout_ms(10_000);
    let created: CreateTopicsResponse = call(&mut connect(&kafka), ApiKey::CreateTopics, 4, &request);
    assert_eq!(created.topics[0].error_code, 0);

    let batch = common::client_batch(7, b"once");
    let produce = || {
        let mut w = ringmq::protocol::Writer::default();
        let queue = QueueRef { topic: "stamped".into(), queue: 0 };
        Produce { queue, acks: ACKS_DURABLE, batches: vec![&batch] }.encode(&mut w);
        let (_, code, message, body) = common::Raw::connect(broker.addr()).call(Native::Produce as u16, 0, 1, &w.buf);
        assert_eq!(code, ringmq::protocol::ErrorCode::None, "{message}");
        decode_produced(&mut ringmq::protocol::Reader::new(&body)).unwrap()[0]
    };
    let before = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    let first = produce();
    assert_eq!(produce(), first, "the retry is answered where the batch was stored");
    assert_eq!(broker.client().list_offsets("stamped", 0).unwrap(), (0, 1), "stored once");
    let mut fetched = fetch(&kafka, "stamped", 0);
    let sets = RecordBatchDecoder::decode_all(&mut fetched).unwrap();
    let record = &sets[0].records[0];
    assert_eq!(record.timestamp_type, TimestampType::LogAppend);
    assert!(record.timestamp >= before, "the broker's time: {} < {before}", record.timestamp);
}
