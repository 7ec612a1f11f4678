//! The shard's commit log in memory: its segments, the append frontier and the
//! group-commit rounds between the frontier and the durable end.

use crate::batch::{self, CheckedBatch, HEADER_BYTES};
use crate::config::FlushPolicy;
use crate::crypt::keyring::Keyring;
use crate::crypt::sealed;
use crate::index::{IndexEntry, QueueIndex};
use crate::log::in_flight::InFlight;
use crate::log::round::Round;
use crate::log::segment::Segment;
use crate::lookup::{BatchKey, Lookup, Stored};
use crate::position::{LogPos, PAGE_BYTES};
use crate::signal::Completion;
use std::collections::{BTreeMap, VecDeque};
use std::rc::Rc;
use std::sync::Arc;

/// Where an appended batch landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Appended {
    /// Offset of the batch's first record in its queue.
    pub base_offset: u64,
    pub record_count: u32,
    /// Log position of the batch.
    pub position: LogPos,
    /// The same batch was stored before (a retry): this is where, and nothing new was stored.
    pub duplicate: bool,
}

/// Why an append must wait before it can be placed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Blocked {
    /// Too many bytes are waiting to be written and synced.
    Backpressure,
    /// The next segment is still being preallocated.
    Segment,
}

/// A placed append: where it landed and the round that makes it durable.
pub(crate) struct Placed {
    pub appended: Appended,
    pub done: Rc<Completion>,
    pub policy: FlushPolicy,
}

/// Whose bytes a placed batch holds.
enum Origin<'a> {
    /// A producer's checked batch, stamped here (with its key for the recent
    /// batches, and the records its check inflated).
    Producer(Option<BatchKey>, &'a [u8]),
    /// A batch the leader stored, kept byte for byte.
    Leader,
}

/// The commit log's state. Positions keep one order at all times:
/// `synced_end <= written_end <= taken_end <= end`. Rounds are taken by the
/// flusher in log order, each starting where the last taken one ended, and
/// published in that order, each starting at `written_end`.
pub(crate) struct Log {
    segment_bytes: u64,
    round_bytes_max: usize,
    pending_bytes_max: usize,
    segments: BTreeMap<LogPos, Rc<Segment>>,
    /// Preallocated next segment, ready for rollover.
    spare: Option<Rc<Segment>>,
    active: Rc<Segment>,
    /// Position of the next append.
    end: LogPos,
    /// Everything before this was handed to the flusher.
    taken_end: LogPos,
    /// Everything before this is written to the segment files.
    written_end: LogPos,
    /// Everything before this is fdatasync'd.
    synced_end: LogPos,
    open: Option<Round>,
    sealed: VecDeque<Round>,
    /// The rounds between `written_end` and `taken_end`.
    in_flight: InFlight,
    /// Batch bytes appended but not yet written (and synced if asked).
    pending_bytes: usize,
    /// The bytes of the partial page before `end`.
    tail_page: Box<[u8]>,
    next_round_id: u64,
    /// A follower's log: it takes only the leader's stored batches, at the
    /// leader's positions, and never pads on its own.
    mirror: bool,
    /// Seals producers' batches when set.
    keyring: Option<Arc<Keyring>>,
}

impl Log {
    /// Places a checked batch for `queue`: stamps it into the open round and
    /// records its index and lookup entries (readable once the round is
    /// written, read from the records the check inflated), and the batch as
    /// one of the recent ones under `key`.
    pub fn append(
        &mut self,
        queue: &mut QueueIndex,
        lookup: &mut Lookup,
        bytes: &[u8],
        (checked, inflated): (&CheckedBatch, &[u8]),
        key: Option<BatchKey>,
    ) -> Result<Placed, Blocked> {
        assert!(!self.mirror, "a mirror log takes only the leader's stored batches");
        let len = self.stored_len(bytes.len());
        if self.pending_bytes > 0 && self.pending_bytes + len > self.pending_bytes_max {
            return Err(Blocked::Backpressure);
        }
        if self.open.as_ref().is_some_and(|r| !r.fits(len)) {
            // The flusher may write a full round and the next one at once: they must not share a page.
            self.seal_open(true);
        }
        let segment_end = self.active.end(self.segment_bytes);
        if self.end + (len + HEADER_BYTES) as u64 > segment_end {
            let spare = self.spare.take().ok_or(Blocked::Segment)?;
            self.pad_and_roll(spare);
        }
        Ok(self.place(queue, lookup, bytes, bytes, checked.record_count, Origin::Producer(key, inflated)))
    }

