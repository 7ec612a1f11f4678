//! Tiered storage against a real S3-compatible server (SeaweedFS).
//! Uploads: the sealed segments of a tiered topic's queues reach the
//! bucket as objects a shard's manifest names, read back as a user of the
//! bucket would (the manifest's JSON, the footer by a ranged GET, each
//! queue's slice checked and its records decoded); an untiered topic's
//! records never leave local disk; a broker killed with -9 and restarted
//! goes on from its manifest, with no offset uploaded twice. Reads: once
//! local disk keeps only a tiered queue's tail, the native SDK and kcat
//! read it whole from offset 0, and an old message is found by its id; a
//! damaged object is never served; a bucket gone fails only its reads.
//! Faults: the bucket stopped for a minute under produce (local disk keeps
//! what is not uploaded, uploads resume), kill -9 while local retention
//! deletes. Restore: an empty data directory serves what the bucket holds.

mod common;

use common::seaweed::Seaweed;
use ringmq::client::{Message, Producer, ProducerConfig, SendResult};
use ringmq::objects::{ObjectError, ObjectStore};
use ringmq_shards::batch;
use ringmq_shards::tiered::{verify_slice, ObjectIndex};
use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

/// A 1 KiB value that names its topic and number.
fn value(topic: &str, i: usize) -> Vec<u8> {
    let mut v = format!("{topic}-{i:06}-").into_bytes();
    v.resize(1024, b'.');
    v
}

/// Sends `count` values numbered from `from` to `topic`, value i tagged
/// `t` and i % 3; where each went.
fn produce(client: &std::sync::Arc<ringmq::client::Client>, topic: &str, from: usize, count: usize) -> Vec<SendResult> {
    let producer = Producer::new(client.clone(), ProducerConfig::default());
    let message = |i: usize| Message::new(value(topic, i)).with_tag(format!("t{}", i % 3));
    let sent: Vec<_> = (from..from + count).map(|i| producer.send_async(topic, message(i))).collect();
    sent.into_iter().map(|f| f.wait().unwrap()).collect()
}

/// What the bucket holds of one shard: its manifest's generation and the
/// records of each queue (by storage id) in the order of its objects, each
/// with its offset.
struct Uploaded {
    generation: u64,
    manifests_listed: usize,
    records: BTreeMap<u32, Vec<(u64, Vec<u8>)>>,
}

/// Reads shard `shard`'s manifest and every object it names, checking
/// each footer against the manifest and each slice against the footer.
async fn uploaded(store: &ObjectStore, owner: &str, shard: usize) -> Option<Uploaded> {
    let place = format!("{owner}/shard-{shard}/");
    let (manifest, manifests_listed) = newest_manifest(store, &place).await?;
    let mut records: BTreeMap<u32, Vec<(u64, Vec<u8>)>> = BTreeMap::new();
    let objects = manifest["objects"].as_array().unwrap();
    for object in objects {
        let key = format!("{place}{}", object["key"].as_str().unwrap());
        let (pos, len) = (object["footer_pos"].as_u64().unwrap(), object["footer_len"].as_u64().unwrap());
        let footer = store.get(&key, Some(pos..pos + len)).await.unwrap();
        assert_eq!(u64::from(crc32fast::hash(&footer[..footer.len() - 4])), object["footer_crc"].as_u64().unwrap());
        let index = ObjectIndex::decode(&footer).unwrap();
        let named: BTreeMap<String, (u64, u64)> = serde_json::from_value(object["queues"].clone()).unwrap();
        let named: BTreeMap<u32, (u64, u64)> = named.into_iter().map(|(q, r)| (q.parse().unwrap(), r)).collect();
        assert_eq!(index.queues(), named, "{key}: the manifest names the footer's queues and offsets");
        for slice in &index.slices {
            let bytes = store.get(&key, Some(slice.pos..slice.pos + u64::from(slice.len))).await.unwrap();
            verify_slice(&bytes, slice).unwrap();
            let mut scratch = Vec::new();
            for stored in batch::split(&bytes) {
                let base = batch::BatchHeader::decode(stored).unwrap().base_offset;
                for (i, record) in batch::records(stored, &mut scratch).unwrap().enumerate() {
                    let record = record.unwrap();
                    records.entry(slice.queue).or_default().push((base + i as u64, record.value.unwrap().to_vec()));
                }
            }
        }
    }
    let generation = manifest["generation"].as_u64().unwrap();
    assert_eq!(generation, objects.len() as u64, "one generation per object");
    Some(Uploaded { generation, manifests_listed, records })
}

/// The JSON of the newest manifest stored under `place` (a shard's place
/// in the bucket), and how many manifests are stored there; None if none is.
async fn newest_manifest(store: &ObjectStore, place: &str) -> Option<(serde_json::Value, usize)> {
    let manifests = store.list(&format!("{place}manifest/")).await.unwrap();
    let newest = manifests.iter().map(|l| l.key.clone()).max()?;
    let manifest = serde_json::from_slice(&store.get(&newest, None).await.unwrap()).unwrap();
    Some((manifest, manifests.len()))
}

