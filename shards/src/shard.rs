//! A shard: one core's storage of its queues. Everything here runs on one
//! glommio executor; state sits in a RefCell that is never borrowed across
//! an await.

use crate::batch::{self, BatchHeader};
use crate::compact::clean::CleanStore;
use crate::compact::{Compacted, Compaction, CompactionReport, PartImport};
use crate::config::{FlushPolicy, ShardConfig};
use crate::error::{Result, StorageError};
use crate::index::queue_index::{self as index, IndexEntry, QueueIndex};
use crate::log::pool::SegmentPool;
use crate::log::{Appended, Blocked, Log};
use crate::lookup::{BatchKey, Lookup, Stored};
use crate::position::{LogPos, Offset, QueueId, PAGE_BYTES};
use crate::probe::fault::FailureProbes;
use crate::probe::stats::{add, Counters, Histograms, ParkedReads, SegmentBytes, ShardHistograms, ShardStats};
use crate::read::cache::ChunkCache;
use crate::read::reader::{ReadBatches, ReadWait, Readahead};
use crate::replica::LogRange;
use crate::signal::Signal;
use crate::tiered::SegmentExport;
use std::cell::{Cell, RefCell};
use std::collections::{HashMap, HashSet, VecDeque};
use std::rc::Rc;

/// One core's storage engine. Cheap to clone; all clones share the shard.
#[derive(Clone)]
pub struct Shard {
    inner: Rc<Inner>,
}

pub(crate) struct Inner {
    pub config: ShardConfig,
    pub state: RefCell<State>,
    /// Appends arrived: the flusher has work.
    pub flush_needed: Signal,
    /// Pending bytes drained, a spare segment arrived, the shard failed, or
    /// a blocked append finished its turn.
    pub space_freed: Signal,
    /// Appends blocked by back-pressure, in arrival order: while any waits,
    /// later appends queue behind it, so a later batch never overtakes an
    /// earlier one of the same sender (a producer may pipeline a queue).
    blocked_appends: RefCell<VecDeque<u64>>,
    next_append: Cell<u64>,
    /// Written rounds were published (or the shard failed): raw log readers wake.
    pub published: Signal,
    /// Rounds were taken for writing (or the shard failed): replication's readers wake.
    pub taken: Signal,
    /// The spare segment was taken.
    pub spare_needed: Signal,
    /// The in-memory index is past its bound.
    pub checkpoint_needed: Signal,
    /// Held by a checkpoint, and by the index preallocator while it creates a file.
    pub checkpoint_lock: glommio::sync::Semaphore,
    /// A queue's appends passed the point where its next index file is wanted.
    pub index_files_needed: Signal,
    closed: Cell<bool>,
    pub probes: FailureProbes,
    pub counters: Counters,
    pub histograms: Histograms,
    pub parked_reads: ParkedReads,
    pub readahead: Readahead,
    /// Retention keeps the segment holding this log position and later ones.
    retention_floor: Cell<LogPos>,
    /// The owner reads none of its queues below this position: retention
    /// retires the segments wholly below it.
    released: Cell<LogPos>,
    /// `released` moved up: retention looks at once.
    pub released_moved: Signal,
    /// Set while the next segment cannot be made for want of space (why):
    /// appends that need it are refused with `StorageError::Full`.
    space_short: RefCell<Option<String>>,
    tasks: RefCell<Vec<glommio::Task<()>>>,
    flusher: RefCell<Option<glommio::Task<()>>>,
    /// Queues a compaction pass runs over.
    pub(crate) compacting: RefCell<HashSet<QueueId>>,
    /// Sealed compacted batches made in this process (their nonces).
    pub(crate) clean_nonces: Cell<u64>,
}

/// How a shard is opened.
enum Role {
    /// Takes appends.
    Leader,
    /// Takes a leader's batches; `cut` drops the log from that position on.
    Follower { cut: Option<LogPos> },
}

pub(crate) struct State {
    pub queues: HashMap<QueueId, QueueIndex>,
    pub log: Log,
    pub cache: ChunkCache<u64>,
    pub index_cache: ChunkCache<(QueueId, u64)>,
    /// Index entries held in memory over all queues (a checkpoint trims them).
    index_mem_entries: usize,
    /// Set after a failed write or sync: the shard refuses appends.
    failed: Option<String>,
    /// Message lookup by id and key.
    pub lookup: Lookup,
    /// Retired segment files kept for recycling.
    pub pool: SegmentPool,
    /// With replication: nothing at or past this log position is readable
    /// yet (it is not durable on enough replicas). None: no gate.
    commit_gate: Option<LogPos>,
    /// Queues with written entries held back by the gate.
    behind_gate: HashSet<QueueId>,
    /// Compacted queues' compacted parts: offsets below a part's end are
    /// read from it, the log holds the queue from there.
    pub compacted: HashMap<QueueId, Rc<CleanStore>>,
    /// Queues that take no appends (moving away: their end is final).
    frozen: HashSet<QueueId>,
}