    /// The bytes a producer's batch of `len` takes in the log: sealed, if the log has keys.
    fn stored_len(&self, len: usize) -> usize {
        if self.keyring.is_some() {
            sealed::sealed_len(len)
        } else {
            len
        }
    }

    /// Places a batch the leader stored, byte for byte at the end (which must
    /// be the batch's position in the leader's log); `plain` is the batch in
    /// clear (opened, if the leader sealed it). Its round is synced.
    pub fn mirror(
        &mut self,
        queue: &mut QueueIndex,
        lookup: &mut Lookup,
        bytes: &[u8],
        plain: &[u8],
    ) -> Result<Placed, Blocked> {
        assert!(self.mirror, "only a mirror log takes stored batches");
        let len = bytes.len();
        if self.open.as_ref().is_some_and(|r| !r.fits(len)) {
            // A mirror never pads on its own, and the next round would share
            // this one's last page: wait until this round is taken.
            return Err(Blocked::Backpressure);
        }
        assert!(self.end + len as u64 <= self.active.end(self.segment_bytes), "checked by the caller");
        let record_count = u32::from_le_bytes(bytes[28..32].try_into().expect("a whole header"));
        Ok(self.place(queue, lookup, bytes, plain, record_count, Origin::Leader))
    }

    /// Places the leader's padding batch of `length` bytes at the end: up to
    /// a page boundary, or to the segment's end (then rolls over to the spare).
    pub fn mirror_padding(&mut self, length: u32) -> Result<(), Blocked> {
        assert!(self.mirror, "only a mirror log takes stored batches");
        let to = self.end + u64::from(length);
        if to == self.active.end(self.segment_bytes) {
            let spare = self.spare.take().ok_or(Blocked::Segment)?;
            self.pad_and_roll(spare);
        } else {
            self.pad_to(to);
            self.open.as_mut().expect("padded above").needs_sync = true;
            // The next batch starts on a fresh page, in a round of its own.
            self.seal_open(false);
        }
        Ok(())
    }

    /// Copies a batch into the open round at the end (sealing a producer's
    /// when the log has data keys, and stamping it) and records its index and
    /// lookup entries from `plain`, the batch in clear.
    fn place(
        &mut self,
        queue: &mut QueueIndex,
        lookup: &mut Lookup,
        bytes: &[u8],
        plain: &[u8],
        record_count: u32,
        origin: Origin<'_>,
    ) -> Placed {
        if self.open.is_none() {
            self.open = Some(self.new_round());
        }
        let position = self.end;
        // A producer's batch is sealed when the log has keys; a leader's is stored as shipped.
        let len = if matches!(origin, Origin::Producer(..)) { self.stored_len(bytes.len()) } else { bytes.len() };
        let round = self.open.as_mut().expect("opened above");
        let base_offset = queue.next();
        let (key, inflated) = match origin {
            Origin::Producer(key, inflated) => {
                let copy = match &self.keyring {
                    Some(keyring) => {
                        let slot = round.reserve(len);
                        sealed::seal_into(keyring, bytes, position.0, slot);
                        slot
                    }
                    None => round.put(bytes),
                };
                batch::stamp_in(copy, base_offset.0, queue.id().0, self.active.generation);
                (key, Some(inflated))
            }
            Origin::Leader => {
                // Shipped as on the wire; sealed here for this file's life.
                batch::reseal(round.put(bytes), self.active.generation);
                round.needs_sync = true;
                (BatchKey::of(queue.id(), plain), None)
            }
        };
        lookup.note_batch(key, Stored { position, base_offset: base_offset.0, records: record_count });
        let mut scratch = Vec::new();
        let records = match inflated {
            Some(inflated) => batch::records_inflated(plain, inflated),
            None => batch::records(plain, &mut scratch),
        };
        for record in records.expect("checked batch") {
            let record = record.expect("checked batch");
            lookup.note(position, queue.id(), queue.next(), &record.message_id, record.key.unwrap_or_default());
            queue.push(IndexEntry { position, size: len as u32, tag_hash: record.tag_hash() });
        }
        self.end += len as u64;
        self.pending_bytes += len;
        round.batch_bytes += len;
        round.records += u64::from(record_count);
        round.needs_sync |= queue.policy() == FlushPolicy::Sync;
        if queue.touched_by(round.id) {
            round.touched.push(queue.id());
        }
        let appended = Appended { base_offset: base_offset.0, record_count, position, duplicate: false };
        Placed { appended, done: round.done.clone(), policy: queue.policy() }
    }