/// Waits (at most 120 s) until the manifests of `owner`'s (a broker group,
/// or `single`) two shards hold at least `records` records in all, and
/// the generations before the one each names last are deleted (an
/// uploader deletes them just after it stores the next).
fn wait_uploaded(runtime: &tokio::runtime::Runtime, store: &ObjectStore, owner: &str, records: usize) -> Vec<Uploaded> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let shards: Vec<Option<Uploaded>> = (0..2).map(|s| runtime.block_on(uploaded(store, owner, s))).collect();
        let held: usize = shards.iter().flatten().flat_map(|u| u.records.values()).map(Vec::len).sum();
        let manifests = shards.iter().flatten().map(|u| u.manifests_listed).max().unwrap_or(0);
        if held >= records && manifests <= 2 {
            return shards.into_iter().flatten().collect();
        }
        let late = format!("{records} records uploaded and older manifests deleted within 120 s");
        assert!(Instant::now() < deadline, "{late} (held {held}, {manifests} manifests listed)");
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Every uploaded record is the one sent to its queue at its offset, each
/// queue's from offset 0 on without a gap or a repeat, none of `local`.
fn check(shards: &[Uploaded], sent: &HashMap<Vec<u8>, (u32, u64)>) {
    for shard in shards {
        for (storage_id, records) in &shard.records {
            assert!(records.iter().all(|(_, v)| !v.starts_with(b"local-")), "an untiered topic's record was uploaded");
            let queue = sent[&records[0].1].0;
            for (at, (offset, value)) in records.iter().enumerate() {
                assert_eq!(*offset, at as u64, "storage id {storage_id}: offsets from 0, each once");
                assert_eq!(sent.get(value), Some(&(queue, *offset)), "the record sent there");
            }
        }
    }
}

#[test]
fn sealed_segments_of_tiered_topics_reach_the_bucket_named_by_a_manifest() {
    let dir = tempfile::tempdir().unwrap();
    let weed = Seaweed::start(&dir.path().join("weed"));
    let mut flags = weed.broker_flags(dir.path());
    flags.extend(["--segment-mib", "1", "--batch-bytes-max", "262144"].map(String::from));
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let mut broker = common::Broker::start(&dir.path().join("broker"), &flags);
    let client = broker.client();
    let tiered = [("remote.storage.enable".to_string(), "true".to_string())];
    client.create_topic_with_configs("tiered", 2, 0, &tiered).unwrap();
    client.create_topic("local", 2, 0).unwrap();

    let mut sent = HashMap::new();
    for (i, r) in produce(&client, "tiered", 0, 3000).into_iter().enumerate() {
        sent.insert(value("tiered", i), (r.queue, r.offset));
    }
    produce(&client, "local", 0, 3000);
    let store = weed.store("");
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let first = wait_uploaded(&runtime, &store, "single", 1000);
    check(&first, &sent);
    let held: usize = first.iter().flat_map(|u| u.records.values()).map(Vec::len).sum();

    // Killed while it may be uploading: the next life goes on from the manifest.
    produce(&client, "local", 3000, 1000);
    broker.kill9();
    broker.restart();
    let client = broker.client();
    for (i, r) in produce(&client, "tiered", 3000, 3000).into_iter().enumerate() {
        sent.insert(value("tiered", 3000 + i), (r.queue, r.offset));
    }
    produce(&client, "local", 4000, 3000);
    let after = wait_uploaded(&runtime, &store, "single", held + 2000);
    check(&after, &sent);
    assert!(after.iter().map(|u| u.generation).sum::<u64>() > first.iter().map(|u| u.generation).sum::<u64>());
}

/// The metrics sample `sample` of shard `shard` (0 when absent).
fn shard_metric(admin: &str, name: &str, shard: u32, more: &str) -> f64 {
    common::metric(admin, &format!("{name}{{shard=\"{shard}\"{more}}}")).unwrap_or(0.0)
}

