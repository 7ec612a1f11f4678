//! Kafka transactions against hand-made requests: bad transactional
//! requests refused with Kafka's codes and nothing of them stored, native
//! readers that never see a marker or an aborted record and stop at an open
//! transaction, and a transaction open across a kill -9 held by the
//! restarted broker until its coordinator aborts it at its timeout.

mod common;

use bytes::Bytes;
use common::kafka::{batch, call, connect, produce_body, records};
use common::Broker;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use ringmq::client::{Consumer, StartFrom};
use std::net::TcpStream;
use std::time::Duration;

const INVALID_PRODUCER_EPOCH: i16 = 47;
const INVALID_TXN_STATE: i16 = 48;
const INVALID_PRODUCER_ID_MAPPING: i16 = 49;
const INVALID_TRANSACTION_TIMEOUT: i16 = 50;
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const OPERATION_NOT_ATTEMPTED: i16 = 55;
const PRODUCER_FENCED: i16 = 90;

fn name(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// A transactional id's coordinator, found by FindCoordinator key type 1 and connected to.
fn coordinator(kafka: &str, id: &str) -> TcpStream {
    found(kafka, id, 1)
}

/// The coordinator of `key` of `key_type` (0: group, 1: transactional id), connected to.
fn found(kafka: &str, key: &str, key_type: i8) -> TcpStream {
    let find = FindCoordinatorRequest::default().with_key(name(key)).with_key_type(key_type);
    let found: FindCoordinatorResponse = call(&mut connect(kafka), ApiKey::FindCoordinator, 3, &find);
    assert_eq!(found.error_code, 0, "{found:?}");
    connect(&format!("{}:{}", found.host, found.port))
}

/// InitProducerId for `id`: (error, producer id, epoch).
fn init(s: &mut TcpStream, id: &str, timeout_ms: i32) -> (i16, i64, i16) {
    let request = InitProducerIdRequest::default()
        .with_transactional_id(Some(TransactionalId(name(id))))
        .with_transaction_timeout_ms(timeout_ms);
    let r: InitProducerIdResponse = call(s, ApiKey::InitProducerId, 4, &request);
    (r.error_code, r.producer_id.0, r.producer_epoch)
}

/// AddPartitionsToTxn v3 of (topic, partitions): each partition's code, in order.
fn add_partitions(s: &mut TcpStream, id: &str, producer: (i64, i16), topics: &[(&str, &[i32])]) -> Vec<i16> {
    let topics = topics
        .iter()
        .map(|(t, ps)| AddPartitionsToTxnTopic::default().with_name(TopicName(name(t))).with_partitions(ps.to_vec()))
        .collect();
    let request = AddPartitionsToTxnRequest::default()
        .with_v3_and_below_transactional_id(TransactionalId(name(id)))
        .with_v3_and_below_producer_id(ProducerId(producer.0))
        .with_v3_and_below_producer_epoch(producer.1)
        .with_v3_and_below_topics(topics);
    let r: AddPartitionsToTxnResponse = call(s, ApiKey::AddPartitionsToTxn, 3, &request);
    r.results_by_topic_v3_and_below
        .iter()
        .flat_map(|t| t.results_by_partition.iter().map(|p| p.partition_error_code))
        .collect()
}

fn end(s: &mut TcpStream, id: &str, producer: (i64, i16), commit: bool) -> i16 {
    let request = EndTxnRequest::default()
        .with_transactional_id(TransactionalId(name(id)))
        .with_producer_id(ProducerId(producer.0))
        .with_producer_epoch(producer.1)
        .with_committed(commit);
    let r: EndTxnResponse = call(s, ApiKey::EndTxn, 3, &request);
    r.error_code
}

/// A transactional batch of `n` records "v<i>" (values prefixed) of the producer.
fn txn_batch(prefix: &str, n: usize, producer: (i64, i16), sequence: i32) -> Bytes {
    let records: Vec<_> = records(n, Some((producer.0, producer.1, sequence)))
        .into_iter()
        .enumerate()
        .map(|(i, r)| kafka_protocol::records::Record {
            transactional: true,
            value: Some(Bytes::from(format!("{prefix}{i}"))),
            ..r
        })
        .collect();
    batch(&records)
}

/// Produces to `t` queue 0, at its owner's Kafka listener: the error code.
fn produce(at: &Leader, records: Bytes, transactional_id: Option<&str>) -> i16 {
    let body =
        produce_body("t", 0, records).with_transactional_id(transactional_id.map(|id| TransactionalId(name(id))));
    let r: ProduceResponse = call(&mut connect(&at.0), ApiKey::Produce, 9, &body);
    r.responses[0].partition_responses[0].error_code
}

/// The Kafka listener of the shard that owns `t` queue 0.
struct Leader(String);

fn leader(broker: &Broker, kafka: &str) -> Leader {
    let shard = broker.client().topic("t").unwrap().queue_shards[0];
    let (host, port) = kafka.rsplit_once(':').unwrap();
    Leader(format!("{host}:{}", port.parse::<u16>().unwrap() + shard as u16))
}

/// A plain (non-transactional) Kafka record "plain" to `t` queue 0.
fn plain(at: &Leader) {
    let records: Vec<_> = records(1, None)
        .into_iter()
        .map(|r| kafka_protocol::records::Record { value: Some(Bytes::from_static(b"plain")), ..r })
        .collect();
    assert_eq!(produce(at, batch(&records), None), 0);
}

/// What a native consumer reads of `topic` queue 0 from its start within `real`.
fn native_values(broker: &Broker, topic: &str, real: Duration) -> Vec<String> {
    let mut c = Consumer::new(broker.client(), None);
    c.assign(topic, &[0], StartFrom::Earliest).unwrap();
    let got = common::poll_during(&mut c, real);
    got.iter().map(|m| String::from_utf8_lossy(m.value.as_deref().unwrap_or_default()).into_owned()).collect()
}

/// A broker with its Kafka listener, a topic `t` of one queue, and the
/// listener of the shard that owns it.
fn broker(dir: &std::path::Path) -> (Broker, String, Leader) {
    let (broker, kafka) = common::kafka_broker(dir, &[]);
    broker.client().create_topic("t", 1, 0).unwrap();
    let at = leader(&broker, &kafka);
    (broker, kafka, at)
}

#[test]
fn bad_transactional_requests_get_kafkas_codes_and_store_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, kafka, at) = broker(dir.path());
    let mut s = coordinator(&kafka, "tx");
    assert_eq!(end(&mut s, "unknown", (5, 0), true), INVALID_PRODUCER_ID_MAPPING, "an unknown transactional id");
    assert_eq!(init(&mut s, "tx", 0).0, INVALID_TRANSACTION_TIMEOUT);
    assert_eq!(init(&mut s, "tx", 900_001).0, INVALID_TRANSACTION_TIMEOUT, "past transaction.max.timeout.ms");
    let (code, pid, epoch) = init(&mut s, "tx", 60_000);
    assert_eq!((code, epoch), (0, 0));
    let (code, again, epoch) = init(&mut s, "tx", 60_000);
    assert_eq!((code, again, epoch), (0, pid, 1), "the same producer id, the epoch bumped");
    let producer = (pid, 1);
    assert_eq!(add_partitions(&mut s, "tx", (pid, 0), &[("t", &[0])]), [PRODUCER_FENCED], "an older epoch");
    assert_eq!(add_partitions(&mut s, "tx", (pid + 1, 1), &[("t", &[0])]), [INVALID_PRODUCER_ID_MAPPING]);
    assert_eq!(
        add_partitions(&mut s, "tx", producer, &[("t", &[0, 5]), ("missing", &[0])]),
        [OPERATION_NOT_ATTEMPTED, UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_OR_PARTITION],
        "a partition that does not exist refuses the request"
    );
    assert_eq!(end(&mut s, "tx", producer, true), INVALID_TXN_STATE, "nothing was added: no transaction to end");
    assert_eq!(broker.client().list_offsets("t", 0).unwrap(), (0, 0), "no marker written");

    assert_eq!(add_partitions(&mut s, "tx", producer, &[("t", &[0])]), [0]);
    assert_eq!(produce(&at, txn_batch("c", 3, producer, 0), Some("tx")), 0);
    assert_eq!(end(&mut s, "tx", producer, true), 0);
    assert_eq!(end(&mut s, "tx", producer, true), 0, "the same end again is a retry, answered as done");
    assert_eq!(end(&mut s, "tx", producer, false), INVALID_TXN_STATE, "aborting a committed transaction");
    assert_eq!(broker.client().list_offsets("t", 0).unwrap(), (0, 4), "three records and one marker");

    let (_, _, newer) = init(&mut s, "tx", 60_000);
    assert_eq!(newer, 2);
    assert_eq!(
        produce(&at, txn_batch("z", 2, producer, 3), Some("tx")),
        INVALID_PRODUCER_EPOCH,
        "a batch of the fenced epoch"
    );
    assert_eq!(broker.client().list_offsets("t", 0).unwrap(), (0, 4), "nothing of it stored");
    assert_eq!(native_values(&broker, "t", Duration::from_secs(1)), ["c0", "c1", "c2"], "no marker for natives");
}