    /// Moves the open round to the sealed queue, if it holds anything. With
    /// `pad`, a padding batch first fills the rest of its last page, so the
    /// next round starts on a fresh page and may be written while this one is
    /// still in flight (two writes of one page in flight could land in either
    /// order).
    pub fn seal_open(&mut self, pad: bool) {
        // A mirror holds the leader's bytes at the leader's positions: it never pads on its own.
        if pad && !self.mirror {
            self.pad_to_page();
        }
        if let Some(mut round) = self.open.take() {
            if round.is_empty() && round.end == round.start {
                return;
            }
            round.seal(&mut self.tail_page);
            self.sealed.push_back(round);
        }
    }

    /// Pads the open round, if it holds anything, to the next page boundary
    /// that leaves room for the padding header.
    fn pad_to_page(&mut self) {
        if self.open.as_ref().is_none_or(|r| r.is_empty()) || self.end.on_page() {
            return;
        }
        self.pad_to((self.end + HEADER_BYTES as u64).page_up());
    }

    /// Fills the rest of the active segment with a padding batch and makes
    /// `spare` the active segment.
    fn pad_and_roll(&mut self, spare: Rc<Segment>) {
        let segment_end = self.active.end(self.segment_bytes);
        debug_assert_eq!(spare.base, segment_end, "segments are contiguous");
        if self.end < segment_end {
            self.pad_to(segment_end);
            self.open.as_mut().expect("padded above").needs_sync = true;
        }
        self.seal_open(false);
        self.segments.insert(spare.base, spare.clone());
        self.active = spare;
    }

    /// Puts a padding batch from the end up to `to` into the open round
    /// (opened if there is none); the log then ends at `to`.
    fn pad_to(&mut self, to: LogPos) {
        if self.open.is_none() {
            self.open = Some(self.new_round());
        }
        let round = self.open.as_mut().expect("opened above");
        round.put(&batch::padding_header((to - self.end) as u32, self.active.generation));
        round.end = to;
        self.end = to;
        self.tail_page.fill(0);
    }

    fn new_round(&mut self) -> Round {
        self.next_round_id += 1;
        Round::open(self.next_round_id, self.active.clone(), self.end, &self.tail_page, self.round_bytes_max)
    }

    /// Creates the log state at `end` in `active`, with `tail_page` holding the
    /// partial page before `end`.
    pub fn new(
        config: &crate::config::ShardConfig,
        segments: BTreeMap<LogPos, Rc<Segment>>,
        end: LogPos,
        tail_page: Box<[u8]>,
    ) -> Log {
        let active = crate::log::segment::at_or_before(&segments, end).expect("a segment holds the end");
        debug_assert_eq!(tail_page.len(), PAGE_BYTES as usize);
        Log {
            segment_bytes: config.segment_bytes,
            round_bytes_max: config.round_bytes_max,
            pending_bytes_max: config.pending_bytes_max,
            segments,
            spare: None,
            active,
            end,
            taken_end: end,
            written_end: end,
            synced_end: end,
            open: None,
            sealed: VecDeque::new(),
            in_flight: InFlight::default(),
            pending_bytes: 0,
            tail_page,
            next_round_id: 0,
            mirror: false,
            keyring: config.keyring.clone(),
        }
    }

    /// The segment holding log position `pos`.
    pub fn segment_at(&self, pos: LogPos) -> Option<Rc<Segment>> {
        crate::log::segment::at_or_before(&self.segments, pos).filter(|s| pos < s.base + self.segment_bytes)
    }

    /// Makes this a follower's log (or a leader's again).
    pub fn set_mirror(&mut self, on: bool) {
        self.mirror = on;
    }

    /// True for a follower's log.
    pub fn is_mirror(&self) -> bool {
        self.mirror
    }

    /// Position of the next append.
    pub fn end(&self) -> LogPos {
        self.end
    }

    /// Where the active segment ends.
    pub fn active_end(&self) -> LogPos {
        self.active.end(self.segment_bytes)
    }

    /// The oldest log position still held (retention retired what was before it).
    pub fn start(&self) -> LogPos {
        *self.segments.keys().next().expect("a log has a segment")
    }

    /// Everything before this is written to the segment files.
    pub fn written_end(&self) -> LogPos {
        self.written_end
    }

    /// Everything before this was handed to the flusher: its bytes are final.
    pub fn taken_end(&self) -> LogPos {
        self.taken_end
    }

    /// The rounds taken and not yet written.
    pub fn in_flight(&self) -> &InFlight {
        &self.in_flight
    }

    /// Everything before this is fdatasync'd.
    pub fn synced_end(&self) -> LogPos {
        self.synced_end
    }

    /// Appended bytes wait to be taken by the flusher.
    pub fn has_rounds(&self) -> bool {
        self.open.is_some() || !self.sealed.is_empty()
    }