#[test]
fn a_tiered_topic_reads_whole_from_offset_0_while_local_disk_keeps_its_tail() {
    let dir = tempfile::tempdir().unwrap();
    let weed = Seaweed::start(&dir.path().join("weed"));
    let kafka = format!("127.0.0.1:{}", common::free_port_pair("127.0.0.1"));
    let Tail { broker, admin, shard, sent } = tiered_tail(dir.path(), &weed, 5000, &["--kafka-listen", &kafka], &[]);
    let client = broker.client();
    assert!(sent.iter().enumerate().all(|(i, r)| (r.queue, r.offset) == (0, i as u64)));
    // Held only until the last sealed segment is uploaded.
    common::wait_until("no queue held by uploads", Duration::from_secs(60), || {
        shard_metric(&admin, "ringmq_tiered_local_retention_held_queues", shard, "") == 0.0
    });
    assert_eq!(client.list_offsets("tiered", 0).unwrap(), (0, 5000), "readers still start at 0");

    // The native SDK reads every record from offset 0, the old ones from the bucket.
    let native = common::consume(&mut from_the_start(&client), 5000, Duration::from_secs(60));
    let native: Vec<(u64, Vec<u8>)> = native.iter().map(|m| (m.offset, m.value_or_empty().to_vec())).collect();
    let expected: Vec<(u64, Vec<u8>)> = (0..5000).map(|i| (i as u64, value("tiered", i))).collect();
    assert_eq!(native.len(), expected.len());
    assert!(native == expected, "the native SDK reads the records sent, in order");
    assert!(shard_metric(&admin, "ringmq_tiered_remote_reads_total", shard, "") > 0.0, "some came from the bucket");

    // A tag-filtered consumer gets its tag's records only, the old ones filtered from the bucket.
    let mut tagged = from_the_start(&client);
    tagged.filter_tags("tiered", "t1");
    let got = common::consume(&mut tagged, 1667, Duration::from_secs(60));
    assert!(got.iter().map(|m| m.offset).eq((1..5000).step_by(3)), "every third record, from offset 1");
    assert!(got.iter().all(|m| m.value_or_empty() == value("tiered", m.offset as usize)));

    // An old message is found by its id, from the object's lookup entries.
    let found = client.find_by_id(sent[10].message_id).unwrap();
    assert_eq!(found.messages.len(), 1);
    let m = &found.messages[0];
    assert_eq!((m.topic.as_str(), m.queue, m.offset), ("tiered", 0, 10));
    assert_eq!(m.value_or_empty(), value("tiered", 10));

    // A Kafka client too.
    let out = common::tools::command("kcat")
        .args(["-b", &kafka, "-C", "-t", "tiered", "-o", "beginning", "-e", "-f", "%o %s\\n"])
        .output()
        .unwrap();
    assert!(out.status.success(), "kcat: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    let kcat: Vec<(u64, Vec<u8>)> = text
        .lines()
        .map(|l| l.split_once(' ').unwrap())
        .map(|(o, v)| (o.parse().unwrap(), v.as_bytes().to_vec()))
        .collect();
    assert_eq!(kcat.len(), expected.len());
    assert!(kcat == expected, "kcat reads the same records at the same offsets");
}

/// A tiered test broker's flags (the bucket, 1 MiB segments, retention
/// checked often, `extra`) and its admin listener's address.
fn tiered_flags(dir: &std::path::Path, weed: &Seaweed, extra: &[&str]) -> (Vec<String>, String) {
    let admin = format!("127.0.0.1:{}", common::ports::free_ports("127.0.0.1", 1));
    let mut flags = weed.broker_flags(dir);
    flags.extend(extra.iter().map(|f| f.to_string()));
    flags
        .extend(["--segment-mib", "1", "--batch-bytes-max", "262144", "--retention-check-ms", "300"].map(String::from));
    flags.extend(["--s3-attempts".into(), "2".into(), "--admin-listen".into(), admin.clone()]);
    (flags, admin)
}

/// A broker (with `extra` flags) whose tiered topic `tiered` (one queue,
/// more `configs`) keeps 1 s locally, fed `count` records and waited for
/// until local disk holds only the tail.
fn tiered_tail(dir: &std::path::Path, weed: &Seaweed, count: usize, extra: &[&str], configs: &[(&str, &str)]) -> Tail {
    let (flags, admin) = tiered_flags(dir, weed, extra);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let broker = common::Broker::start(&dir.join("broker"), &flags);
    let client = broker.client();
    let mut all = vec![("remote.storage.enable", "true"), ("local.retention.ms", "1000")];
    all.extend_from_slice(configs);
    let all: Vec<(String, String)> = all.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect();
    client.create_topic_with_configs("tiered", 1, 0, &all).unwrap();
    let shard = client.queue_shard("tiered", 0).unwrap();
    let sent = produce(&client, "tiered", 0, count);
    common::wait_until("local disk down to the tail", Duration::from_secs(90), || {
        shard_metric(&admin, "ringmq_storage_segment_bytes", shard, ",state=\"sealed\"") <= (2 << 20) as f64
    });
    Tail { broker, admin, shard, sent }
}

/// A broker whose tiered topic's old records are only in the bucket.
struct Tail {
    broker: common::Broker,
    admin: String,
    shard: u32,
    sent: Vec<SendResult>,
}

/// A consumer of `tiered` from its first offset.
fn from_the_start(client: &std::sync::Arc<ringmq::client::Client>) -> ringmq::client::Consumer {
    let mut consumer = ringmq::client::Consumer::new(client.clone(), None);
    consumer.assign_all("tiered", ringmq::client::StartFrom::Earliest).unwrap();
    consumer
}

#[test]
fn a_damaged_object_is_never_served_and_a_bucket_gone_fails_only_reads_from_it() {
    let dir = tempfile::tempdir().unwrap();
    let weed = Seaweed::start(&dir.path().join("weed"));
    let Tail { broker, admin, shard, .. } = tiered_tail(dir.path(), &weed, 4000, &[], &[]);
    let client = broker.client();

    // One byte of the oldest object's first slice flipped in the bucket.
    let store = weed.store("");
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let objects = runtime.block_on(store.list(&format!("single/shard-{shard}/objects/"))).unwrap();
    let oldest = objects.iter().map(|o| o.key.clone()).min().expect("an object uploaded");
    let mut bytes = runtime.block_on(store.get(&oldest, None)).unwrap().to_vec();
    bytes[100] ^= 0x40;
    runtime.block_on(store.put(&oldest, bytes.into())).unwrap();

    let failed = from_the_start(&client).poll(Duration::from_secs(5)).unwrap_err().to_string();
    assert!(failed.contains("fails its check") && failed.contains("damaged"), "{failed}");
    assert!(shard_metric(&admin, "ringmq_tiered_remote_corrupt_total", shard, "") >= 1.0);
    // A consumer that skips damage reads on past the damaged slice; nothing it gets is wrong.
    let mut skipping = from_the_start(&client);
    skipping.set_skip_corrupt(true);
    let mut got = Vec::new();
    common::wait_until("the skipping consumer at the end", Duration::from_secs(60), || {
        got.extend(skipping.poll(Duration::from_millis(200)).unwrap());
        got.len() as u64 + skipping.skipped_corrupt() >= 4000
    });
    let skipped = skipping.skipped_corrupt();
    assert!(skipped > 0 && got.len() as u64 + skipped == 4000, "{} read, {skipped} skipped", got.len());
    assert!(got.iter().all(|m| m.value_or_empty() == value("tiered", m.offset as usize)), "only what was sent");

    // The bucket gone: reads below the local start fail (retriably), produce and the tail go on.
    drop(weed);
    let failures = shard_metric(&admin, "ringmq_tiered_remote_read_failures_total", shard, "");
    let mut cold = from_the_start(&client);
    let _ = cold.poll(Duration::from_secs(3));
    assert!(shard_metric(&admin, "ringmq_tiered_remote_read_failures_total", shard, "") > failures);
    let sent = &produce(&client, "tiered", 4000, 1)[0];
    assert_eq!((sent.queue, sent.offset), (0, 4000), "produce goes on without the bucket");
    let mut tail = ringmq::client::Consumer::new(client.clone(), None);
    tail.assign("tiered", &[0], ringmq::client::StartFrom::Offset(4000)).unwrap();
    let last = common::consume(&mut tail, 1, Duration::from_secs(30));
    assert_eq!(last[0].value_or_empty(), value("tiered", 4000));
}

#[test]
fn total_retention_moves_a_tiered_queues_start_and_deletes_its_objects() {
    let dir = tempfile::tempdir().unwrap();
    let weed = Seaweed::start(&dir.path().join("weed"));
    let Tail { broker, shard, .. } = tiered_tail(dir.path(), &weed, 6000, &[], &[("retention.bytes", "2097152")]);
    let client = broker.client();
    let store = weed.store("");
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let objects = || runtime.block_on(store.list(&format!("single/shard-{shard}/objects/"))).unwrap();
    // About 6 MiB sent, 2 MiB kept: the oldest objects go, the readers' start moves past them.
    common::wait_until("the bucket down to what retention keeps", Duration::from_secs(60), || {
        objects().iter().map(|o| o.size).sum::<u64>() <= 3 << 20 && client.list_offsets("tiered", 0).unwrap().0 > 0
    });
    let (start, end) = client.list_offsets("tiered", 0).unwrap();
    assert!(start >= 2000 && end == 6000, "kept [{start}, {end})");
    let got = common::consume(&mut from_the_start(&client), (end - start) as usize, Duration::from_secs(60));
    assert_eq!(got.len() as u64, end - start);
    assert!(got.iter().enumerate().all(|(i, m)| m.offset == start + i as u64), "from the new start on, in order");
    assert!(got.iter().all(|m| m.value_or_empty() == value("tiered", m.offset as usize)));
}

/// Kafka's time retention on the bucket: records stamped three years ago
/// (CreateTime, sent over Kafka), then records of now, on a topic keeping a
/// day: the objects holding only old records are deleted and the queue's
/// start moves past them; the object where the old end and the new begin
/// meet is kept whole. Then the topic is deleted, and its objects with it.
#[test]
fn time_retention_deletes_the_objects_whose_records_are_all_older_and_a_deleted_topic_all() {
    use common::kafka::{batch, call, connect, produce_body, records};
    use kafka_protocol::records::Record;
    let dir = tempfile::tempdir().unwrap();
    let weed = Seaweed::start(&dir.path().join("weed"));
    let kafka = format!("127.0.0.1:{}", common::free_port_pair("127.0.0.1"));
    let day = ("retention.ms", "86400000");
    let Tail { broker, shard, .. } = tiered_tail(dir.path(), &weed, 0, &["--kafka-listen", &kafka], &[day]);
    // `records`' batch of 100, each record stamped and valued by its number in all.
    let old = |first: usize| -> Vec<Record> {
        let batch = records(100, None).into_iter().enumerate();
        batch
            .map(|(j, r)| {
                let i = first + j;
                Record {
                    timestamp: 1_700_000_000_000 + i as i64,
                    key: None,
                    value: Some(value("tiered", i).into()),
                    ..r
                }
            })
            .collect()
    };
    let mut stream = connect(&kafka);
    for first in (0..3000).step_by(100) {
        let body = produce_body("tiered", 0, batch(&old(first)));
        let answer: kafka_protocol::messages::ProduceResponse =
            call(&mut stream, kafka_protocol::messages::ApiKey::Produce, 9, &body);
        let answer = &answer.responses[0].partition_responses[0];
        assert_eq!(answer.error_code, 0, "{:?}", answer.error_message);
    }
    let client = broker.client();
    produce(&client, "tiered", 3000, 1500);
    let store = weed.store("");
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let objects = || block(&runtime, store.list(&format!("single/shard-{shard}/objects/")));
    common::wait_until("the old records' objects deleted", Duration::from_secs(60), || {
        client.list_offsets("tiered", 0).unwrap().0 > 0
    });
    let (start, end) = client.list_offsets("tiered", 0).unwrap();
    assert!((1500..3000).contains(&start) && end == 4500, "kept [{start}, {end})");
    let got = common::consume(&mut from_the_start(&client), (end - start) as usize, Duration::from_secs(60));
    assert!(got.iter().enumerate().all(|(i, m)| m.offset == start + i as u64), "from the new start on, in order");
    assert!(got.iter().all(|m| m.value_or_empty() == value("tiered", m.offset as usize)));
    assert_eq!(got.len() as u64, end - start);
    let stamped_then =
        got.iter().filter(|m| m.offset < 3000).all(|m| m.timestamp_ms == 1_700_000_000_000 + m.offset as i64);
    assert!(stamped_then, "the old records kept keep their timestamps");
    common::wait_until("every object left holds the start or later", Duration::from_secs(30), || {
        let manifest = uploaded_manifest(&runtime, &store, shard);
        objects().iter().all(|o| manifest.iter().any(|(key, next)| o.key.ends_with(key.as_str()) && *next > start))
    });

    // A deleted topic's objects leave the bucket, as Kafka deletes its remote segments.
    client.delete_topic("tiered").unwrap();
    common::wait_until("the deleted topic's objects deleted", Duration::from_secs(60), || objects().is_empty());
    assert!(uploaded_manifest(&runtime, &store, shard).is_empty(), "the manifest names none");
}

/// The objects shard `shard`'s newest manifest names, each with where its
/// records end (the next offset of the queues it holds).
fn uploaded_manifest(runtime: &tokio::runtime::Runtime, store: &ObjectStore, shard: u32) -> Vec<(String, u64)> {
    let place = format!("single/shard-{shard}/");
    let (manifest, _) = runtime.block_on(newest_manifest(store, &place)).expect("a manifest");
    let objects = manifest["objects"].as_array().unwrap().iter();
    let next = |o: &serde_json::Value| o["queues"].as_object().unwrap().values().map(|r| r[1].as_u64().unwrap()).max();
    objects.map(|o| (o["key"].as_str().unwrap().to_string(), next(o).unwrap())).collect()
}

#[test]
fn in_a_broker_group_the_leader_uploads_its_follower_knows_the_manifest_and_goes_on_when_it_is_killed() {
    let _cluster = common::one_cluster();
    let dir = tempfile::tempdir().unwrap();
    let weed = Seaweed::start(&dir.path().join("weed"));
    let etcd = common::etcd::Etcd::start(&dir.path().join("etcd"));
    let bucket = weed.broker_flags(dir.path());
    let first_admin = common::ports::free_ports("127.0.0.1", 2);
    let admins = [0, 1].map(|i| format!("127.0.0.1:{}", first_admin + i));
    let node = |name, ip, admin| tiered_node(dir.path(), &etcd, &bucket, ("g1", name, ip), admin);
    let mut a = node("a", "127.0.0.141", &admins[0]);
    let b = node("b", "127.0.0.142", &admins[1]);
    let client = common::connect_retrying(a.addr(), 1000);
    let configs = [("remote.storage.enable", "true"), ("local.retention.ms", "1000")];
    let configs: Vec<(String, String)> = configs.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect();
    client.create_topic_with_configs("tiered", 1, 0, &configs).unwrap();
    let shard = client.queue_shard("tiered", 0).unwrap();
    produce(&client, "tiered", 0, 3000);

    let generation = |admin: &str| shard_metric(admin, "ringmq_tiered_manifest_generation", shard, "");
    common::wait_until("the follower knows the leader's manifest", Duration::from_secs(60), || {
        generation(&admins[0]) >= 1.0 && generation(&admins[1]) == generation(&admins[0])
    });
    let uploaded_here = |admin: &str| shard_metric(admin, "ringmq_tiered_uploaded_objects_total", shard, "");
    assert!(
        uploaded_here(&admins[0]) >= 1.0 && uploaded_here(&admins[1]) == 0.0,
        "the leader uploads, not the follower"
    );
    let store = weed.store("");
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    assert!(runtime.block_on(store.list("single/")).unwrap().is_empty(), "under the broker group's place");

    // An upload whose manifest was never stored (named as a crashed leader's
    // of epoch 0 would be), then the leader killed while it uploads: the
    // follower leads, goes on from the manifest, and deletes what no
    // manifest names.
    let place = format!("g1/shard-{shard}/");
    let orphan = format!("{place}objects/{:020}-{:020}-{:020}.obj", 0, 0, 1);
    runtime.block_on(store.put(&orphan, b"an upload no manifest names".to_vec().into())).unwrap();
    produce(&client, "tiered", 3000, 2000);
    a.kill9();
    let leads = || common::metric_if_up(&admins[1], &format!("ringmq_shard_role{{shard=\"{shard}\",role=\"leader\"}}"));
    common::wait_until("the follower leads", Duration::from_secs(60), || leads() == Some(1.0));
    let client = common::connect_retrying(b.addr(), 1000);
    produce(&client, "tiered", 5000, 3000);
    let values: HashMap<Vec<u8>, (u32, u64)> = (0..8000).map(|i| (value("tiered", i), (0, i as u64))).collect();
    check(&wait_uploaded(&runtime, &store, "g1", 6000), &values);
    assert!(uploaded_here(&admins[1]) >= 1.0, "the new leader uploads");
    common::wait_until("only the objects a manifest names left", Duration::from_secs(60), || {
        let (manifest, _) = runtime.block_on(newest_manifest(&store, &place)).expect("a manifest");
        let named: Vec<String> = manifest["objects"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| format!("{place}{}", o["key"].as_str().unwrap()))
            .collect();
        // An upload under way is of a later segment than the last named.
        let listed = block(&runtime, store.list(&format!("{place}objects/")));
        listed.iter().all(|l| named.contains(&l.key) || l.key > *named.last().unwrap())
    });
    assert_eq!(block(&runtime, store.head(&orphan)), None, "the orphan planted is deleted");
    read_whole(&client, 8000);
}

/// A tiered queue moves to another broker group whole: the target copies
/// it from the source's first offset in the bucket (the source reads its
/// bucket for the copy), serves and uploads it under its own place, and
/// the source's objects of it are deleted after the switch.
#[test]
fn a_tiered_queue_moves_to_another_broker_group_whole_and_leaves_the_sources_bucket() {
    let _cluster = common::one_cluster();
    let dir = tempfile::tempdir().unwrap();
    let weed = Seaweed::start(&dir.path().join("weed"));
    let etcd = common::etcd::Etcd::start(&dir.path().join("etcd"));
    let bucket = weed.broker_flags(dir.path());
    let first_admin = common::ports::free_ports("127.0.0.1", 2);
    let admins = [0, 1].map(|i| format!("127.0.0.1:{}", first_admin + i));
    let node = |group, ip, admin| tiered_node(dir.path(), &etcd, &bucket, (group, group, ip), admin);
    let east = node("east", "127.0.0.151", &admins[0]);
    let west = node("west", "127.0.0.152", &admins[1]);
    let both = format!("{},{}", east.addr(), west.addr());
    let client = common::connect_retrying(&both, 1000);
    let configs = [("remote.storage.enable", "true"), ("local.retention.ms", "1000")];
    let configs: Vec<(String, String)> = configs.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect();
    client.create_topic_with_configs("tiered", 1, 0, &configs).unwrap();
    let (from, to, from_admin) = match client.owner("tiered", 0).unwrap().starts_with("127.0.0.151:") {
        true => ("east", "west", &admins[0]),
        false => ("west", "east", &admins[1]),
    };
    produce(&client, "tiered", 0, 3000);
    let sealed = || {
        let (_, text) = common::get(from_admin, "/metrics");
        let lines = text.lines().filter(|l| l.starts_with("ringmq_storage_segment_bytes{") && l.contains("sealed"));
        lines.filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok()).sum::<f64>()
    };
    // Local retention moves the start only past what the bucket holds.
    let local_start = || {
        let (_, text) = common::get(from_admin, "/metrics");
        let line = text.lines().find(|l| l.starts_with("ringmq_queue_start_offset{") && l.contains("\"tiered\""));
        line.and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok()).unwrap_or(0.0)
    };
    common::wait_until("the source's local disk down to the tail", Duration::from_secs(90), || {
        local_start() > 0.0 && sealed() <= (2 << 20) as f64
    });
    let store = weed.store("");
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let objects_of = |owner: &str| {
        let listed = block(&runtime, store.list(&format!("{owner}/")));
        listed.into_iter().filter(|l| l.key.contains("/objects/")).count()
    };
    assert!(objects_of(from) > 0, "the source uploaded the queue's older records");

    let moved = std::process::Command::new(env!("CARGO_BIN_EXE_ringmq"))
        .args(["cluster", "move", "--cluster", &etcd.url, "--topic", "tiered", "--queue", "0", "--to", to])
        .output()
        .unwrap();
    assert!(moved.status.success(), "{}", String::from_utf8_lossy(&moved.stderr));
    let client = common::connect_retrying(&both, 1000);
    let target_ip = if to == "east" { "127.0.0.151:" } else { "127.0.0.152:" };
    assert!(client.owner("tiered", 0).unwrap().starts_with(target_ip), "the target serves the queue");
    assert_eq!(client.list_offsets("tiered", 0).unwrap(), (0, 3000), "whole, from offset 0");
    produce(&client, "tiered", 3000, 500);
    read_whole(&client, 3500);
    let values: HashMap<Vec<u8>, (u32, u64)> = (0..3500).map(|i| (value("tiered", i), (0, i as u64))).collect();
    check(&wait_uploaded(&runtime, &store, to, 2500), &values);
    common::wait_until("the source's objects of the queue deleted", Duration::from_secs(60), || objects_of(from) == 0);
    drop((east, west));
}