impl State {
    /// Why the shard refuses appends, after a failed write or sync.
    pub fn failed(&self) -> Option<&str> {
        self.failed.as_deref()
    }

    /// Fails the shard for good (until a restart); returns the reason in
    /// effect (the first failure's).
    pub fn fail(&mut self, reason: String) -> String {
        self.failed.get_or_insert(reason).clone()
    }

    /// The first offset readers see of `q`: its compacted part's start
    /// while the part holds any offset, else the log's.
    pub fn start_of(&self, q: &QueueIndex) -> Offset {
        start_with(self.compacted.get(&q.id()).map(|p| &**p), q)
    }

    /// Index entries held in memory over all queues.
    pub fn index_mem_entries(&self) -> usize {
        self.index_mem_entries
    }

    /// How far a queue whose round reached `written_end` may be read: up to
    /// the written end (async policy, or `synced`) or the durable end, and
    /// never past the commit gate. Notes the queue if the gate holds it back.
    pub fn readable_end(&mut self, queue: QueueId, written_end: LogPos, synced: bool) -> Option<LogPos> {
        let q = self.queues.get(&queue)?;
        let end = if synced || q.policy() == FlushPolicy::Async { written_end } else { self.log.synced_end() };
        match self.commit_gate {
            Some(gate) if gate < end => {
                self.behind_gate.insert(queue);
                Some(gate)
            }
            _ => Some(end),
        }
    }

    /// Appends added `n` in-memory index entries.
    pub fn index_entries_added(&mut self, n: usize) {
        self.index_mem_entries += n;
    }

    /// A checkpoint or a deletion dropped `n` in-memory index entries.
    pub fn index_entries_dropped(&mut self, n: usize) {
        assert!(n <= self.index_mem_entries, "dropping {n} of {} index entries", self.index_mem_entries);
        self.index_mem_entries -= n;
    }
}

impl Inner {
    /// The shard is closing or closed: no new appends.
    pub fn is_closed(&self) -> bool {
        self.closed.get()
    }

    /// Retention keeps the segment holding this log position and later ones.
    pub fn retention_floor(&self) -> LogPos {
        self.retention_floor.get()
    }

    /// The owner reads none of its queues below this position.
    pub fn released(&self) -> LogPos {
        self.released.get()
    }

    /// Why the next segment cannot be made, while the disk is full.
    pub fn space_short(&self) -> Option<String> {
        self.space_short.borrow().clone()
    }

    /// The next segment cannot be made for want of space; true the first time.
    pub fn short_of_space(&self, why: String) -> bool {
        self.space_short.replace(Some(why)).is_none()
    }

    /// A segment could be made again; true if space had been short.
    pub fn space_back(&self) -> bool {
        self.space_short.take().is_some()
    }
}

impl Shard {
    /// Opens (recovering) or creates the shard in `config.dir` and starts its
    /// flusher, segment preallocator, checkpointer and retention tasks. Must
    /// run inside a glommio executor.
    pub async fn open(config: ShardConfig) -> Result<Shard> {
        Shard::open_as(config, Role::Leader).await
    }

    /// Opens the shard as a follower's: its log takes only a leader's
    /// batches ([`Shard::mirror`]). With `cut`, everything at or past that log
    /// position is dropped first (the queues roll back to the batches before
    /// it), as a rejoining follower does down to what its new leader holds.
    pub async fn open_mirror(config: ShardConfig, cut: Option<LogPos>) -> Result<Shard> {
        Shard::open_as(config, Role::Follower { cut }).await
    }

