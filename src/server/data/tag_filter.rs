//! Tag filtering at fetch: a subscription's expression (`*` or
//! `TagA || TagB`) is matched first by the tag hash kept in the queue index,
//! so batches without a candidate are never read, then by the exact tag, so
//! a hash collision never delivers a wrong message. Matching records are
//! re-packed into batches of consecutive offsets (each with its own CRCs), so
//! nothing that does not match crosses the network.

use crate::server::core::Failure;
use ringmq_shards::batch::{self, BatchBuilder, BatchHeader};
use ringmq_shards::record::tag_hash;
use ringmq_shards::{QueueId, ReadWait, Record, Shard, StorageError};
use std::time::{Duration, Instant};

/// The longest tag expression accepted.
pub const EXPRESSION_MAX: usize = 4096;

/// A parsed tag expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TagFilter {
    All,
    /// Any of these tags, with their hashes.
    Any(Vec<(Vec<u8>, u32)>),
}

impl TagFilter {
    /// Parses `*` (or empty: everything) or tags joined by `||`.
    pub fn parse(expression: &str) -> Result<TagFilter, Failure> {
        let e = expression.trim();
        if e.is_empty() || e == "*" {
            return Ok(TagFilter::All);
        }
        if e.len() > EXPRESSION_MAX {
            return Err(Failure::invalid(format!("tag expression of {} bytes exceeds {EXPRESSION_MAX}", e.len())));
        }
        let mut tags = Vec::new();
        for part in e.split("||") {
            let tag = part.trim();
            if tag.is_empty() || tag.contains('|') || tag == "*" {
                return Err(Failure::invalid(format!(
                    "tag expression {expression:?}: expected `*` or tags joined by `||`"
                )));
            }
            tags.push((tag.as_bytes().to_vec(), tag_hash(tag.as_bytes())));
        }
        Ok(TagFilter::Any(tags))
    }

    /// The index's tag hash may match (no false negatives).
    pub fn may_match(&self, hash: u32) -> bool {
        match self {
            TagFilter::All => true,
            TagFilter::Any(tags) => tags.iter().any(|(_, h)| *h == hash),
        }
    }

    /// The exact tag matches.
    pub fn matches(&self, tag: &[u8]) -> bool {
        match self {
            TagFilter::All => true,
            TagFilter::Any(tags) => tags.iter().any(|(t, _)| t == tag),
        }
    }
}

/// What a filtered read found.
pub struct Filtered {
    /// Re-packed batches of the matching records.
    pub bytes: Vec<u8>,
    /// Offset to read next: past every record looked at, matching or not.
    pub next_offset: u64,
    pub end_offset: u64,
}

