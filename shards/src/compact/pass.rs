//! One compaction pass over one queue, on the shard's core, in the
//! background: it never holds the shard's state across an await and paces
//! itself to `compaction_cpu_percent` of the core and
//! `compaction_bytes_per_sec` of writes.
//!
//! As Kafka's cleaner does, the pass first maps each key of the dirty range
//! (the log from the compacted part's end up to the pass's `until`, whole
//! batches only) to its latest offset, at most `compaction_keys_max` keys
//! (past them the pass ends its range earlier and the next one goes on).
//! Then it writes the part's next generation: every record of the old part
//! and of the dirty range that is still the latest of its key, in offset
//! order. Dropped on the way: older records of a key, tombstones (null
//! values) and transaction markers older than `tombstones_before_ms`,
//! records of aborted transactions, records without a key. Offsets never
//! change: a run of consecutive kept records of one batch becomes one
//! batch (a Kafka batch keeps its producer, epoch, sequence and timestamp
//! type; uncompressed), so a compacted queue has gaps. Once the part is
//! durable it replaces the old one and the queue's start in the log moves to
//! its end: retention gets the segments back once no other queue holds them.
//!
//! Keys are told apart by a 128-bit hash (two SipHash keys drawn per pass):
//! two keys that collide would lose the older one's record, with odds of
//! about n² / 2^129 for n keys.

use super::clean::{CleanStore, CleanWriter};
use crate::batch::{self, BatchBuilder, BatchHeader, Records};
use crate::error::{Result, StorageError};
use crate::kafka::{self, KafkaBatch};
use crate::position::{Offset, QueueId};
use crate::probe::stats::add;
use crate::read::reader::ReadWait;
use crate::record::Record;
use crate::shard::{start_with, Inner, State};
use std::collections::HashMap;
use std::hash::BuildHasher;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// Bytes read per step of a pass.
const STEP_BYTES: usize = 1 << 20;
/// Nonce positions of sealed compacted batches: apart from the log's (which
/// never reach 2^63), counted up from here for the life of the process.
const CLEAN_NONCE_BASE: u64 = 1 << 63;

/// What a pass compacts.
pub struct Compaction<'a> {
    /// Records at or past this offset are left as they are: the caller's
    /// bound (below the active segment, the last stable offset, the
    /// replicated end, `min.compaction.lag.ms`). The pass goes no further
    /// than what is durable, and stops at a batch boundary.
    pub until: u64,
    /// Tombstones and transaction markers with a timestamp before this
    /// (Unix ms) are removed: now minus `delete.retention.ms`.
    pub tombstones_before_ms: i64,
    /// Whether the record at an offset, of a Kafka transaction of the given
    /// producer id, was aborted (such records are removed).
    pub aborted: &'a dyn Fn(i64, u64) -> bool,
    /// Asked before the new part replaces the old one: false drops the
    /// pass (its queue began being copied to another broker group, and
    /// the copy must find the part it started from).
    pub wanted: &'a dyn Fn() -> bool,
}

/// What a pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CompactionReport {
    /// The queue's compacted part ends here now.
    pub end: u64,
    /// Records read (the old part's and the dirty range's).
    pub records_read: u64,
    pub records_kept: u64,
    /// Bytes of batches read and written.
    pub bytes_read: u64,
    pub bytes_kept: u64,
}

/// Keys to 128-bit hashes, with keys drawn for one pass.
struct KeyHasher(std::collections::hash_map::RandomState, std::collections::hash_map::RandomState);

impl KeyHasher {
    fn new() -> Self {
        KeyHasher(Default::default(), Default::default())
    }

    fn hash(&self, key: &[u8]) -> u128 {
        (u128::from(self.0.hash_one(key)) << 64) | u128::from(self.1.hash_one(key))
    }
}

/// What the pass keeps: its range, the latest offset of each key of the
/// dirty range, and the removal rules.
struct Rules<'a> {
    /// Offsets below this are gone (the queue's start).
    from: u64,
    /// Offsets at or past this stay in the log.
    end: u64,
    latest: HashMap<u128, u64>,
    keys: KeyHasher,
    c: &'a Compaction<'a>,
}