    async fn open_as(mut config: ShardConfig, role: Role) -> Result<Shard> {
        config.validate()?;
        // Absolute, so that syncing the parent directory always has a parent.
        config.dir = std::path::absolute(&config.dir).map_err(|e| StorageError::io("resolving", &config.dir, e))?;
        let cut = match role {
            Role::Follower { cut } => cut,
            Role::Leader => None,
        };
        let recovered = crate::lifecycle::recovery::recover(&config, cut).await?;
        if !crate::lifecycle::ballast::ensure(&config.dir, config.ballast_bytes).await? {
            tracing::warn!(dir = %config.dir.display(), "no room for the ballast: a full disk may stop checkpoints");
        }
        let chunk_bytes = config.cache_chunk_bytes;
        let mut cache = ChunkCache::new(config.cache_bytes / chunk_bytes, chunk_bytes);
        seed_frontier_chunk(&mut cache, &recovered.segments, recovered.end, config.segment_bytes).await?;
        let mut log = Log::new(&config, recovered.segments, recovered.end, recovered.tail_page);
        log.set_mirror(matches!(role, Role::Follower { .. }));
        let index_mem_entries = recovered.queues.values().map(|q| q.mem_len()).sum();
        let state = State {
            index_mem_entries,
            lookup: recovered.lookup,
            pool: recovered.pool,
            queues: recovered.queues,
            compacted: recovered.compacted,
            log,
            cache,
            index_cache: ChunkCache::new(config.index_cache_pages, PAGE_BYTES as usize),
            failed: None,
            commit_gate: None,
            behind_gate: HashSet::new(),
            frozen: HashSet::new(),
        };
        let inner = Rc::new(Inner {
            config,
            state: RefCell::new(state),
            flush_needed: Signal::default(),
            space_freed: Signal::default(),
            blocked_appends: RefCell::default(),
            next_append: Cell::new(0),
            published: Signal::default(),
            taken: Signal::default(),
            spare_needed: Signal::default(),
            checkpoint_needed: Signal::default(),
            checkpoint_lock: glommio::sync::Semaphore::new(1),
            index_files_needed: Signal::default(),
            closed: Cell::new(false),
            probes: FailureProbes::default(),
            counters: Counters::default(),
            histograms: Histograms::default(),
            parked_reads: ParkedReads::default(),
            readahead: Readahead::default(),
            retention_floor: Cell::new(LogPos(u64::MAX)),
            released: Cell::new(LogPos(0)),
            released_moved: Signal::default(),
            space_short: RefCell::new(None),
            tasks: RefCell::new(Vec::new()),
            flusher: RefCell::new(None),
            compacting: RefCell::default(),
            clean_nonces: Cell::new(0),
        });
        *inner.flusher.borrow_mut() = Some(glommio::spawn_local(crate::log::flusher::run(inner.clone())));
        inner.tasks.borrow_mut().extend([
            glommio::spawn_local(crate::log::preallocator::run(inner.clone())),
            glommio::spawn_local(crate::index::checkpoint::run(inner.clone())),
            glommio::spawn_local(crate::index::preallocator::run(inner.clone())),
            glommio::spawn_local(crate::lifecycle::retention::run(inner.clone())),
        ]);
        Ok(Shard { inner })
    }

    /// Creates a queue (its index directory is durable before this returns).
    pub async fn create_queue(&self, queue: QueueId, policy: Option<FlushPolicy>) -> Result<()> {
        self.create_queues(&[(queue, policy)]).await
    }

    /// Creates queues, their index directories made durable by one sync of
    /// the directory that holds them. None is created if one already exists.
    pub async fn create_queues(&self, queues: &[(QueueId, Option<FlushPolicy>)]) -> Result<()> {
        self.inner.create_queues(queues).await
    }

    /// Deletes queues: they are gone from reads and appends at once (parked
    /// reads wake and fail), and their index files are removed, made durable
    /// by one directory sync. Their batches stay in the log until retention
    /// deletes their segments; recovery passes over them.
    pub async fn delete_queues(&self, queues: &[QueueId]) -> Result<()> {
        if queues.is_empty() {
            return Ok(());
        }
        // Not while a checkpoint or the index preallocator writes their files.
        let _files = self.inner.checkpoint_lock.acquire_permit(1).await;
        let removed: Vec<QueueIndex> = {
            let mut st = self.inner.state.borrow_mut();
            if let Some(q) = queues.iter().find(|q| !st.queues.contains_key(q)) {
                return Err(StorageError::UnknownQueue(q.0));
            }
            let removed: Vec<QueueIndex> = queues.iter().filter_map(|q| st.queues.remove(q)).collect();
            queues.iter().for_each(|q| drop(st.compacted.remove(q)));
            st.index_entries_dropped(removed.iter().map(QueueIndex::mem_len).sum::<usize>());
            removed
        };
        let dirs: Vec<_> = removed.iter().map(|q| q.dir().to_path_buf()).collect();
        removed.iter().for_each(|q| q.arrivals().notify());
        drop(removed);
        let index_dir = self.inner.config.dir.join("index");
        crate::fs::blocking("removing queue directories in", &index_dir, move |_| {
            dirs.iter().try_for_each(std::fs::remove_dir_all)
        })
        .await?;
        crate::fs::sync_dir(&index_dir).await
    }

    /// Sets when appends to `queue` are acknowledged (not persisted here: the
    /// broker's topic metadata owns it and sets it again after a restart).
    pub fn set_flush_policy(&self, queue: QueueId, policy: FlushPolicy) -> Result<()> {
        let mut st = self.inner.state.borrow_mut();
        st.queues.get_mut(&queue).ok_or(StorageError::UnknownQueue(queue.0))?.set_policy(policy);
        Ok(())
    }

    /// The shard's queues, ascending.
    pub fn queues(&self) -> Vec<QueueId> {
        let mut q: Vec<QueueId> = self.inner.state.borrow().queues.keys().copied().collect();
        q.sort_unstable();
        q
    }

