//! The Kafka listener against hand-made requests: bad input is refused
//! (unknown APIs and versions with UNSUPPORTED_VERSION, a frame that does
//! not decode by closing that connection only, a wrong CRC, an oversized or
//! inflating batch, an unknown topic), nothing of a refused request is
//! stored, idempotent producers' retries are stored once, a fetch at the
//! end waits for the next record, the listener admits connections as the
//! native one does, and DescribeCluster serves the broker endpoint only.

mod common;

use bytes::{Bytes, BytesMut};
use common::kafka::{batch, call, connect, produce_body, read_frame, records, request, send_frame};
use common::Broker;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, StrBytes};
use kafka_protocol::records::{Compression, Record, RecordBatchEncoder, RecordEncodeOptions};
use std::io::Write;
use std::net::TcpStream;

const UNSUPPORTED_VERSION: i16 = 35;

/// A broker with its Kafka listener, and a topic `t` of one queue.
fn broker(dir: &std::path::Path, extra: &[&str]) -> (Broker, String) {
    let (broker, kafka) = common::kafka_broker(dir, extra);
    broker.client().create_topic("t", 1, 0).unwrap();
    (broker, kafka)
}

/// Produce v9 of `records` to `topic` queue 0: the partition's error code and base offset.
fn produce(stream: &mut TcpStream, topic: &str, records: Bytes) -> (i16, i64) {
    let response: ProduceResponse = call(stream, ApiKey::Produce, 9, &produce_body(topic, 0, records));
    let p = &response.responses[0].partition_responses[0];
    if p.error_code != 0 {
        eprintln!("produce refused: {} {:?}", p.error_code, p.error_message);
    }
    (p.error_code, p.base_offset)
}

#[test]
fn unknown_apis_and_versions_get_unsupported_version_and_the_broker_stays_up() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, kafka) = broker(dir.path(), &[]);
    // An API key Kafka does not have, and Produce v2 (we serve v3 and up).
    for (key, version) in [(999i16, 0i16), (ApiKey::Produce as i16, 2)] {
        let mut s = connect(&kafka);
        let mut frame = key.to_be_bytes().to_vec();
        frame.extend_from_slice(&version.to_be_bytes());
        frame.extend_from_slice(&7i32.to_be_bytes());
        frame.extend_from_slice(&[0, 0]);
        send_frame(&mut s, &frame);
        let answer = read_frame(&mut s).expect("an answer");
        assert_eq!(&answer[..], &[0, 0, 0, 7, 0, 35], "correlation id 7, UNSUPPORTED_VERSION");
        assert!(read_frame(&mut s).is_none(), "then the connection is closed");
    }
    // ApiVersions v4, as the 4.x Java client asks first: answered at v4, Produce advertised
    // from v0 (librdkafka's compression check) though v0-2 are refused above.
    let request = ApiVersionsRequest::default()
        .with_client_software_name(StrBytes::from_static_str("test"))
        .with_client_software_version(StrBytes::from_static_str("1"));
    let v4: ApiVersionsResponse = call(&mut connect(&kafka), ApiKey::ApiVersions, 4, &request);
    assert_eq!(v4.error_code, 0);
    let produce = v4.api_keys.iter().find(|k| k.api_key == ApiKey::Produce as i16).expect("Produce");
    assert_eq!((produce.min_version, produce.max_version), (0, 9));
    // ApiVersions newer than ours: answered in v0 with the error and what we serve.
    let mut s = connect(&kafka);
    // ApiVersions v9, which the codec cannot write: header v2 (no client id, no tags), no body.
    send_frame(&mut s, &[0, 18, 0, 9, 0, 0, 0, 7, 0xff, 0xff, 0]);
    let mut frame = read_frame(&mut s).unwrap();
    ResponseHeader::decode(&mut frame, 0).unwrap();
    let versions = ApiVersionsResponse::decode(&mut frame, 0).unwrap();
    assert_eq!(versions.error_code, UNSUPPORTED_VERSION);
    assert!(versions.api_keys.iter().any(|k| k.api_key == ApiKey::Fetch as i16 && k.max_version == 11));
    let metadata: MetadataResponse = call(&mut connect(&kafka), ApiKey::Metadata, 12, &MetadataRequest::default());
    assert_eq!(metadata.topics.len(), 1, "the broker still answers");
    drop(broker);
}