#[test]
fn native_readers_skip_aborted_records_and_stop_at_an_open_transaction() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, kafka, at) = broker(dir.path());
    let mut s = coordinator(&kafka, "n");
    let (_, pid, epoch) = init(&mut s, "n", 60_000);
    let producer = (pid, epoch);
    let txn = |s: &mut TcpStream, prefix: &str, n: usize, sequence: i32| {
        assert_eq!(add_partitions(s, "n", producer, &[("t", &[0])]), [0]);
        assert_eq!(produce(&at, txn_batch(prefix, n, producer, sequence), Some("n")), 0);
    };
    txn(&mut s, "aborted", 3, 0);
    assert_eq!(end(&mut s, "n", producer, false), 0);
    txn(&mut s, "committed", 2, 3);
    assert_eq!(end(&mut s, "n", producer, true), 0);
    plain(&at);
    txn(&mut s, "open", 2, 5);
    let held = native_values(&broker, "t", Duration::from_secs(1));
    assert_eq!(held, ["committed0", "committed1", "plain"], "no aborted record, no marker, nothing past the open one");
    assert_eq!(end(&mut s, "n", producer, true), 0);
    let all = native_values(&broker, "t", Duration::from_secs(1));
    assert_eq!(all, ["committed0", "committed1", "plain", "open0", "open1"], "readable once committed");
    // What a queue moving between broker groups is copied from: every stored offset.
    assert_eq!(copied_offsets(&broker, "t"), (0..11).collect::<Vec<_>>(), "records, aborted ones and markers");
}