    /// The readable offsets of `queue`: [start, end). A compacted queue
    /// may have gaps in between.
    pub fn offsets(&self, queue: QueueId) -> Result<(u64, u64)> {
        let st = self.inner.state.borrow();
        let q = st.queues.get(&queue).ok_or(StorageError::UnknownQueue(queue.0))?;
        Ok((st.start_of(q).0, q.visible().0))
    }

    /// Makes a queue that never held an offset begin at `offset`, empty: a
    /// queue copied from one whose records are all gone goes on from its
    /// offsets. Not in the log: its owner records the start with the other
    /// moved starts and sets it again when it opens (a first batch appended
    /// at `offset` lines the queue up by itself, on followers too).
    pub fn begin_at(&self, queue: QueueId, offset: u64) -> Result<()> {
        let mut st = self.inner.state.borrow_mut();
        let q = st.queues.get_mut(&queue).ok_or(StorageError::UnknownQueue(queue.0))?;
        let filled = q.line_up(Offset(offset)).ok_or(StorageError::NotNextOffset {
            queue: queue.0,
            offset,
            next: q.next().0,
        })?;
        st.index_entries_added(filled);
        Ok(())
    }

    /// The offset `queue`'s next append gets (readable or not yet).
    pub fn next_offset(&self, queue: QueueId) -> Result<u64> {
        let st = self.inner.state.borrow();
        Ok(st.queues.get(&queue).ok_or(StorageError::UnknownQueue(queue.0))?.next().0)
    }

    /// Makes exactly `queues` refuse appends (`QueueFrozen`), from the next
    /// append on: one that waited for its turn is refused too, so once this
    /// returns a frozen queue's end is final. Not stored: whoever owns the
    /// queues sets it again after a restart.
    pub fn freeze_queues(&self, queues: HashSet<QueueId>) {
        self.inner.state.borrow_mut().frozen = queues;
    }

    /// The end of `queue` (its next offset, durable or not) if it is frozen:
    /// no append will pass it.
    pub fn frozen_end(&self, queue: QueueId) -> Result<Option<u64>> {
        let st = self.inner.state.borrow();
        let q = st.queues.get(&queue).ok_or(StorageError::UnknownQueue(queue.0))?;
        Ok(st.frozen.contains(&queue).then_some(q.next().0))
    }

    /// The first offset of `queue` the log holds: its start, or its
    /// compacted part's end (what retention of the log goes by).
    pub fn log_start(&self, queue: QueueId) -> Result<u64> {
        let st = self.inner.state.borrow();
        Ok(st.queues.get(&queue).ok_or(StorageError::UnknownQueue(queue.0))?.start().0)
    }

    /// Compacts `queue` once (see [`Compaction`]); one pass at a time per
    /// queue (`StorageError::Busy` otherwise).
    pub async fn compact(&self, queue: QueueId, compaction: &Compaction<'_>) -> Result<CompactionReport> {
        self.inner.compact(queue, compaction).await
    }