#[test]
fn a_frame_that_does_not_decode_closes_its_connection_only_and_stores_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, kafka) = broker(dir.path(), &[]);
    let mut bystander = connect(&kafka);
    let good = produce(&mut connect(&kafka), "t", batch(&records(3, None)));
    assert_eq!(good, (0, 0));

    let mut truncated = request(ApiKey::Produce, 9, &{
        let p = PartitionProduceData::default().with_index(0).with_records(Some(batch(&records(3, None))));
        let t = TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_static_str("t")))
            .with_partition_data(vec![p]);
        ProduceRequest::default().with_acks(-1).with_timeout_ms(1000).with_topic_data(vec![t])
    });
    truncated.truncate(truncated.len() - 10);
    // Metadata v1 whose topic array says i32::MAX entries (sized from the wire, it would abort the process).
    let mut huge = request(ApiKey::Metadata, 1, &MetadataRequest::default().with_topics(Some(vec![])));
    let n = huge.len();
    huge[n - 4..].copy_from_slice(&i32::MAX.to_be_bytes());
    for frame in [truncated, huge, vec![0, 3, 0]] {
        let mut s = connect(&kafka);
        send_frame(&mut s, &frame);
        assert!(read_frame(&mut s).is_none(), "a frame that does not decode closes the connection");
    }
    let metadata: MetadataResponse = call(&mut bystander, ApiKey::Metadata, 12, &MetadataRequest::default());
    assert_eq!(metadata.topics.len(), 1, "other connections go on");
    assert_eq!(broker.client().list_offsets("t", 0).unwrap(), (0, 3), "the truncated produce stored nothing");
}

#[test]
fn refused_batches_store_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, kafka) = broker(dir.path(), &["--batch-bytes-max", "65536", "--inflated-bytes-max", "1048576"]);
    let mut s = connect(&kafka);
    let mut wrong_crc = batch(&records(3, None)).to_vec();
    let last = wrong_crc.len() - 1;
    wrong_crc[last] ^= 0xff;
    assert_eq!(produce(&mut s, "t", wrong_crc.into()).0, 2, "CORRUPT_MESSAGE");
    assert_eq!(produce(&mut s, "nope", batch(&records(3, None))).0, 3, "UNKNOWN_TOPIC_OR_PARTITION");
    let big: Vec<Record> =
        records(1, None).into_iter().map(|r| Record { value: Some(Bytes::from(vec![b'x'; 70_000])), ..r }).collect();
    assert_eq!(produce(&mut s, "t", batch(&big)).0, 10, "MESSAGE_TOO_LARGE");
    // 8 MiB of zeros gzips to a few KiB: refused once it inflates past the limit.
    let bomb: Vec<Record> =
        records(1, None).into_iter().map(|r| Record { value: Some(Bytes::from(vec![0u8; 8 << 20])), ..r }).collect();
    let gzip = |raw: &mut BytesMut, out: &mut BytesMut, _: Compression| -> anyhow::Result<()> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        e.write_all(raw)?;
        out.extend_from_slice(&e.finish()?);
        Ok(())
    };
    let mut compressed = BytesMut::new();
    let options = RecordEncodeOptions { version: 2, compression: Compression::Gzip };
    RecordBatchEncoder::encode_with_custom_compression(&mut compressed, bomb.iter(), &options, Some(gzip)).unwrap();
    assert!(compressed.len() < 65536, "the bomb itself is small ({} bytes)", compressed.len());
    assert_eq!(produce(&mut s, "t", compressed.freeze()).0, 10, "MESSAGE_TOO_LARGE");
    assert_eq!(broker.client().list_offsets("t", 0).unwrap(), (0, 0), "nothing of them is stored");
}

