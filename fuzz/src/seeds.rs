//! Writes the seed corpora (`fuzz/corpus/<target>/`) from the frames and
//! batches the broker's own encoders build, as the tests build them:
//! `cargo run --manifest-path fuzz/Cargo.toml --bin seeds`.

use ringmq::protocol::frame;
use ringmq::protocol::messages::*;
use ringmq::protocol::{ApiKey, ErrorCode, Writer};
use ringmq_shards::batch::{self, BatchBuilder};
use ringmq_shards::Record;
use std::path::Path;

fn body(encode: impl FnOnce(&mut Writer)) -> Vec<u8> {
    let mut w = Writer::default();
    encode(&mut w);
    w.buf
}

fn batch_of(values: &[&[u8]]) -> Vec<u8> {
    let mut b = BatchBuilder::new(1_700_000_000_000);
    for (i, v) in values.iter().enumerate() {
        b.push(&Record {
            value: Some(v),
            key: Some(if i % 2 == 0 { b"key" } else { b"" }),
            tag: b"TagA",
            ..Record::default()
        });
    }
    b.finish()
}

/// A body of every API, as a client sends it.
fn requests() -> Vec<(ApiKey, Vec<u8>)> {
    let one = batch_of(&[b"hello"]);
    let two = batch_of(&[b"a", b"bb"]);
    let q = || QueueRef { topic: "orders".into(), queue: 3 };
    let member = || Membership { group: "g".into(), generation: 2, member: "m-1".into() };
    let fetch = || Fetch { queue: q(), offset: 7, max_bytes: 1 << 20, max_wait_ms: 500, tags: "TagA || TagB".into() };
    let locking = || QueueLocking { group: "g".into(), holder: "h".into(), lease_ms: 30_000, queues: vec![q()] };
    let tx = |batch: &[u8], half| {
        body(|w| Transactional { queue: q(), group: "p".into(), batch, half, commit: true }.encode(w))
    };
    vec![
        (ApiKey::ApiVersions, Vec::new()),
        (ApiKey::Metadata, body(|w| encode_names(&["orders".into()], w))),
        (
            ApiKey::CreateTopic,
            body(|w| CreateTopic { name: "orders".into(), queues: 8, flush: 0, configs: Vec::new() }.encode(w, 0)),
        ),
        (
            ApiKey::DeleteTopic,
            body(|w| {
                w.string("orders");
            }),
        ),
        (ApiKey::ListTopics, Vec::new()),
        (ApiKey::Produce, body(|w| Produce { queue: q(), acks: ACKS_DURABLE, batches: vec![&one, &two] }.encode(w))),
        (ApiKey::Fetch, body(|w| fetch().encode(w))),
        (ApiKey::ListOffsets, body(|w| q().encode(w))),
        (ApiKey::CommitOffset, body(|w| GroupOffset { member: member(), queue: q(), offset: 9 }.encode(w))),
        (
            ApiKey::FetchOffset,
            body(|w| {
                w.string("g");
                q().encode(w);
            }),
        ),
        (
            ApiKey::JoinGroup,
            body(|w| {
                JoinGroup {
                    group: "g".into(),
                    member: String::new(),
                    client_id: "c".into(),
                    session_timeout_ms: 10_000,
                    rebalance_timeout_ms: 30_000,
                    metadata: body(|w| encode_names(&["orders".into()], w)),
                }
                .encode(w)
            }),
        ),
        (
            ApiKey::SyncGroup,
            body(|w| {
                let a = Assignment { topics: vec![("orders".into(), vec![0, 1])] }.encode();
                SyncGroup { member: member(), assignments: vec![("m-1".into(), a)] }.encode(w)
            }),
        ),
        (
            ApiKey::Heartbeat,
            body(|w| {
                member().encode(w);
                w.u32(3000);
            }),
        ),
        (ApiKey::LeaveGroup, body(|w| member().encode(w))),
        (
            ApiKey::SendBack,
            body(|w| {
                SendBack {
                    group: "g".into(),
                    queue: q(),
                    offset: 4,
                    max_retries: 16,
                    delay_level: 0,
                    dead_letter: false,
                }
                .encode(w)
            }),
        ),
        (
            ApiKey::AdvanceClock,
            body(|w| {
                w.u64(1000);
            }),
        ),
        (ApiKey::LockQueues, body(|w| locking().encode(w))),
        (ApiKey::UnlockQueues, body(|w| QueueLocking { lease_ms: 0, ..locking() }.encode(w))),
        (
            ApiKey::ProduceDelayed,
            body(|w| ProduceDelayed { queue: q(), delay_level: 3, deliver_at_ms: 0, batch: &one }.encode(w)),
        ),
        (ApiKey::LookupMessages, body(|w| LookupQuery::Key { topic: "orders".into(), key: b"key".to_vec() }.encode(w))),
        (ApiKey::ProduceHalf, tx(&one, 0)),
        (ApiKey::EndTransaction, tx(&[], 42)),
        (
            ApiKey::PollChecks,
            body(|w| {
                w.string("p").u32(200);
            }),
        ),
        (
            ApiKey::ProduceMany,
            body(|w| ProduceMany { acks: ACKS_DURABLE, entries: vec![(q(), &one), (q(), &two)] }.encode(w)),
        ),
        (
            ApiKey::FetchMany,
            body(|w| FetchMany { max_wait_ms: 500, entries: vec![fetch(), fetch()], consumer: None }.encode(w)),
        ),
        (
            ApiKey::AlterTopic,
            body(|w| {
                let changes = vec![
                    TopicChange::Set("retention.ms".into(), "60000".into()),
                    TopicChange::Unset("max.message.bytes".into()),
                ];
                AlterTopic { topic: "orders".into(), validate_only: false, changes }.encode(w)
            }),
        ),
        (
            ApiKey::DeleteRecords,
            body(|w| {
                q().encode(w);
                w.u64(5);
            }),
        ),
    ]
}