/// Node `name` of broker group `group` on `ip` with the bucket's flags
/// `bucket`: 1 MiB segments, retention checked every 300 ms, its admin
/// listener on `admin`.
fn tiered_node(
    dir: &std::path::Path,
    etcd: &common::etcd::Etcd,
    bucket: &[String],
    (group, name, ip): (&str, &str, &str),
    admin: &str,
) -> common::Broker {
    let listen = format!("{ip}:{}", common::free_port_pair(ip));
    let mut args = vec!["--cluster", &etcd.url, "--broker-group", group, "--node", name, "--lease-ms", "1000"];
    args.extend(["--insync-min", "1", "--segment-mib", "1", "--batch-bytes-max", "262144"]);
    args.extend(["--retention-check-ms", "300", "--admin-listen", admin]);
    args.extend(bucket.iter().map(String::as_str));
    common::Broker::start_listening(&dir.join(name), &listen, &args)
}

/// What a call to the bucket gave.
fn block<T>(runtime: &tokio::runtime::Runtime, call: impl std::future::Future<Output = Result<T, ObjectError>>) -> T {
    runtime.block_on(call).unwrap()
}

/// Every record of `tiered`'s queue 0, from offset 0 to `end`, is the one sent there.
fn read_whole(client: &std::sync::Arc<ringmq::client::Client>, end: u64) {
    let got = common::consume(&mut from_the_start(client), end as usize, Duration::from_secs(120));
    assert_eq!(got.len() as u64, end, "every record from offset 0");
    for (i, m) in got.iter().enumerate() {
        assert_eq!(m.offset, i as u64, "in order, each once");
        assert_eq!(m.value_or_empty(), value("tiered", i), "offset {i}: the record sent there");
    }
}