/// A record without a key on a compacted topic is refused as Kafka refuses
/// it (INVALID_RECORD) and nothing of its batch is stored; keyed ones are.
/// DeleteRecords on a topic that only compacts is POLICY_VIOLATION.
#[test]
fn a_keyless_record_on_a_compacted_topic_is_refused_and_nothing_stored() {
    const INVALID_RECORD: i16 = 87;
    let dir = tempfile::tempdir().unwrap();
    let (broker, kafka) = broker(dir.path(), &[]);
    let configs = [("cleanup.policy".to_string(), "compact".to_string())];
    broker.client().create_topic_with_configs("kv", 1, 0, &configs).unwrap();
    let shard = broker.client().topic("kv").unwrap().queue_shards[0];
    let (host, port) = kafka.rsplit_once(':').unwrap();
    let mut s = connect(&format!("{host}:{}", port.parse::<u16>().unwrap() + shard as u16));
    let mut mixed = records(3, None);
    mixed[1].key = None;
    assert_eq!(produce(&mut s, "kv", batch(&mixed)).0, INVALID_RECORD);
    assert_eq!(broker.client().list_offsets("kv", 0).unwrap(), (0, 0), "nothing of the batch is stored");
    assert_eq!(produce(&mut s, "kv", batch(&records(3, None))), (0, 0), "keyed records are");
    // A topic that only compacts refuses DeleteRecords, as Kafka's does.
    use kafka_protocol::messages::delete_records_request::{DeleteRecordsPartition, DeleteRecordsTopic};
    const POLICY_VIOLATION: i16 = 44;
    let partition = DeleteRecordsPartition::default().with_partition_index(0).with_offset(2);
    let topic = DeleteRecordsTopic::default()
        .with_name(TopicName(StrBytes::from_static_str("kv")))
        .with_partitions(vec![partition]);
    let request = DeleteRecordsRequest::default().with_topics(vec![topic]).with_timeout_ms(10_000);
    let deleted: DeleteRecordsResponse = call(&mut s, ApiKey::DeleteRecords, 2, &request);
    assert_eq!(deleted.topics[0].partitions[0].error_code, POLICY_VIOLATION);
    assert_eq!(broker.client().list_offsets("kv", 0).unwrap(), (0, 3), "its start did not move");
}

#[test]
fn an_idempotent_producers_retry_is_stored_once_and_gaps_and_old_epochs_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, kafka) = broker(dir.path(), &[]);
    let mut s = connect(&kafka);
    let init: InitProducerIdResponse =
        call(&mut s, ApiKey::InitProducerId, 4, &InitProducerIdRequest::default().with_transactional_id(None));
    assert_eq!((init.error_code, init.producer_epoch), (0, 0));
    let pid = init.producer_id.0;
    assert!(pid >= 0);
    let first = batch(&records(5, Some((pid, 0, 0))));
    assert_eq!(produce(&mut s, "t", first.clone()), (0, 0));
    assert_eq!(produce(&mut connect(&kafka), "t", first), (0, 0), "a retry is answered with its offset");
    assert_eq!(produce(&mut s, "t", batch(&records(5, Some((pid, 0, 10))))).0, 45, "OUT_OF_ORDER_SEQUENCE_NUMBER");
    assert_eq!(produce(&mut s, "t", batch(&records(5, Some((pid, 0, 5))))), (0, 5));
    let bump = InitProducerIdRequest::default()
        .with_transactional_id(None)
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(0);
    let bumped: InitProducerIdResponse = call(&mut s, ApiKey::InitProducerId, 4, &bump);
    assert_eq!((bumped.producer_id.0, bumped.producer_epoch), (pid, 1));
    assert_eq!(produce(&mut s, "t", batch(&records(5, Some((pid, 1, 0))))), (0, 10), "the new epoch starts afresh");
    assert_eq!(produce(&mut s, "t", batch(&records(5, Some((pid, 0, 10))))).0, 47, "INVALID_PRODUCER_EPOCH");
    assert_eq!(broker.client().list_offsets("t", 0).unwrap(), (0, 15), "three batches stored, each once");
}

