//! A compacted topic through the native SDK: keyed records over several
//! segments and tombstones; the broker's compactor (2 MiB
//! segments, looking every 200 ms) leaves each live key's latest record at
//! the offset it was sent to, a consumer reads the queue across its gaps,
//! lookup by key finds the latest record, and deleted keys are gone.

mod common;

use common::Broker;
use ringmq::client::{Consumer, Message, Producer, ProducerConfig, QueueSelector, SelectorFn, StartFrom};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[test]
fn native_clients_read_a_compacted_queue_across_its_gaps_and_look_keys_up() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(
        dir.path(),
        &["--segment-mib", "2", "--batch-bytes-max", "262144", "--compaction-check-ms", "200"],
    );
    let client = broker.client();
    let configs = [("cleanup.policy", "compact"), ("min.cleanable.dirty.ratio", "0.01"), ("delete.retention.ms", "0")]
        .map(|(n, v)| (n.to_string(), v.to_string()));
    client.create_topic_with_configs("kv", 1, 0, &configs).unwrap();
    let first: SelectorFn = Arc::new(|_, _| 0);
    let producer =
        Producer::new(client.clone(), ProducerConfig { selector: QueueSelector::Custom(first), ..Default::default() });
    let pad = "x".repeat(900);
    // Keys k0-k9 are tagged "low", k10-k19 "high".
    let tag = |k: u32| if k < 10 { "low" } else { "high" };
    let mut messages: Vec<Message> = (0..3000)
        .map(|i| Message::new(format!("v{i}-{pad}")).with_key(format!("k{}", i % 20)).with_tag(tag(i % 20)))
        .collect();
    messages.extend((0..5).map(|k| Message::tombstone(format!("k{k}"))));
    messages.extend(
        (3000..5500)
            .map(|i| Message::new(format!("v{i}-{pad}")).with_key(format!("k{}", 10 + i % 10)).with_tag("high")),
    );
    let futures: Vec<_> = messages.iter().map(|m| producer.send_async("kv", m)).collect();
    let offsets: Vec<u64> = futures.into_iter().map(|f| f.wait().unwrap().offset).collect();
    let mut latest: HashMap<Vec<u8>, (u64, Option<Vec<u8>>)> = HashMap::new();
    for (m, offset) in messages.iter().zip(&offsets) {
        latest.insert(m.key.clone().unwrap(), (*offset, m.value.clone()));
    }
    let live: HashMap<&Vec<u8>, &(u64, Option<Vec<u8>>)> = latest.iter().filter(|(_, (_, v))| v.is_some()).collect();
    let oldest_live = live.values().map(|(o, _)| *o).min().unwrap();
    let deadline = Instant::now() + Duration::from_secs(90);
    let read = loop {
        let mut consumer = Consumer::new(client.clone(), None);
        consumer.assign_all("kv", StartFrom::Earliest).unwrap();
        let got = common::consume(&mut consumer, usize::MAX, Duration::from_secs(3));
        let superseded =
            got.iter().filter(|m| m.offset < oldest_live && latest[m.key.as_ref().unwrap()].0 != m.offset).count();
        let deleted = got.iter().filter(|m| latest[m.key.as_ref().unwrap()].1.is_none()).count();
        if superseded == 0 && deleted == 0 {
            break got;
        }
        assert!(
            Instant::now() < deadline,
            "not compacted in time: {} read, {superseded} superseded, {deleted} of deleted keys",
            got.len()
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    assert!(read.windows(2).all(|w| w[0].offset < w[1].offset), "offsets only go up across the gaps");
    for (key, (offset, value)) in &live {
        let m =
            read.iter().find(|m| m.offset == *offset).unwrap_or_else(|| panic!("the latest of {key:?} at {offset}"));
        assert_eq!((&m.key, &m.value), (&Some(key.to_vec()), value), "as sent");
    }
    assert_eq!(client.list_offsets("kv", 0).unwrap(), (0, 5505), "the queue keeps its start and end");
    let mut low = Consumer::new(client.clone(), None);
    low.filter_tags("kv", "low");
    low.assign_all("kv", StartFrom::Earliest).unwrap();
    let tagged = common::consume(&mut low, usize::MAX, Duration::from_secs(3));
    let mut want: Vec<u64> = read.iter().filter(|m| m.tag == "low").map(|m| m.offset).collect();
    want.sort_unstable();
    assert!(!want.is_empty());
    assert_eq!(tagged.iter().map(|m| m.offset).collect::<Vec<_>>(), want, "a tag filter reads the compacted part too");
    let found = client.find_by_key("kv", b"k7").unwrap().messages;
    assert_eq!(
        found.iter().map(|m| m.offset).collect::<Vec<_>>(),
        vec![latest[&b"k7".to_vec()].0],
        "only the latest is left"
    );
    assert!(client.find_by_key("kv", b"k2").unwrap().messages.is_empty(), "a deleted key is gone");
}