    /// Starts a compacted part of `queue` made of batches copied from
    /// another log: the compacted records of a queue moving here from
    /// another broker group (`PartImport::finish` makes it the queue's).
    pub async fn import_part(&self, queue: QueueId) -> Result<PartImport<'_>> {
        self.inner.import_part(queue).await
    }

    /// Starts reading the sealed segment based at `base` into a tiered
    /// object of the batches `wanted` says (by queue and offsets;
    /// `SegmentExport::step`).
    pub fn export_segment<'a>(
        &'a self,
        base: u64,
        wanted: &'a dyn Fn(QueueId, std::ops::Range<u64>) -> bool,
    ) -> Result<SegmentExport<'a>> {
        self.inner.export_segment(base, wanted)
    }

    /// Stored batches (as a tiered object holds them) in clear: each sealed
    /// one opened with this shard's data keys, as a read returns it.
    pub fn open_batches(&self, stored: &[u8]) -> Result<Vec<u8>> {
        let keyring = self.inner.config.keyring.as_deref();
        let mut clear = Vec::with_capacity(stored.len());
        for one in batch::split(stored) {
            clear.extend_from_slice(&crate::crypt::in_clear(keyring, one, 0)?);
        }
        Ok(clear)
    }

    /// What `queue`'s compacted part holds, if it has one.
    pub fn compacted(&self, queue: QueueId) -> Option<Compacted> {
        self.inner.state.borrow().compacted.get(&queue).map(|part| part.describe())
    }

    /// Appends a producer's record batch to `queue`: checks its length and CRC,
    /// stamps its base offset, and returns once it is durable (sync policy) or
    /// queued (async policy).
    pub async fn append(&self, queue: QueueId, batch: &[u8]) -> Result<Appended> {
        self.append_as(queue, batch, RecordTimes::Producer).await
    }

    /// `append`, the records carrying `times`. Under `LogAppend` a copy of
    /// the checked batch is given the broker's time, and a retry of the
    /// producer's batch is still told by what the producer sent.
    pub async fn append_as(&self, queue: QueueId, batch: &[u8], times: RecordTimes) -> Result<Appended> {
        self.append_with(queue, batch, times, false).await
    }

    /// Appends a batch copied from another log (a queue moving between
    /// broker groups) at the offsets it holds there: its first offset must
    /// be the queue's next, or the queue must not have held an offset yet,
    /// which then begins there (`NotNextOffset` otherwise, nothing stored).
    /// Its times are kept, and it is stored even if it looks like a recent
    /// batch (a producer's retry stored twice at the source is copied twice,
    /// or the offsets after it would shift); it joins the recent batches, so
    /// the producer's later retry of it is still recognised.
    pub async fn append_copied(&self, queue: QueueId, batch: &[u8]) -> Result<Appended> {
        self.append_with(queue, batch, RecordTimes::Producer, true).await
    }

    async fn append_with(&self, queue: QueueId, batch: &[u8], times: RecordTimes, copied: bool) -> Result<Appended> {
        let inner = &self.inner;
        let called = std::time::Instant::now();
        // A compressed Kafka batch's records, inflated once: for the check, then its index entries.
        let mut inflated = Vec::new();
        let checked = batch::check_keeping(batch, inner.config.limits(), &mut inflated)?;
        let key = BatchKey::checked(queue, &checked);
        let stamped;
        let batch = match times {
            RecordTimes::Producer => batch,
            RecordTimes::LogAppend(now_ms) => {
                // The stamp keeps the records and their count: the check holds.
                let mut copy = batch.to_vec();
                batch::set_log_append_time(&mut copy, now_ms)?;
                stamped = copy;
                &stamped
            }
        };
        let turn = Turn::take(inner);
        let placed = loop {
            let wait = {
                let mut st = inner.state.borrow_mut();
                if inner.closed.get() {
                    return Err(StorageError::Closed);
                }
                if let Some(reason) = st.failed() {
                    return Err(StorageError::Failed(reason.to_string()));
                }
                if st.log.is_mirror() {
                    return Err(StorageError::WrongRole("this shard follows a leader: append to the leader"));
                }
                if st.frozen.contains(&queue) {
                    return Err(StorageError::QueueFrozen(queue.0));
                }
                if turn.may_go() {
                    let State { queues, log, index_mem_entries, lookup, .. } = &mut *st;
                    let q = queues.get_mut(&queue).ok_or(StorageError::UnknownQueue(queue.0))?;
                    if copied {
                        let base = BatchHeader::decode(batch).map_or(0, |h| h.base_offset);
                        let next = q.next().0;
                        let filled = q.line_up(Offset(base));
                        *index_mem_entries +=
                            filled.ok_or(StorageError::NotNextOffset { queue: queue.0, offset: base, next })?;
                    } else if let Some(earlier) = lookup.stored_before(key.as_ref()) {
                        break Err(earlier);
                    }
                    // Lookup entries are not counted in `index_mem_entries`:
                    // checkpoints, which write them out, are paced by the queue
                    // index alone (one to two lookup entries per index entry).
                    match log.append(q, lookup, batch, (&checked, &inflated), key) {
                        Ok(placed) => {
                            *index_mem_entries += placed.appended.record_count as usize;
                            if q.file(q.file_wanted(inner.config.index_file_entries)).is_none() {
                                inner.index_files_needed.notify();
                            }
                            break Ok(placed);
                        }
                        Err(Blocked::Backpressure) => add(&inner.counters.backpressure_waits, 1),
                        Err(Blocked::Segment) => {
                            if let Some(detail) = inner.space_short() {
                                let dir = inner.config.dir.display().to_string();
                                return Err(StorageError::Full { dir, detail });
                            }
                            add(&inner.counters.segment_waits, 1);
                            inner.spare_needed.notify();
                        }
                    }
                    inner.flush_needed.notify();
                }
                turn.queue();
                inner.space_freed.wait()
            };
            wait.await;
        };
        drop(turn);
        let placed = match placed {
            Ok(placed) => placed,
            Err(earlier) => return inner.stored_again(earlier).await,
        };
        if inner.state.borrow().log.spare_wanted().is_some() {
            inner.spare_needed.notify();
        }
        let c = &inner.counters;
        add(&c.appends, 1);
        add(&c.records, u64::from(placed.appended.record_count));
        add(&c.append_bytes, batch.len() as u64);
        inner.flush_needed.notify();
        let answered = if placed.policy == FlushPolicy::Sync {
            // The round's completion time: one clock read for all its appends.
            placed.done.wait().await?;
            placed.done.completed_at().expect("a completed round has its time")
        } else {
            std::time::Instant::now()
        };
        inner.histograms.append_seconds.observe_duration(answered.saturating_duration_since(called));
        Ok(placed.appended)
    }

    /// Reads whole batches of `queue` from `offset`, up to about `max_bytes`
    /// (always at least one batch when one is readable). At the readable end it
    /// returns empty at once or parks, as `wait` says.
    pub async fn read(&self, queue: QueueId, offset: u64, max_bytes: usize, wait: ReadWait) -> Result<ReadBatches> {
        match self.inner.read(queue, offset, max_bytes, wait).await {
            // Retention moved the start past `offset` and released its
            // segment while the read was under way: what a read begun a
            // moment later is told (a tiered queue's reader goes to the
            // bucket), not a missing segment's corruption.
            Err(failed) => match self.offsets(queue) {
                Ok((start, end)) if offset < start => {
                    tracing::debug!(queue = queue.0, offset, start, %failed, "a read overtaken by retention");
                    Err(StorageError::OffsetOutOfRange { queue: queue.0, offset, start, end })
                }
                _ => Err(failed),
            },
            read => read,
        }
    }

    /// Where records whose message id or key has this lookup hash may be
    /// ([`crate::lookup::id_hash`], [`crate::lookup::key_hash`]): candidates
    /// to confirm against the records. Entries of segments removed by
    /// retention are gone, but for the records compacted parts keep.
    pub async fn lookup(&self, hash: u64) -> Result<Vec<(QueueId, u64)>> {
        let (reads, mut found) = self.inner.state.borrow().lookup.plan(hash);
        for read in &reads {
            read.run(&mut found).await?;
        }
        // Compacted parts keep their records' entries: the log's went with its segments.
        let parts: Vec<(QueueId, Rc<CleanStore>)> =
            self.inner.state.borrow().compacted.iter().map(|(q, part)| (*q, part.clone())).collect();
        for (queue, part) in parts {
            found.extend(part.lookup(hash).await?.into_iter().map(|offset| (queue, offset)));
        }
        found.sort_unstable();
        found.dedup();
        Ok(found)
    }

    /// The index entry of an offset the log holds (log position, batch
    /// size, tag hash): from `log_start` on.
    pub async fn entry(&self, queue: QueueId, offset: u64) -> Result<IndexEntry> {
        let (start, end) = (self.log_start(queue)?, self.offsets(queue)?.1);
        if offset < start || offset >= end {
            return Err(StorageError::OffsetOutOfRange { queue: queue.0, offset, start, end });
        }
        self.inner.entry(queue, Offset(offset)).await
    }

    /// Writes the index out and records a checkpoint now.
    pub async fn checkpoint(&self) -> Result<()> {
        self.inner.checkpoint().await.map(|_| ())
    }

    /// Runs retention now; returns the number of segments deleted.
    pub async fn apply_retention(&self) -> Result<usize> {
        self.inner.apply_retention().await
    }

    /// A snapshot of the shard's counters.
    pub fn stats(&self) -> ShardStats {
        self.inner.counters.snapshot(self.inner.state.borrow().cache.evictions())
    }

    /// A snapshot of the shard's histograms.
    pub fn histograms(&self) -> ShardHistograms {
        self.inner.histograms.snapshot()
    }

    /// Reads of `queue` parked at its end right now, waiting for data.
    pub fn parked_reads(&self, queue: QueueId) -> u64 {
        self.inner.parked_reads.of(queue)
    }

    /// Bytes of the log's segment files by state.
    pub fn segment_bytes(&self) -> SegmentBytes {
        let st = self.inner.state.borrow();
        SegmentBytes {
            pooled: st.pool.len() as u64 * self.inner.config.segment_bytes,
            ..st.log.segment_bytes_by_state()
        }
    }

    /// Failure probes, for tests that exercise error paths.
    pub fn probes(&self) -> &FailureProbes {
        &self.inner.probes
    }

    /// Reads whole stored batches of the log from `from` (a batch boundary),
    /// up to about `max_bytes`, for a follower; at the written end it returns
    /// empty at once or parks, as `wait` says.
    pub async fn read_range(&self, from: u64, max_bytes: usize, wait: ReadWait) -> Result<LogRange> {
        self.inner.read_range(LogPos(from), max_bytes, wait).await
    }

    /// Places batches a leader shipped from its log position `from` (which
    /// must be this log's end) and returns the durable end once they are durable.
    pub async fn mirror(&self, from: u64, bytes: &[u8]) -> Result<u64> {
        self.inner.mirror(LogPos(from), bytes).await.map(|end| end.0)
    }

    /// Makes a follower's shard take appends as a leader (it keeps its log).
    pub fn lead(&self) {
        self.inner.state.borrow_mut().log.set_mirror(false);
    }

    /// Why the shard is not fully serving, if it is not: a failed write or
    /// sync (appends refused until a restart), or a disk too full for the next segment.
    pub fn trouble(&self) -> Option<String> {
        if let Some(reason) = self.inner.state.borrow().failed() {
            return Some(format!("storage failed, appends are refused until a restart: {reason}"));
        }
        self.inner
            .space_short()
            .map(|why| format!("the disk is full, appends that need a new segment are refused: {why}"))
    }

    /// True while the shard follows a leader.
    pub fn is_mirror(&self) -> bool {
        self.inner.state.borrow().log.is_mirror()
    }

    /// The log's positions: (start, written end, durable end).
    pub fn log_positions(&self) -> (u64, u64, u64) {
        let st = self.inner.state.borrow();
        (st.log.start().0, st.log.written_end().0, st.log.synced_end().0)
    }

    /// Holds reads back below `committed` (replication: only what enough
    /// replicas hold durably is readable), or lifts the gate with None. The
    /// gate only moves forward.
    pub fn commit_to(&self, committed: Option<u64>) {
        let mut st = self.inner.state.borrow_mut();
        let st = &mut *st;
        if let (Some(old), Some(new)) = (st.commit_gate, committed) {
            assert!(new >= old.0, "the commit gate moves forward: {old} -> {new}");
        }
        st.commit_gate = committed.map(LogPos);
        let written_end = st.log.written_end();
        for queue in std::mem::take(&mut st.behind_gate) {
            let Some(end) = st.readable_end(queue, written_end, false) else { continue };
            let q = st.queues.get_mut(&queue).expect("readable_end found it");
            if q.publish(end) {
                q.arrivals().notify();
            }
        }
    }

    /// Makes retention keep the segment holding `position` and every later
    /// one (data the owner still needs, such as pending delayed messages),
    /// until called again with another position (u64::MAX: no floor).
    pub fn keep_from(&self, position: LogPos) {
        self.inner.retention_floor.set(position);
    }

    /// Says that the owner reads none of its queues below `position` (their
    /// starts moved past it, by `trim`): retention retires the segments
    /// wholly below it (within the retention floor) at once.
    pub fn release_below(&self, position: LogPos) {
        if self.inner.released.replace(position) < position {
            self.inner.released_moved.notify();
        }
    }

    /// Removes `queue`'s records below `offset`: its start moves there
    /// (never back; past the readable end is `OffsetOutOfRange`). Durable at
    /// the next checkpoint; the space comes back once `release_below` passes
    /// the segments. Returns the queue's start.
    pub fn trim(&self, queue: QueueId, offset: u64) -> Result<u64> {
        let mut st = self.inner.state.borrow_mut();
        let State { queues, compacted, .. } = &mut *st;
        let q = queues.get_mut(&queue).ok_or(StorageError::UnknownQueue(queue.0))?;
        let part = compacted.get(&queue).map(|p| &**p);
        let (start, end) = (start_with(part, q).0, q.visible().0);
        if offset > end {
            return Err(StorageError::OffsetOutOfRange { queue: queue.0, offset, start, end });
        }
        if let Some(part) = part {
            part.move_start(Offset(offset));
        }
        q.move_start(Offset(offset));
        Ok(start_with(part, q).0)
    }

    /// Base positions of the log's segments, ascending (spare excluded).
    pub fn segment_bases(&self) -> Vec<u64> {
        self.inner.state.borrow().log.segment_bases().into_iter().map(|b| b.0).collect()
    }

    /// Stops appends, flushes and syncs what was appended, checkpoints, and
    /// stops the background tasks.
    pub async fn close(&self) -> Result<()> {
        let inner = &self.inner;
        if inner.closed.replace(true) {
            return Ok(());
        }
        inner.flush_needed.notify();
        inner.space_freed.notify();
        inner.checkpoint_needed.notify();
        let flusher = inner.flusher.borrow_mut().take();
        if let Some(flusher) = flusher {
            flusher.await;
        }
        let failed = inner.state.borrow().failed().map(str::to_string);
        let result = match failed {
            Some(reason) => Err(StorageError::Failed(reason)),
            None => inner.checkpoint().await.map(|_| ()),
        };
        let result = match result {
            Ok(()) => {
                let (bytes, dir) = inner.state.borrow().lookup.recent_saved();
                crate::lookup::RecentBatches::save(bytes, &dir).await
            }
            failed => failed,
        };
        inner.tasks.borrow_mut().clear();
        result
    }
}