#[test]
fn a_fetch_at_the_end_waits_for_the_next_record() {
    use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
    let dir = tempfile::tempdir().unwrap();
    let (broker, kafka) = broker(dir.path(), &[]);
    let partition = FetchPartition::default().with_partition(0).with_fetch_offset(0).with_partition_max_bytes(1 << 20);
    let topic =
        FetchTopic::default().with_topic(TopicName(StrBytes::from_static_str("t"))).with_partitions(vec![partition]);
    let fetch = FetchRequest::default()
        .with_max_wait_ms(20_000)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_topics(vec![topic]);
    let waiting =
        std::thread::spawn(move || -> FetchResponse { call(&mut connect(&kafka), ApiKey::Fetch, 11, &fetch) });
    std::thread::sleep(std::time::Duration::from_millis(500));
    let producer = ringmq::client::Producer::new(broker.client(), Default::default());
    producer.send("t", &ringmq::client::Message::new("late")).unwrap();
    let response = waiting.join().unwrap();
    let p = &response.responses[0].partitions[0];
    assert_eq!((p.error_code, p.high_watermark), (0, 1));
    let mut records = p.records.clone().expect("records");
    let sets = kafka_protocol::records::RecordBatchDecoder::decode_all(&mut records).unwrap();
    assert_eq!(sets[0].records[0].value.as_deref(), Some(&b"late"[..]), "the fetch waited and got the new record");
}

/// Whether the broker answers an ApiVersions on `stream` (false: it closed it).
fn answers_api_versions(stream: &mut TcpStream) -> bool {
    send_frame(stream, &request(ApiKey::ApiVersions, 0, &ApiVersionsRequest::default()));
    read_frame(stream).is_some()
}

/// `max_connections` holds on a shard over both client listeners: with one
/// native and one Kafka connection open on shard 0 and a limit of 2, the next
/// Kafka connection is closed unanswered; a closed one frees its slot.
#[test]
fn the_kafka_listener_counts_against_max_connections_with_the_native_one() {
    let dir = tempfile::tempdir().unwrap();
    // No client connects first: its close would race with the count.
    let (broker, kafka) = common::kafka_broker(dir.path(), &["--connections-max", "2"]);
    let native = common::Raw::connect(broker.addr());
    let mut first = connect(&kafka);
    assert!(answers_api_versions(&mut first), "the second connection of shard 0 is served");
    let mut third = connect(&kafka);
    assert!(!answers_api_versions(&mut third), "a third connection to shard 0 is refused");
    drop(native);
    std::thread::sleep(std::time::Duration::from_millis(200));
    let mut again = connect(&kafka);
    assert!(answers_api_versions(&mut again), "a closed connection frees its slot");
    assert!(answers_api_versions(&mut first), "the connection already open serves on");
}

/// The address of `group`'s coordinator, by FindCoordinator.
fn coordinator(kafka: &str, group: &str) -> String {
    let find = FindCoordinatorRequest::default().with_key(StrBytes::from_string(group.into()));
    let found: FindCoordinatorResponse = call(&mut connect(kafka), ApiKey::FindCoordinator, 1, &find);
    assert_eq!(found.error_code, 0);
    format!("{}:{}", found.host, found.port)
}

fn committed(s: &mut TcpStream, group: &str) -> i64 {
    use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
    let topic = OffsetFetchRequestTopic::default()
        .with_name(TopicName(StrBytes::from_static_str("t")))
        .with_partition_indexes(vec![0]);
    let fetch = OffsetFetchRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group.into())))
        .with_topics(Some(vec![topic]));
    let response: OffsetFetchResponse = call(s, ApiKey::OffsetFetch, 7, &fetch);
    response.topics[0].partitions[0].committed_offset
}

fn offset_delete(s: &mut TcpStream, group: &str) -> (i16, i16) {
    use kafka_protocol::messages::offset_delete_request::{OffsetDeleteRequestPartition, OffsetDeleteRequestTopic};
    let topic = OffsetDeleteRequestTopic::default()
        .with_name(TopicName(StrBytes::from_static_str("t")))
        .with_partitions(vec![OffsetDeleteRequestPartition::default().with_partition_index(0)]);
    let request = OffsetDeleteRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group.into())))
        .with_topics(vec![topic]);
    let response: OffsetDeleteResponse = call(s, ApiKey::OffsetDelete, 0, &request);
    (response.error_code, response.topics.first().map_or(-1, |t| t.partitions[0].error_code))
}