/// The offsets of every record QueueCopy returns of `topic` queue 0 from its start.
fn copied_offsets(broker: &Broker, topic: &str) -> Vec<u64> {
    use ringmq::protocol::messages::{QueueCopied, QueueCopy, QueueRef};
    use ringmq::protocol::{ApiKey, ErrorCode, Reader, Writer};
    let mut raw = common::Raw::connect(&broker.addrs[0]);
    let (mut offsets, mut next) = (Vec::new(), 0);
    loop {
        let mut w = Writer::default();
        let queue = QueueRef { topic: topic.into(), queue: 0 };
        QueueCopy { queue, offset: next, max_bytes: 1 << 20, max_wait_ms: 0 }.encode(&mut w);
        let (_, code, message, body) = raw.call(ApiKey::QueueCopy as u16, 0, 1, &w.buf);
        assert_eq!(code, ErrorCode::None, "{message}");
        let copied = QueueCopied::decode(&mut Reader::new(&body)).unwrap();
        assert_eq!(copied.frozen_end, None, "a single node's queues never move");
        let fetched = copied.fetched;
        for b in ringmq_shards::batch::split(fetched.batches) {
            let h = ringmq_shards::batch::verify_stored(b).unwrap();
            offsets.extend((h.base_offset..h.base_offset + u64::from(h.record_count)).filter(|o| *o >= next));
        }
        if fetched.next_offset >= fetched.end {
            return offsets;
        }
        next = fetched.next_offset;
    }
}