fn write(dir: &Path, name: String, bytes: &[u8]) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join(name), bytes).unwrap();
}

/// Kafka request frames (without the length prefix) as clients send them.
fn kafka_requests() -> Vec<(String, Vec<u8>)> {
    use kafka_protocol::messages::*;
    use kafka_protocol::protocol::{Encodable, StrBytes};
    use kafka_protocol::records::{Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType};
    fn frame<T: Encodable>(key: ApiKey, version: i16, body: T) -> (String, Vec<u8>) {
        let header = RequestHeader::default()
            .with_request_api_key(key as i16)
            .with_request_api_version(version)
            .with_correlation_id(1)
            .with_client_id(Some(StrBytes::from_static_str("seeds")));
        let mut buf = bytes::BytesMut::new();
        header.encode(&mut buf, key.request_header_version(version)).unwrap();
        body.encode(&mut buf, version).unwrap();
        (format!("kafka-{key:?}-v{version}"), buf.to_vec())
    }
    let topic = || TopicName(StrBytes::from_static_str("orders"));
    let records: Vec<Record> = (0..3)
        .map(|i| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: 0,
            producer_id: 7,
            producer_epoch: 0,
            timestamp_type: TimestampType::Creation,
            offset: i,
            sequence: i as i32,
            timestamp: 1_700_000_000_000 + i,
            key: Some(bytes::Bytes::from_static(b"key")),
            value: Some(bytes::Bytes::from_static(b"value")),
            headers: Default::default(),
        })
        .collect();
    let mut batch = bytes::BytesMut::new();
    let options = RecordEncodeOptions { version: 2, compression: Compression::None };
    RecordBatchEncoder::encode(&mut batch, records.iter(), &options).unwrap();
    let partition = produce_request::PartitionProduceData::default().with_index(0).with_records(Some(batch.freeze()));
    let produce = ProduceRequest::default().with_acks(-1).with_timeout_ms(1000).with_topic_data(vec![
        produce_request::TopicProduceData::default().with_name(topic()).with_partition_data(vec![partition]),
    ]);
    let fetch_partition = fetch_request::FetchPartition::default().with_partition(0).with_partition_max_bytes(1 << 20);
    let fetch = FetchRequest::default().with_max_wait_ms(500).with_min_bytes(1).with_topics(vec![
        fetch_request::FetchTopic::default().with_topic(topic()).with_partitions(vec![fetch_partition]),
    ]);
    let join = JoinGroupRequest::default()
        .with_group_id(GroupId(StrBytes::from_static_str("g")))
        .with_session_timeout_ms(10_000)
        .with_rebalance_timeout_ms(30_000)
        .with_protocol_type(StrBytes::from_static_str("consumer"))
        .with_protocols(vec![join_group_request::JoinGroupRequestProtocol::default()
            .with_name(StrBytes::from_static_str("range"))
            .with_metadata(bytes::Bytes::from_static(&[0, 1, 0, 0, 0, 1, 0, 6, b'o', b'r', b'd', b'e', b'r', b's']))]);
    let commit =
        OffsetCommitRequest::default().with_group_id(GroupId(StrBytes::from_static_str("g"))).with_topics(vec![
            offset_commit_request::OffsetCommitRequestTopic::default().with_name(topic()).with_partitions(vec![
                offset_commit_request::OffsetCommitRequestPartition::default().with_committed_offset(3),
            ]),
        ]);
    let txn_id = || TransactionalId(StrBytes::from_static_str("tx"));
    let txn_topic = || {
        add_partitions_to_txn_request::AddPartitionsToTxnTopic::default().with_name(topic()).with_partitions(vec![0])
    };
    let add_v3 = AddPartitionsToTxnRequest::default()
        .with_v3_and_below_transactional_id(txn_id())
        .with_v3_and_below_producer_id(ProducerId(7))
        .with_v3_and_below_topics(vec![txn_topic()]);
    let add_v5 = AddPartitionsToTxnRequest::default().with_transactions(vec![
        add_partitions_to_txn_request::AddPartitionsToTxnTransaction::default()
            .with_transactional_id(txn_id())
            .with_producer_id(ProducerId(7))
            .with_verify_only(true)
            .with_topics(vec![txn_topic()]),
    ]);
    let end =
        EndTxnRequest::default().with_transactional_id(txn_id()).with_producer_id(ProducerId(7)).with_committed(true);
    vec![
        frame(ApiKey::AddPartitionsToTxn, 3, add_v3),
        frame(ApiKey::AddPartitionsToTxn, 5, add_v5),
        frame(ApiKey::EndTxn, 3, end),
        frame(ApiKey::InitProducerId, 4, InitProducerIdRequest::default().with_transactional_id(Some(txn_id()))),
        frame(ApiKey::ApiVersions, 3, ApiVersionsRequest::default()),
        frame(ApiKey::Metadata, 12, MetadataRequest::default()),
        frame(ApiKey::Produce, 9, produce.clone()),
        frame(ApiKey::Produce, 3, produce),
        frame(ApiKey::Fetch, 11, fetch),
        frame(ApiKey::JoinGroup, 5, join.clone()),
        frame(ApiKey::JoinGroup, 7, join),
        frame(ApiKey::SyncGroup, 3, SyncGroupRequest::default()),
        frame(ApiKey::OffsetCommit, 8, commit),
        frame(ApiKey::InitProducerId, 4, InitProducerIdRequest::default().with_transactional_id(None)),
        frame(ApiKey::CreateTopics, 4, CreateTopicsRequest::default()),
        frame(ApiKey::DescribeConfigs, 4, DescribeConfigsRequest::default()),
    ]
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
    for (name, frame) in kafka_requests() {
        write(&root.join("kafka_request"), name, &frame);
    }
    for (i, (api, request)) in requests().into_iter().enumerate() {
        let framed = frame::request(api as u16, 0, 1 + i as u32, &request);
        write(&root.join("frame"), format!("{api:?}"), &framed[4..]);
        let mut picked = vec![api as u8];
        picked.extend_from_slice(&request);
        write(&root.join("request"), format!("{api:?}"), &picked);
    }
    write(&root.join("frame"), "error-response".into(), &frame::response(5, ErrorCode::UnknownTopic, "no", &[])[4..]);
    let batches = [batch_of(&[b"x"]), batch_of(&[b"a", b"bb", b"ccc"]), batch_of(&[&[7; 3000]])];
    let (mut segment, mut offset) = (Vec::new(), 0u64);
    for (i, b) in batches.iter().enumerate() {
        write(&root.join("batch"), format!("batch-{i}"), b);
        write(&root.join("records"), format!("records-{i}"), &b[batch::HEADER_BYTES..]);
        let mut stored = b.clone();
        batch::stamp(&mut stored, offset, 1);
        offset += u64::from(batch::verify_stored(&stored).expect("a stamped batch verifies").record_count);
        segment.extend_from_slice(&stored);
    }
    // recovery's input: u16 checkpoint length 0, u16 chunk length 0, then the segment.
    let mut recovery = vec![0, 0, 0, 0];
    recovery.extend_from_slice(&segment);
    write(&root.join("recovery"), "one-queue-log".into(), &recovery);
    println!("seeds written under {}", root.display());
}