#[test]
fn offset_delete_removes_a_groups_offsets_durably_and_an_unknown_group_is_not_found() {
    use kafka_protocol::messages::offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic};
    let dir = tempfile::tempdir().unwrap();
    let (broker, kafka) = broker(dir.path(), &[]);
    let mut s = connect(&coordinator(&kafka, "od"));
    let partition = OffsetCommitRequestPartition::default().with_partition_index(0).with_committed_offset(3);
    let topic = OffsetCommitRequestTopic::default()
        .with_name(TopicName(StrBytes::from_static_str("t")))
        .with_partitions(vec![partition]);
    let commit = OffsetCommitRequest::default()
        .with_group_id(GroupId(StrBytes::from_static_str("od")))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![topic]);
    let committed_response: OffsetCommitResponse = call(&mut s, ApiKey::OffsetCommit, 8, &commit);
    assert_eq!(committed_response.topics[0].partitions[0].error_code, 0);
    assert_eq!(committed(&mut s, "od"), 3);
    assert_eq!(offset_delete(&mut s, "od"), (0, 0));
    assert_eq!(committed(&mut s, "od"), -1, "the offset is gone");
    assert_eq!(offset_delete(&mut connect(&coordinator(&kafka, "nope")), "nope"), (0, 69), "GROUP_ID_NOT_FOUND");
    drop(s);
    drop(broker);
    // A restart replays the deletion.
    let (_broker, kafka) = common::kafka_broker(dir.path(), &[]);
    assert_eq!(committed(&mut connect(&coordinator(&kafka, "od")), "od"), -1, "deleted durably");
}

/// Kafka's default `message.max.bytes` (1 MiB + 12) is taken by default: a
/// 1,045,000-byte record is stored, and a fetch whose limit is 1 MiB still
/// returns it whole (the first batch always comes, KIP-74).
#[test]
fn a_record_near_kafkas_default_largest_is_taken_by_default_and_reads_back_whole() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, kafka) = broker(dir.path(), &[]);
    let value = Bytes::from(vec![b'r'; 1_045_000]);
    let big: Vec<Record> = records(1, None).into_iter().map(|r| Record { value: Some(value.clone()), ..r }).collect();
    assert_eq!(produce(&mut connect(&kafka), "t", batch(&big)), (0, 0));
    assert_eq!(broker.client().list_offsets("t", 0).unwrap(), (0, 1));
    let mut fetched = common::kafka::fetch(&kafka, "t", 0);
    let sets = kafka_protocol::records::RecordBatchDecoder::decode_all(&mut fetched).unwrap();
    assert_eq!(sets[0].records[0].value.as_ref(), Some(&value), "the record comes back whole");
}

/// DescribeCluster is served for the broker endpoint only: one for
/// controllers gets MISMATCHED_ENDPOINT_TYPE, an unknown type
/// UNSUPPORTED_ENDPOINT_TYPE, each with a message, on a connection that
/// goes on serving; Metadata from v2 carries the same cluster id.
#[test]
fn describe_cluster_refuses_endpoints_other_than_brokers_and_agrees_with_metadata() {
    const MISMATCHED_ENDPOINT_TYPE: i16 = 114;
    const UNSUPPORTED_ENDPOINT_TYPE: i16 = 115;
    let dir = tempfile::tempdir().unwrap();
    let (_broker, kafka) = broker(dir.path(), &[]);
    let mut stream = connect(&kafka);
    let describe = |stream: &mut TcpStream, endpoint: i8| -> DescribeClusterResponse {
        call(stream, ApiKey::DescribeCluster, 1, &DescribeClusterRequest::default().with_endpoint_type(endpoint))
    };
    for (endpoint, code) in [(2, MISMATCHED_ENDPOINT_TYPE), (9, UNSUPPORTED_ENDPOINT_TYPE)] {
        let refused = describe(&mut stream, endpoint);
        assert_eq!(refused.error_code, code, "{refused:?}");
        assert!(refused.error_message.is_some_and(|m| !m.is_empty()) && refused.brokers.is_empty());
    }
    let described = describe(&mut stream, 1);
    assert_eq!((described.error_code, described.endpoint_type, described.brokers.len()), (0, 1, 2), "{described:?}");
    let metadata = |stream: &mut TcpStream, version| -> MetadataResponse {
        call(stream, ApiKey::Metadata, version, &MetadataRequest::default())
    };
    assert_eq!(metadata(&mut stream, 2).cluster_id.as_deref(), Some(described.cluster_id.as_str()));
    assert_eq!(metadata(&mut stream, 1).cluster_id, None, "v1 has no cluster id");
}