#[test]
fn with_the_bucket_stopped_for_a_minute_produce_goes_on_and_uploads_resume() {
    let dir = tempfile::tempdir().unwrap();
    let mut weed = Seaweed::start(&dir.path().join("weed"));
    let Tail { broker, admin, shard, .. } = tiered_tail(dir.path(), &weed, 2000, &["--s3-check-ms", "1000"], &[]);
    let client = broker.client();
    let metric = |name: &str| shard_metric(&admin, name, shard, "");
    let doctor = || doctor_on(&dir.path().join("broker"), &admin);
    let sealed = || shard_metric(&admin, "ringmq_storage_segment_bytes", shard, ",state=\"sealed\"");

    // A minute without the bucket, producing all along: every produce is
    // acknowledged, what is not uploaded stays on local disk, the tail reads.
    weed.stop();
    let failures = metric("ringmq_tiered_upload_failures_total");
    let (stopped, mut sent) = (Instant::now(), 2000);
    while stopped.elapsed() < Duration::from_secs(60) && sent < 6000 {
        let acked = produce(&client, "tiered", sent, 250);
        assert!(acked.iter().enumerate().all(|(i, r)| r.offset == (sent + i) as u64), "acknowledged in order");
        sent += 250;
        std::thread::sleep(Duration::from_secs(4));
    }
    assert!(metric("ringmq_tiered_upload_failures_total") > failures, "uploads failed meanwhile");
    assert_eq!(metric("ringmq_tiered_local_retention_held_queues"), 1.0, "local retention waits for the bucket");
    assert!(sealed() > (3 << 20) as f64, "the records not uploaded stay on local disk ({} bytes sealed)", sealed());
    let (passed, said) = doctor();
    assert!(!passed, "{said}");
    for line in ["FAIL tiered bucket", "FAIL tiered uploads", "warn tiered retention"] {
        assert!(said.lines().any(|l| l.starts_with(line)), "doctor says {line:?}:\n{said}");
    }
    let mut tail = ringmq::client::Consumer::new(client.clone(), None);
    tail.assign("tiered", &[0], ringmq::client::StartFrom::Offset(sent as u64 - 1)).unwrap();
    assert_eq!(common::consume(&mut tail, 1, Duration::from_secs(30))[0].value_or_empty(), value("tiered", sent - 1));

    // Back: uploads resume, local disk goes back to the tail, nothing is lost.
    weed.resume();
    common::wait_until("uploads caught up and local disk back to the tail", Duration::from_secs(120), || {
        metric("ringmq_tiered_local_retention_held_queues") == 0.0 && sealed() <= (2 << 20) as f64
    });
    read_whole(&client, sent as u64);
    common::wait_until("the bucket checked again", Duration::from_secs(30), || doctor().0);
    let said = doctor().1;
    for line in ["ok   tiered bucket", "ok   tiered uploads", "ok   tiered retention"] {
        assert!(said.lines().any(|l| l.starts_with(line)), "doctor says {line:?}:\n{said}");
    }
}