/// The first offset readers see of `q`, whose compacted part is `part`.
pub(crate) fn start_with(part: Option<&CleanStore>, q: &QueueIndex) -> Offset {
    match part {
        Some(part) if part.holds_any() => part.start(),
        _ => q.start(),
    }
}

/// Puts the chunk holding the write frontier in the cache: later rounds fill
/// it in place, so it must hold the bytes already on disk.
async fn seed_frontier_chunk(
    cache: &mut ChunkCache<u64>,
    segments: &std::collections::BTreeMap<LogPos, Rc<crate::log::segment::Segment>>,
    end: LogPos,
    segment_bytes: u64,
) -> Result<()> {
    let chunk_bytes = cache.chunk_bytes() as u64;
    let chunk = end.chunk(chunk_bytes);
    let chunk_start = LogPos(chunk * chunk_bytes);
    cache.pin(Some(chunk));
    if end == chunk_start {
        return Ok(());
    }
    let seg = crate::log::segment::at_or_before(segments, end).expect("a segment holds the end");
    debug_assert!(end < seg.base + segment_bytes);
    let data = seg
        .file
        .read_at_aligned(chunk_start - seg.base, chunk_bytes as usize)
        .await
        .map_err(|e| StorageError::io("reading", &seg.path, e))?;
    let keep = (end - chunk_start) as usize;
    if let Some(slot) = cache.insert(chunk) {
        slot[..keep].copy_from_slice(&data[..keep]);
    }
    Ok(())
}