impl Rules<'_> {
    /// Whether the record at `offset` of the stored batch `header` (a Kafka
    /// batch: `kafka`) stays.
    fn keeps(&self, offset: u64, record: &Record<'_>, header: &BatchHeader, kafka: Option<&KafkaBatch<'_>>) -> bool {
        if offset < self.from || offset >= self.end {
            return false;
        }
        let base_ms = kafka.map_or(header.first_timestamp_ms, KafkaBatch::base_timestamp);
        let young = base_ms.saturating_add(record.timestamp_delta_ms) >= self.c.tombstones_before_ms;
        if let Some(k) = kafka {
            if k.is_control() {
                return young;
            }
            if k.is_transactional() && (self.c.aborted)(k.producer_id(), offset) {
                return false;
            }
        }
        let Some(key) = record.key else { return false };
        match self.latest.get(&self.keys.hash(key)) {
            Some(&latest) if latest != offset => false,
            _ => record.value.is_some() || young,
        }
    }

    /// Notes a record of the dirty range as its key's latest.
    fn note(&mut self, offset: u64, record: &Record<'_>, kafka: Option<&KafkaBatch<'_>>) {
        if kafka.is_some_and(|k| k.is_control() || (k.is_transactional() && (self.c.aborted)(k.producer_id(), offset)))
        {
            return;
        }
        if let Some(key) = record.key {
            self.latest.insert(self.keys.hash(key), offset);
        }
    }
}

/// The Kafka batch of a stored batch, if it is one.
fn kafka_of(stored: &[u8]) -> Result<Option<KafkaBatch<'_>>> {
    Ok(batch::kafka_bytes(stored).map(KafkaBatch::stored).transpose()?)
}

/// Ends a pass's turn on the queue however it ends.
struct Turn<'a> {
    inner: &'a Inner,
    queue: QueueId,
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        self.inner.compacting.borrow_mut().remove(&self.queue);
    }
}

impl Inner {
    /// Runs one compaction pass over `queue` (one at a time per queue).
    pub(crate) async fn compact(&self, queue: QueueId, c: &Compaction<'_>) -> Result<CompactionReport> {
        if !self.compacting.borrow_mut().insert(queue) {
            return Err(StorageError::Busy(format!("queue {queue} is being compacted; try again after the pass")));
        }
        let _turn = Turn { inner: self, queue };
        let (old, dirty_from, until, start, dir) = {
            let st = self.state.borrow();
            let q = st.queues.get(&queue).ok_or(StorageError::UnknownQueue(queue.0))?;
            let durable = q.next_before(st.log.synced_end()).min(q.visible());
            let old = st.compacted.get(&queue).cloned();
            let start = st.start_of(q);
            (old, q.start(), Offset(c.until).min(durable), start, q.dir().to_path_buf())
        };
        let mut report = CompactionReport::default();
        let mut rules = Rules { from: start.0, end: dirty_from.0, latest: HashMap::new(), keys: KeyHasher::new(), c };
        rules.end = self.map_keys(queue, dirty_from, until, &mut rules).await?;
        if rules.end == dirty_from.0 && old.is_none() {
            report.end = dirty_from.0;
            return Ok(report);
        }
        let generation = old.as_ref().map_or(0, |o| o.generation()) + 1;
        let mut writer = CleanWriter::create(&dir, generation).await?;
        let written = self.rewrite(queue, old.as_deref(), dirty_from, &rules, &mut writer, &mut report).await;
        let store = match written {
            Ok(()) if (c.wanted)() => writer.finish(start, Offset(rules.end)).await?,
            Ok(()) => {
                writer.abandon().await;
                report.end = dirty_from.0;
                return Ok(report);
            }
            Err(error) => {
                writer.abandon().await;
                return Err(error);
            }
        };
        if !(c.wanted)() {
            crate::fs::remove_files("removing an unwanted compacted part", vec![store.path().to_path_buf()]).await?;
            report.end = dirty_from.0;
            return Ok(report);
        }
        report.end = rules.end;
        report.bytes_kept = store.describe().bytes;
        self.switch(queue, store).await?;
        let c = &self.counters;
        add(&c.compaction_passes, 1);
        add(&c.compaction_records_read, report.records_read);
        add(&c.compaction_records_removed, report.records_read - report.records_kept);
        add(&c.compaction_bytes_written, report.bytes_kept);
        Ok(report)
    }