/// `ringmq doctor` of the broker keeping `data_dir` with its admin listener
/// `admin`: whether it passed, and what it printed.
fn doctor_on(data_dir: &std::path::Path, admin: &str) -> (bool, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ringmq"))
        .args(["doctor", "--data-dir", data_dir.to_str().unwrap(), "--admin", admin])
        .output()
        .expect("run ringmq doctor");
    (out.status.success(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

#[test]
fn killed_while_local_retention_deletes_nothing_is_lost_or_uploaded_twice() {
    let dir = tempfile::tempdir().unwrap();
    let weed = Seaweed::start(&dir.path().join("weed"));
    let Tail { mut broker, admin, shard, .. } = tiered_tail(dir.path(), &weed, 2000, &[], &[]);
    let sealed = || shard_metric(&admin, "ringmq_storage_segment_bytes", shard, ",state=\"sealed\"");
    let mut sent = 2000;
    for _ in 0..3 {
        produce(&broker.client(), "tiered", sent, 1500);
        sent += 1500;
        // Killed as soon as local retention is seen deleting what was just uploaded.
        let grown = sealed();
        common::wait_until("local retention deleting", Duration::from_secs(60), || sealed() < grown);
        broker.kill9();
        broker.restart();
    }
    let client = broker.client();
    read_whole(&client, sent as u64);
    let store = weed.store("");
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let values: HashMap<Vec<u8>, (u32, u64)> = (0..sent).map(|i| (value("tiered", i), (0, i as u64))).collect();
    check(&wait_uploaded(&runtime, &store, "single", sent - 1500), &values);
}

#[test]
fn an_empty_data_directory_restored_from_the_bucket_serves_what_it_holds() {
    let dir = tempfile::tempdir().unwrap();
    let weed = Seaweed::start(&dir.path().join("weed"));
    let Tail { mut broker, shard, .. } = tiered_tail(dir.path(), &weed, 3000, &[], &[]);
    broker.client().create_topic("untiered", 1, 0).unwrap();
    produce(&broker.client(), "untiered", 0, 10);
    let store = weed.store("");
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    // The disk lost: what the bucket holds is what comes back.
    let uploaded = runtime.block_on(uploaded(&store, "single", shard as usize)).expect("a manifest");
    let end = uploaded.records.values().map(Vec::len).sum::<usize>() as u64;
    assert!(end >= 2000, "most of the topic is in the bucket ({end} records)");
    common::wait_until("the bucket's copy of the metadata names every topic", Duration::from_secs(30), || {
        let copy = runtime.block_on(store.get("single/metadata", None)).map(|b| b.to_vec()).unwrap_or_default();
        copy.windows(8).any(|w| w == b"untiered")
    });
    broker.kill9();
    std::fs::remove_dir_all(dir.path().join("broker")).unwrap();

    let (flags, _) = tiered_flags(dir.path(), &weed, &["--tiered-restore"]);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let mut restored = common::Broker::start(&dir.path().join("restored"), &flags);
    let client = restored.client();
    assert_eq!(client.list_offsets("tiered", 0).unwrap(), (0, end), "the bucket's offsets, before anything is local");
    read_whole(&client, end);
    let next = produce(&client, "tiered", end as usize, 10);
    assert!(next.iter().enumerate().all(|(i, r)| r.offset == end + i as u64), "appends go on from the bucket's end");
    assert_eq!(client.list_offsets("untiered", 0).unwrap(), (0, 0), "an untiered topic comes back empty");

    // Restarted without the flag, it keeps its topics and starts.
    let flags: Vec<&str> = flags.into_iter().filter(|f| *f != "--tiered-restore").collect();
    restored.kill9();
    let restarted = common::Broker::start(&dir.path().join("restored"), &flags);
    let client = restarted.client();
    assert_eq!(client.list_offsets("tiered", 0).unwrap(), (0, end + 10));
    read_whole(&client, end + 10);
}

#[test]
fn delete_records_below_the_local_start_moves_the_queues_start_in_the_bucket() {
    let dir = tempfile::tempdir().unwrap();
    let weed = Seaweed::start(&dir.path().join("weed"));
    let Tail { mut broker, shard, .. } = tiered_tail(dir.path(), &weed, 4000, &[], &[]);
    let client = broker.client();
    let refused = client.delete_records("tiered", 0, Some(4001)).unwrap_err().to_string();
    assert!(refused.contains("out of range") || refused.contains("OffsetOutOfRange"), "{refused}");
    assert_eq!(client.list_offsets("tiered", 0).unwrap(), (0, 4000), "a refused request changes nothing");

    assert_eq!(client.delete_records("tiered", 0, Some(1500)).unwrap(), 1500, "the readers' new start");
    assert_eq!(client.list_offsets("tiered", 0).unwrap(), (1500, 4000));
    let got = common::consume(&mut from_the_start(&client), 2500, Duration::from_secs(60));
    assert!(got.iter().enumerate().all(|(i, m)| m.offset == 1500 + i as u64), "from 1500 on, in order");
    assert!(got.iter().all(|m| m.value_or_empty() == value("tiered", m.offset as usize)));

    // The bucket's manifest says so, and keeps no object wholly below it.
    let store = weed.store("");
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let place = format!("single/shard-{shard}/");
    let (manifest, _) = runtime.block_on(newest_manifest(&store, &place)).expect("a manifest");
    let starts: Vec<u64> = manifest["starts"].as_object().unwrap().values().map(|v| v.as_u64().unwrap()).collect();
    assert_eq!(starts, vec![1500]);
    for object in manifest["objects"].as_array().unwrap() {
        let ranges = object["queues"].as_object().unwrap().values();
        assert!(
            ranges.into_iter().all(|r| r[1].as_u64().unwrap() > 1500),
            "an object below the start is gone: {object}"
        );
    }

    // It holds over a restart.
    broker.kill9();
    broker.restart();
    let client = broker.client();
    common::wait_until("the start read back from the bucket", Duration::from_secs(30), || {
        client.list_offsets("tiered", 0).ok() == Some((1500, 4000))
    });
}
