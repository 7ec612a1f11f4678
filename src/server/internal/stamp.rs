//! The stamp of a record that waits in an internal queue for delivery
//! (delay levels, the timer log, transaction halves): its due time and
//! destination in headers whose names start with `%`, stripped when it is
//! handed over to its topic.

use crate::protocol::messages::QueueRef;
use ringmq_shards::batch::BatchBuilder;
use ringmq_shards::record::{Header, Headers, Record};

/// Header names the stamp adds (stripped at hand-over).
const DUE: &[u8] = b"%due";
const TOPIC: &[u8] = b"%topic";
const QUEUE: &[u8] = b"%queue";

/// Where and when a stored record is to be delivered.
pub struct Destination<'a> {
    pub due_ms: u64,
    pub topic: &'a str,
    pub queue: u32,
}

/// One batch holding `record` stamped with its destination, and with the
/// headers named in `set` replaced by those values.
pub fn stamped(record: &Record<'_>, now_ms: u64, to: Destination<'_>, set: &[(&[u8], &[u8])]) -> Vec<u8> {
    stamped_all(std::slice::from_ref(record), now_ms, to, set)
}

/// One batch holding every record, each stamped as [`stamped`] does.
pub fn stamped_all(records: &[Record<'_>], now_ms: u64, to: Destination<'_>, set: &[(&[u8], &[u8])]) -> Vec<u8> {
    let (due_bytes, queue_bytes) = (to.due_ms.to_le_bytes(), to.queue.to_le_bytes());
    let mut extra: Vec<(&[u8], &[u8])> = vec![(DUE, &due_bytes), (TOPIC, to.topic.as_bytes()), (QUEUE, &queue_bytes)];
    extra.extend_from_slice(set);
    rebuilt_all(records, now_ms as i64, &extra, |name| set.iter().all(|(n, _)| *n != name))
}

/// The destination a stored record was stamped with.
pub fn destination<'a>(record: &Record<'a>) -> Destination<'a> {
    let header = |name| record.headers.get(name);
    Destination {
        due_ms: header(DUE).and_then(|v| v.try_into().ok()).map_or(0, u64::from_le_bytes),
        topic: header(TOPIC).and_then(|t| std::str::from_utf8(t).ok()).unwrap_or_default(),
        queue: header(QUEUE).and_then(|v| v.try_into().ok()).map_or(0, u32::from_le_bytes),
    }
}

/// A stored record ready to hand over: its destination and the batch
/// without the stamp (`Core::append_until_stored` delivers it).
pub struct Handover {
    pub to: QueueRef,
    pub batch: Vec<u8>,
}

impl Handover {
    pub fn of(record: &Record<'_>, now_ms: u64) -> Handover {
        let to = destination(record);
        let batch = rebuilt(record, now_ms as i64, &[], |name| !name.starts_with(b"%"));
        Handover { to: QueueRef { topic: to.topic.to_string(), queue: to.queue }, batch }
    }
}

/// One batch holding `record` with the headers `keep` accepts plus `extra`.
pub fn rebuilt(
    record: &Record<'_>,
    timestamp_ms: i64,
    extra: &[(&[u8], &[u8])],
    keep: impl Fn(&[u8]) -> bool,
) -> Vec<u8> {
    rebuilt_all(std::slice::from_ref(record), timestamp_ms, extra, keep)
}

/// One batch holding every record, each rebuilt as [`rebuilt`] does.
fn rebuilt_all(
    records: &[Record<'_>],
    timestamp_ms: i64,
    extra: &[(&[u8], &[u8])],
    keep: impl Fn(&[u8]) -> bool,
) -> Vec<u8> {
    let mut b = BatchBuilder::new(timestamp_ms);
    let mut header_bytes = Vec::new();
    for record in records {
        let mut pairs: Vec<Header<'_>> = record.headers.iter().filter(|(name, _)| keep(name)).collect();
        pairs.extend(extra.iter().map(|(name, value)| (*name, Some(*value))));
        header_bytes.clear();
        Headers::encode(&pairs, &mut header_bytes);
        let headers = Headers::from_encoded(pairs.len() as u16, &header_bytes);
        b.push(&Record { timestamp_delta_ms: 0, headers, ..*record });
    }
    b.finish()
}