    /// Maps the keys of the dirty range [from, until) to their latest
    /// offsets; returns where the pass's range ends (a batch boundary).
    async fn map_keys(&self, queue: QueueId, from: Offset, until: Offset, rules: &mut Rules<'_>) -> Result<u64> {
        let mut end = from.0;
        let mut offset = from.0;
        let mut scratch = Vec::new();
        while offset < until.0 {
            let began = Instant::now();
            let read = self.read(queue, offset, STEP_BYTES, ReadWait::No).await?;
            if read.bytes.is_empty() {
                break;
            }
            for stored in batch::split(&read.bytes) {
                let header = BatchHeader::decode(stored).ok_or_else(|| malformed(queue, offset))?;
                let full = rules.latest.len() + header.record_count as usize > self.config.compaction_keys_max;
                if header.next_offset() > until.0 || (full && end > from.0) {
                    return Ok(end);
                }
                let kafka = kafka_of(stored)?;
                for (i, record) in batch::records(stored, &mut scratch)?.enumerate() {
                    let at = header.base_offset + i as u64;
                    if at >= from.0 {
                        rules.note(at, &record?, kafka.as_ref());
                    }
                }
                end = header.next_offset();
            }
            offset = read.next_offset;
            self.pace(began, 0).await;
        }
        Ok(end)
    }

    /// Writes what `rules` keep of the old part and of the log from `from`.
    async fn rewrite(
        &self,
        queue: QueueId,
        old: Option<&CleanStore>,
        from: Offset,
        rules: &Rules<'_>,
        writer: &mut CleanWriter,
        report: &mut CompactionReport,
    ) -> Result<()> {
        let keyring = self.config.keyring.as_deref();
        if let Some(old) = old {
            let mut offset = old.start();
            while offset < old.end() {
                let began = Instant::now();
                let (bytes, next) = old.read(offset, STEP_BYTES, keyring).await?;
                let before = writer.data_bytes();
                self.keep_from(queue, &bytes, rules, writer, report).await?;
                offset = next;
                self.pace(began, writer.data_bytes() - before).await;
            }
        }
        let mut offset = from.0;
        while offset < rules.end {
            let began = Instant::now();
            let read = self.read(queue, offset, STEP_BYTES, ReadWait::No).await?;
            if read.bytes.is_empty() {
                break;
            }
            let before = writer.data_bytes();
            self.keep_from(queue, &read.bytes, rules, writer, report).await?;
            offset = read.next_offset;
            self.pace(began, writer.data_bytes() - before).await;
        }
        Ok(())
    }

    /// Writes the runs of kept records of each batch of `bytes` (batches in clear).
    async fn keep_from(
        &self,
        queue: QueueId,
        bytes: &[u8],
        rules: &Rules<'_>,
        writer: &mut CleanWriter,
        report: &mut CompactionReport,
    ) -> Result<()> {
        let mut scratch = Vec::new();
        for stored in batch::split(bytes) {
            let header = BatchHeader::decode(stored).ok_or_else(|| malformed(queue, 0))?;
            if header.base_offset >= rules.end {
                break;
            }
            report.bytes_read += stored.len() as u64;
            let kafka = kafka_of(stored)?;
            let mut run: Vec<Record<'_>> = Vec::new();
            let mut run_from = 0u32;
            let records: Records<'_> = batch::records(stored, &mut scratch)?;
            let mut outputs = Vec::new();
            for (i, record) in records.enumerate() {
                let record = record?;
                let at = header.base_offset + i as u64;
                if at >= rules.from && at < rules.end {
                    report.records_read += 1;
                }
                if rules.keeps(at, &record, &header, kafka.as_ref()) {
                    if run.is_empty() {
                        run_from = i as u32;
                    }
                    writer.note_lookup(at, record.key.unwrap_or_default(), &record.message_id);
                    run.push(record);
                } else if !run.is_empty() {
                    outputs.push(self.kept_batch(queue, stored, &header, kafka.as_ref(), run_from, &run)?);
                    run.clear();
                }
            }
            if !run.is_empty() {
                outputs.push(self.kept_batch(queue, stored, &header, kafka.as_ref(), run_from, &run)?);
            }
            for (out, base_offset, count) in outputs {
                report.records_kept += u64::from(count);
                writer.push(&out, base_offset, count).await?;
            }
        }
        Ok(())
    }