#[test]
fn a_transaction_open_across_a_kill_holds_readers_until_its_timeout_aborts_it() {
    let dir = tempfile::tempdir().unwrap();
    let (mut broker, kafka, at) = broker(dir.path());
    let mut s = coordinator(&kafka, "k");
    let (_, pid, epoch) = init(&mut s, "k", 3_000);
    let producer = (pid, epoch);
    assert_eq!(add_partitions(&mut s, "k", producer, &[("t", &[0])]), [0]);
    assert_eq!(produce(&at, txn_batch("c", 2, producer, 0), Some("k")), 0);
    assert_eq!(end(&mut s, "k", producer, true), 0);
    assert_eq!(add_partitions(&mut s, "k", producer, &[("t", &[0])]), [0]);
    assert_eq!(produce(&at, txn_batch("open", 2, producer, 2), Some("k")), 0);
    broker.kill9();
    broker.restart();
    assert_eq!(native_values(&broker, "t", Duration::from_millis(300)), ["c0", "c1"], "held at the open one");
    // The coordinator aborts it at its timeout (3 s): later records become readable without it.
    plain(&at);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let mut got = Vec::new();
    while std::time::Instant::now() < deadline && !got.contains(&"plain".to_string()) {
        got = native_values(&broker, "t", Duration::from_millis(500));
    }
    assert_eq!(got, ["c0", "c1", "plain"], "the open transaction aborted, the committed one kept");
    let mut s = coordinator(&kafka, "k");
    assert_eq!(end(&mut s, "k", producer, true), PRODUCER_FENCED, "its producer was fenced by the abort");
}

/// A group's offset of `t` queue 0 by OffsetFetch v7: (partition code, offset).
fn fetch_offset(s: &mut TcpStream, group: &str, require_stable: bool) -> (i16, i64) {
    use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
    let topic = OffsetFetchRequestTopic::default().with_name(TopicName(name("t"))).with_partition_indexes(vec![0]);
    let request = OffsetFetchRequest::default()
        .with_group_id(GroupId(name(group)))
        .with_topics(Some(vec![topic]))
        .with_require_stable(require_stable);
    let r: OffsetFetchResponse = call(s, ApiKey::OffsetFetch, 7, &request);
    let p = &r.topics[0].partitions[0];
    (p.error_code, p.committed_offset)
}

#[test]
fn a_transactions_offsets_are_pending_until_it_commits_and_unstable_for_read_committed_consumers() {
    use kafka_protocol::messages::txn_offset_commit_request::{
        TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
    };
    const UNSTABLE_OFFSET_COMMIT: i16 = 88;
    const UNKNOWN_MEMBER_ID: i16 = 25;
    let dir = tempfile::tempdir().unwrap();
    let (_broker, kafka, _) = broker(dir.path());
    let mut s = coordinator(&kafka, "o");
    let (_, pid, epoch) = init(&mut s, "o", 60_000);
    let add = AddOffsetsToTxnRequest::default()
        .with_transactional_id(TransactionalId(name("o")))
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(epoch)
        .with_group_id(GroupId(name("og")));
    let added: AddOffsetsToTxnResponse = call(&mut s, ApiKey::AddOffsetsToTxn, 3, &add);
    assert_eq!(added.error_code, 0);
    let mut g = found(&kafka, "og", 0);
    let partition = TxnOffsetCommitRequestPartition::default().with_partition_index(0).with_committed_offset(7);
    let commit = TxnOffsetCommitRequest::default()
        .with_transactional_id(TransactionalId(name("o")))
        .with_group_id(GroupId(name("og")))
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(epoch)
        .with_topics(vec![TxnOffsetCommitRequestTopic::default()
            .with_name(TopicName(name("t")))
            .with_partitions(vec![partition.clone()])]);
    let zombie = commit.clone().with_member_id(name("gone-member")).with_generation_id(3).with_topics(vec![
        TxnOffsetCommitRequestTopic::default()
            .with_name(TopicName(name("t")))
            .with_partitions(vec![partition.clone().with_committed_offset(9)]),
    ]);
    let fenced: TxnOffsetCommitResponse = call(&mut g, ApiKey::TxnOffsetCommit, 3, &zombie);
    assert_eq!(fenced.topics[0].partitions[0].error_code, UNKNOWN_MEMBER_ID, "a member the group does not have");
    let committed: TxnOffsetCommitResponse = call(&mut g, ApiKey::TxnOffsetCommit, 3, &commit);
    assert_eq!(committed.topics[0].partitions[0].error_code, 0);
    assert_eq!(fetch_offset(&mut g, "og", false), (0, -1), "pending: not the group's yet");
    assert_eq!(fetch_offset(&mut g, "og", true).0, UNSTABLE_OFFSET_COMMIT, "a read_committed consumer waits");
    assert_eq!(end(&mut s, "o", (pid, epoch), true), 0);
    assert_eq!(fetch_offset(&mut g, "og", true), (0, 7), "committed with the transaction, the zombie's 9 never");
}