    /// The batch bytes of the open round, when it is the only one to take.
    pub fn only_open_round_bytes(&self) -> Option<usize> {
        if self.sealed.is_empty() {
            self.open.as_ref().map(|r| r.batch_bytes)
        } else {
            None
        }
    }

    /// The batch bytes of the open round, if one is open.
    pub fn open_round_bytes(&self) -> Option<usize> {
        self.open.as_ref().map(|r| r.batch_bytes)
    }

    /// Seals the open round (padded to its page end with `pad`) and hands
    /// over every sealed round, in log order, for writing.
    pub fn take_rounds(&mut self, pad: bool) -> Vec<Round> {
        self.seal_open(pad);
        let rounds: Vec<Round> = self.sealed.drain(..).collect();
        for r in &rounds {
            assert_eq!(r.start, self.taken_end, "round {} starts where the last taken one ended", r.id);
            assert!(r.start <= r.end, "round {} runs backwards", r.id);
            self.taken_end = r.end;
            self.in_flight.taken(r);
        }
        self.assert_order();
        rounds
    }

    /// A taken round was written: what it holds is written, in log order.
    pub fn written(&mut self, round: &Round) {
        assert_eq!(round.start, self.written_end, "round {} is published in log order", round.id);
        assert!(round.end <= self.taken_end, "round {} was taken before it is written", round.id);
        assert!(self.pending_bytes >= round.batch_bytes, "round {} was counted as pending", round.id);
        self.written_end = round.end;
        self.in_flight.written(round.start);
        self.pending_bytes -= round.batch_bytes;
        self.assert_order();
    }

    /// Everything written so far is durable.
    pub fn synced(&mut self) {
        self.synced_end = self.written_end;
        self.assert_order();
    }

    /// After a failed write: the rounds not yet taken, for their appends to fail.
    pub fn strand(&mut self) -> Vec<Round> {
        self.seal_open(false);
        let stranded: Vec<Round> = self.sealed.drain(..).collect();
        self.in_flight.clear();
        if let Some(last) = stranded.last() {
            self.taken_end = last.end;
        }
        stranded
    }

    /// The position the spare segment must start at, if none is ready.
    pub fn spare_wanted(&self) -> Option<LogPos> {
        self.spare.is_none().then(|| self.active.end(self.segment_bytes))
    }

    /// The preallocated next segment is ready.
    pub fn set_spare(&mut self, spare: Rc<Segment>) {
        assert!(self.spare.is_none(), "one spare at a time");
        assert_eq!(spare.base, self.active.end(self.segment_bytes), "the spare follows the active segment");
        self.spare = Some(spare);
    }

    /// How far appends are into the active segment.
    pub fn active_used(&self) -> u64 {
        self.end - self.active.base
    }

    /// The sealed segments (never the active one) that end at or before
    /// `keep`, oldest first: what retention may retire.
    pub fn sealed_segments_before(&self, keep: LogPos) -> Vec<Rc<Segment>> {
        self.segments
            .iter()
            .take_while(|(base, _)| **base != self.active.base && **base + self.segment_bytes <= keep)
            .map(|(_, seg)| seg.clone())
            .collect()
    }

    /// Bytes of every segment of the log (spare excluded).
    pub fn segments_bytes(&self) -> u64 {
        self.segments.len() as u64 * self.segment_bytes
    }

    /// Bytes of the segment files by state (what `segments_bytes` counts,
    /// and the spare); the pool is not the log's.
    pub fn segment_bytes_by_state(&self) -> crate::probe::stats::SegmentBytes {
        let sealed = self.segments.len() as u64 - 1;
        crate::probe::stats::SegmentBytes {
            active: self.segment_bytes,
            spare: if self.spare.is_some() { self.segment_bytes } else { 0 },
            sealed: sealed * self.segment_bytes,
            pooled: 0,
        }
    }

    /// Base positions of the segments, ascending (spare excluded).
    pub fn segment_bases(&self) -> Vec<LogPos> {
        self.segments.keys().copied().collect()
    }

    /// Forgets a sealed segment that retention retired.
    pub fn remove_segment(&mut self, base: LogPos) {
        assert!(base < self.active.base, "segment {base} is sealed (the active one is {})", self.active.base);
        self.segments.remove(&base);
    }

    fn assert_order(&self) {
        assert!(
            self.synced_end <= self.written_end && self.written_end <= self.taken_end && self.taken_end <= self.end,
            "log order: synced {} <= written {} <= taken {} <= end {}",
            self.synced_end,
            self.written_end,
            self.taken_end,
            self.end
        );
    }
}