    /// The stored batch of kept records `run`, records `first..` of the
    /// batch `stored`: sealed if the shard has keys, stamped with its base offset.
    fn kept_batch(
        &self,
        queue: QueueId,
        stored: &[u8],
        header: &BatchHeader,
        kafka: Option<&KafkaBatch<'_>>,
        first: u32,
        run: &[Record<'_>],
    ) -> Result<(Vec<u8>, Offset, u32)> {
        let plain = match kafka {
            Some(k) => {
                let mut out = Vec::new();
                kafka::encode_kept(&mut out, k, first as i32, run.iter().copied());
                let first_id: [u8; 16] =
                    stored[batch::HEADER_BYTES..batch::KAFKA_WRAPPER_BYTES].try_into().expect("16 bytes");
                batch::wrap_kafka(&KafkaBatch::parse(&out)?, kafka::nth_id(first_id, first as i32))
            }
            None => {
                let mut b = BatchBuilder::new(header.first_timestamp_ms);
                run.iter().for_each(|r| {
                    b.push(r);
                });
                let mut out = b.finish();
                if header.is_log_append_time() {
                    batch::set_log_append_time(&mut out, header.first_timestamp_ms)?;
                }
                out
            }
        };
        let base_offset = Offset(header.base_offset + u64::from(first));
        let mut out = self.sealed(plain);
        batch::stamp(&mut out, base_offset.0, queue.0);
        Ok((out, base_offset, run.len() as u32))
    }

    /// A batch for a compacted part: sealed if the shard has keys (stamp it after).
    pub(crate) fn sealed(&self, plain: Vec<u8>) -> Vec<u8> {
        let Some(keyring) = self.config.keyring.as_deref() else { return plain };
        let mut sealed = vec![0; crate::crypt::sealed::sealed_len(plain.len())];
        let nonce = CLEAN_NONCE_BASE + self.clean_nonces.get();
        self.clean_nonces.set(self.clean_nonces.get() + 1);
        crate::crypt::sealed::seal_into(keyring, &plain, nonce, &mut sealed);
        sealed
    }

    /// Makes `store` the queue's compacted part: readers see no offset
    /// below the queue's start (a trim may have moved it during the pass),
    /// the log's part of the queue starts at the store's end, and the old
    /// generation's file goes.
    async fn switch(&self, queue: QueueId, store: CleanStore) -> Result<()> {
        let replaced = {
            let mut st = self.state.borrow_mut();
            let State { queues, compacted, .. } = &mut *st;
            match queues.get_mut(&queue) {
                None => Err(store.path().to_path_buf()),
                Some(q) => {
                    store.move_start(start_with(compacted.get(&queue).map(|p| &**p), q));
                    q.move_start(store.end());
                    Ok(compacted.insert(queue, Rc::new(store)).map(|old| old.path().to_path_buf()))
                }
            }
        };
        match replaced {
            Err(path) => {
                crate::fs::remove_files("removing a deleted queue's compacted part", vec![path]).await?;
                Err(StorageError::UnknownQueue(queue.0))
            }
            Ok(old) => crate::fs::remove_files("removing an old compacted part", old.into_iter().collect()).await,
        }
    }

    /// Pauses after a step that began at `began` and wrote `bytes`, so the
    /// pass takes at most `compaction_cpu_percent` of the core and writes at
    /// most `compaction_bytes_per_sec`. A timer, not a yield: appends and
    /// reads queued behind the step run first.
    async fn pace(&self, began: Instant, bytes: u64) {
        let busy = began.elapsed();
        let percent = self.config.compaction_cpu_percent.clamp(1, 100);
        let for_cpu = busy * (100 - percent) / percent;
        let for_io = match self.config.compaction_bytes_per_sec {
            0 => Duration::ZERO,
            rate => Duration::from_secs_f64(bytes as f64 / rate as f64).saturating_sub(busy),
        };
        glommio::timer::sleep(for_cpu.max(for_io).max(Duration::from_micros(50))).await;
    }
}

fn malformed(queue: QueueId, offset: u64) -> StorageError {
    StorageError::Corruption {
        what: "compaction read",
        position: 0,
        detail: format!("queue {queue}: a batch read from offset {offset} has no valid header"),
    }
}