/// An append's place in the arrival order. An append that is not blocked
/// never joins the queue of blocked ones, so it costs one counter update.
struct Turn<'a> {
    inner: &'a Inner,
    number: u64,
}

impl<'a> Turn<'a> {
    fn take(inner: &'a Inner) -> Turn<'a> {
        let number = inner.next_append.get();
        inner.next_append.set(number + 1);
        Turn { inner, number }
    }

    /// Nobody blocked waits ahead of this append.
    fn may_go(&self) -> bool {
        self.inner.blocked_appends.borrow().front().is_none_or(|&first| first == self.number)
    }

    /// Joins the blocked appends (once).
    fn queue(&self) {
        let mut blocked = self.inner.blocked_appends.borrow_mut();
        if !blocked.contains(&self.number) {
            blocked.push_back(self.number);
        }
    }
}

impl Drop for Turn<'_> {
    /// Placed, failed or cancelled: leave the queue and let the next one try.
    fn drop(&mut self) {
        let mut blocked = self.inner.blocked_appends.borrow_mut();
        if let Some(at) = blocked.iter().position(|&n| n == self.number) {
            blocked.remove(at);
            if !blocked.is_empty() {
                self.inner.space_freed.notify();
            }
        }
    }
}

/// Whose times a stored batch's records carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordTimes {
    /// The producer's (Kafka's CreateTime).
    Producer,
    /// The broker's, at append (Kafka's LogAppendTime), in ms.
    LogAppend(i64),
}