/// Like [`Shard::read`], but only records matching `filter` come back. The
/// index's tag hashes pick the batches worth reading; the scan stops after
/// about 16 times `max_bytes` of stored batches, so a fetch over a long run
/// of non-matching records answers (empty, with its offset advanced) instead
/// of scanning the whole queue. At the end it parks up to `wait` for new data.
pub async fn read_filtered(
    storage: &Shard,
    queue: QueueId,
    mut offset: u64,
    max_bytes: usize,
    wait: Duration,
    filter: &TagFilter,
) -> Result<Filtered, StorageError> {
    let deadline = Instant::now() + wait;
    let scan_limit = max_bytes.saturating_mul(16).max(1 << 20);
    let (mut out, mut scanned) = (Vec::new(), 0usize);
    loop {
        let (start, end) = storage.offsets(queue)?;
        if offset < start || offset > end {
            return Err(StorageError::OffsetOutOfRange { queue: queue.0, offset, start, end });
        }
        while offset < end && out.len() < max_bytes && scanned < scan_limit {
            // Asked per step: a compaction pass may move the log's start between two awaits.
            if offset < storage.log_start(queue)? {
                // A compacted queue's part has no index entries: its batches are read and filtered.
                let read = storage.read(queue, offset, max_bytes - out.len(), ReadWait::No).await?;
                repack(&read.bytes, offset, filter, &mut out);
                scanned += read.bytes.len();
                offset = read.next_offset;
                continue;
            }
            let first = storage.entry(queue, offset).await?;
            let (mut next, mut candidate) = (offset + 1, filter.may_match(first.tag_hash));
            while next < end {
                let e = storage.entry(queue, next).await?;
                if e.position != first.position {
                    break;
                }
                candidate |= filter.may_match(e.tag_hash);
                next += 1;
            }
            if candidate {
                let read = storage.read(queue, offset, 1, ReadWait::No).await?;
                repack(&read.bytes, offset, filter, &mut out);
            }
            scanned += first.size as usize;
            offset = next;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if !out.is_empty() || offset < end || left.is_zero() {
            return Ok(Filtered { bytes: out, next_offset: offset, end_offset: end });
        }
        // Nothing matched up to the end: wait for new data, then filter it.
        storage.read(queue, offset, 1, ReadWait::Upto(left)).await?;
    }
}

/// Appends to `out` the records of stored `batches` at or after `from` that
/// match, as stamped batches of consecutive offsets (of the same queue).
pub fn repack(batches: &[u8], from: u64, filter: &TagFilter, out: &mut Vec<u8>) {
    repack_where(batches, from, |_, r| filter.matches(r.tag), out);
}

/// Like [`repack`], keeping the records `keep(offset, record)` accepts.
pub fn repack_where(batches: &[u8], from: u64, keep: impl Fn(u64, &Record<'_>) -> bool, out: &mut Vec<u8>) {
    for b in batch::split(batches) {
        let Some(h) = BatchHeader::decode(b).filter(|h| !h.is_padding()) else { continue };
        let mut run: Option<(u64, BatchBuilder)> = None;
        let mut inflated = Vec::new();
        let Ok(records) = batch::records(b, &mut inflated) else { continue };
        for (k, record) in records.enumerate() {
            let Ok(record) = record else { break };
            let offset = h.base_offset + k as u64;
            if offset >= from && keep(offset, &record) {
                run.get_or_insert_with(|| (offset, BatchBuilder::new(h.first_timestamp_ms))).1.push(&record);
            } else if let Some((base, builder)) = run.take() {
                finish_run(base, builder, h.queue, out);
            }
        }
        if let Some((base, builder)) = run {
            finish_run(base, builder, h.queue, out);
        }
    }
}

fn finish_run(base: u64, builder: BatchBuilder, queue: u32, out: &mut Vec<u8>) {
    let mut b = builder.finish();
    batch::stamp(&mut b, base, queue);
    out.extend_from_slice(&b);
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringmq_shards::record::RecordIter;
    use ringmq_shards::Record;

    fn stored(base: u64, tags: &[&str]) -> Vec<u8> {
        let mut b = BatchBuilder::new(1_000);
        for (i, t) in tags.iter().enumerate() {
            let value = format!("v{}", base + i as u64);
            b.push(&Record { tag: t.as_bytes(), value: Some(value.as_bytes()), ..Record::default() });
        }
        let mut bytes = b.finish();
        batch::stamp(&mut bytes, base, 7);
        bytes
    }

    fn offsets_and_values(bytes: &[u8]) -> Vec<(u64, String)> {
        let mut out = Vec::new();
        for b in batch::split(bytes) {
            let h = batch::verify_stored(b).expect("re-packed batches carry valid CRCs");
            assert_eq!(h.queue, 7);
            for (k, r) in RecordIter::new(&b[batch::HEADER_BYTES..]).enumerate() {
                out.push((h.base_offset + k as u64, String::from_utf8(r.unwrap().value.unwrap().to_vec()).unwrap()));
            }
        }
        out
    }

    #[test]
    fn expressions_parse_or_say_what_is_wrong() {
        assert_eq!(TagFilter::parse(" * ").unwrap(), TagFilter::All);
        assert_eq!(TagFilter::parse("").unwrap(), TagFilter::All);
        let f = TagFilter::parse("TagA || TagB").unwrap();
        assert!(f.matches(b"TagA") && f.matches(b"TagB") && !f.matches(b"TagC") && !f.matches(b""));
        assert!(f.may_match(tag_hash(b"TagB")) && !f.may_match(tag_hash(b"TagC")));
        for bad in ["TagA ||", "|| TagA", "A | B", "A || *"] {
            assert!(TagFilter::parse(bad).unwrap_err().1.contains("expected"), "{bad}");
        }
    }

    #[test]
    fn matching_records_keep_their_offsets_in_runs() {
        let mut all = stored(10, &["A", "B", "A", "A", "C"]);
        all.extend(stored(15, &["A", "B"]));
        let mut out = Vec::new();
        repack(&all, 12, &TagFilter::parse("A").unwrap(), &mut out);
        let got = offsets_and_values(&out);
        assert_eq!(got, vec![(12, "v12".into()), (13, "v13".into()), (15, "v15".into())]);
        assert_eq!(batch::split(&out).count(), 2, "one batch per run of consecutive matches");
    }

    proptest::proptest! {
        /// No tag expression a consumer sends makes the broker panic; one it accepts matches its own tags.
        #[test]
        fn no_expression_makes_parse_panic(e in "\\PC{0,40}", tag in "[A-Za-z]{1,8}") {
            let _ = TagFilter::parse(&e);
            let f = TagFilter::parse(&format!("{tag} || other")).unwrap();
            proptest::prop_assert!(f.matches(tag.as_bytes()) && f.may_match(tag_hash(tag.as_bytes())));
        }
    }
}