impl Inner {
    /// Waits until the log is durable up to `at` (or the shard failed); the synced end.
    pub(crate) async fn synced_to(&self, at: LogPos) -> Result<LogPos> {
        loop {
            let wait = {
                let st = self.state.borrow();
                if let Some(reason) = st.failed() {
                    return Err(StorageError::Failed(reason.to_string()));
                }
                if st.log.synced_end() >= at {
                    return Ok(st.log.synced_end());
                }
                self.published.wait()
            };
            wait.await;
        }
    }

    /// Answers the append of a batch stored before: where it was, once durable.
    async fn stored_again(&self, earlier: Stored) -> Result<Appended> {
        // Rounds hold whole batches: durable past its first byte is durable to its end.
        self.synced_to(LogPos(earlier.position.0 + 1)).await?;
        add(&self.counters.duplicates, 1);
        let (base_offset, record_count, position) = (earlier.base_offset, earlier.records, earlier.position);
        Ok(Appended { base_offset, record_count, position, duplicate: true })
    }

    /// Creates queues, their index directories made durable by one sync of
    /// the directory that holds them (one sync per queue made a topic of
    /// 4,096 queues take seconds). None is created if one already exists.
    pub async fn create_queues(&self, queues: &[(QueueId, Option<FlushPolicy>)]) -> Result<()> {
        if queues.is_empty() {
            return Ok(());
        }
        let exists = |st: &State| queues.iter().find(|(q, _)| st.queues.contains_key(q)).map(|(q, _)| q.0);
        if let Some(q) = exists(&self.state.borrow()) {
            return Err(StorageError::QueueExists(q));
        }
        let shard_dir = self.config.dir.clone();
        let dirs: Vec<_> = queues.iter().map(|(q, _)| index::queue_dir(&shard_dir, *q)).collect();
        let made = dirs.clone();
        let index_dir = shard_dir.join("index");
        crate::fs::blocking("creating queue directories in", &index_dir, move |_| {
            made.iter().try_for_each(std::fs::create_dir_all)
        })
        .await?;
        crate::fs::sync_dir(&index_dir).await?;
        let mut st = self.state.borrow_mut();
        if let Some(q) = exists(&st) {
            return Err(StorageError::QueueExists(q));
        }
        for ((queue, policy), dir) in queues.iter().zip(dirs) {
            let policy = policy.unwrap_or(self.config.default_flush_policy);
            st.queues.insert(*queue, QueueIndex::new(*queue, dir, policy, Offset(0), Offset(0)));
        }
        Ok(())
    }
}
