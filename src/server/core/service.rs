//! The typed service every feature and the wire call: locate a topic's
//! queue, append to it (here or on its owner, over the mesh), read from one
//! of this shard's queues, check a client's batch, commit and read offsets.
//! Topic changes are in `topics.rs`. No call here encodes or decodes a frame.

use super::context::{Core, ShardRole};
use super::failure::Failure;
use super::failure::Reason;
use super::mesh::{Answer, Call};
use super::metadata::{Home, QueueSlot};
use super::offsets::Committed;
use super::topic_configs::{TimestampType, TopicConfigs};
use crate::protocol::messages::QueueRef;
use crate::server::internal::stored_batch;
use ringmq_shards::kafka::Marker;
use ringmq_shards::{QueueId, ReadBatches, ReadWait, Record, RecordTimes, StorageError};
use std::collections::HashMap;
use std::rc::Rc;
use std::time::Duration;

/// How long a delivery that must not be lost waits before trying again.
const RETRY_PAUSE: Duration = Duration::from_millis(200);

/// Where a batch was stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stored {
    /// The offset of its first record.
    pub base: u64,
    /// Its records (0: a retry of a batch stored before).
    pub count: u32,
    /// The broker's time it was given (a LogAppendTime topic's).
    pub log_append_time: Option<i64>,
}

impl Core {
    /// Where a topic's queue lives in this broker group (NotLeader for a
    /// queue of another group: its leader serves it).
    pub fn locate(&self, q: &QueueRef) -> Result<QueueSlot, Failure> {
        let (group, why) = match self.home(q)? {
            Home::Here(slot) | Home::Leaving { slot, .. } => return Ok(slot),
            Home::Group(place) => (place.broker_group, "its leader serves it"),
            Home::Arriving { from, .. } => (from.broker_group, "it serves it until the queue has moved here"),
        };
        let m = format!(
            "queue {} of topic {:?} lives in broker group {group:?}: {why}; refresh metadata",
            q.queue, q.topic
        );
        Err(Failure(Reason::NotLeader, m))
    }

    /// Where a topic's queue lives, in this broker group or another.
    pub fn home(&self, q: &QueueRef) -> Result<Home, Failure> {
        let metadata = self.metadata();
        let topic = metadata.topics.get(&q.topic).ok_or_else(|| Failure::unknown_topic(&q.topic))?;
        let home = topic.queues.get(q.queue as usize).ok_or_else(|| {
            Failure(
                Reason::UnknownQueue,
                format!("topic {:?} has queues 0..{}, not {}", q.topic, topic.queues.len(), q.queue),
            )
        })?;
        Ok(home.clone())
    }

    /// This shard owns the queue of `slot`.
    pub fn owns(&self, slot: QueueSlot) -> bool {
        slot.shard as usize == self.id()
    }

    /// Appends `batch` durably (as its topic's flush policy says) to one of
    /// this shard's queues; returns where it was stored. A
    /// leader that is deposed, or whose epoch's start is not recorded yet,
    /// stores nothing (whichever listener the batch came through): data of
    /// an epoch nobody can cut back to would stay on this node when it follows.
    pub async fn append_here(&self, slot: QueueSlot, batch: &[u8]) -> Result<Stored, Failure> {
        self.may_store(slot)?;
        let configs = self.queue_configs.borrow().get(&slot.storage_id).cloned();
        let times = match configs {
            Some(configs) => self.apply_topic_configs(&configs, batch)?,
            None => RecordTimes::Producer,
        };
        let queue = QueueId(slot.storage_id);
        let appended = self.storage().append_as(queue, batch, times).await?;
        self.replicated(appended.position.0 + batch.len() as u64).await?;
        let log_append_time = match times {
            RecordTimes::Producer => None,
            // A retry carries the time its batch was stored with.
            RecordTimes::LogAppend(_) if appended.duplicate => {
                Some(stored_batch::newest_timestamp(self.storage(), queue, appended.base_offset).await?)
            }
            RecordTimes::LogAppend(now) => Some(now),
        };
        Ok(Stored { base: appended.base_offset, count: appended.record_count, log_append_time })
    }

    /// Whether this shard may store into the queue of `slot`: it owns it,
    /// and it is not a deposed leader (or one whose epoch has not started).
    /// (A queue frozen for a move is refused by the engine where the append
    /// is placed, `Failure::moving`.)
    fn may_store(&self, slot: QueueSlot) -> Result<(), Failure> {
        assert!(self.owns(slot), "queue {} lives on shard {}, not {}", slot.storage_id, slot.shard, self.id());
        if let ShardRole::Leader(replication) = self.role() {
            if replication.deposed() {
                let m = "this node does not lead its broker group now (its lease lapsed, a new epoch began, or its \
                         epoch has not started yet); refresh metadata and retry";
                return Err(Failure(Reason::NotLeader, m.into()));
            }
        }
        Ok(())
    }

    /// Appends a Kafka transactional batch of `producer_id` to one of this
    /// shard's queues: the first of its transaction there opens it (which
    /// holds the queue's last stable offset), in the same flush round.
    pub async fn append_transactional(
        &self,
        slot: QueueSlot,
        batch: &[u8],
        producer_id: i64,
    ) -> Result<Stored, Failure> {
        self.may_store(slot)?;
        let queue = QueueId(slot.storage_id);
        refuse_frozen(self.storage(), queue)?;
        let (opened, stored) = futures_util::future::join(
            self.txn_marks().begin(self.storage(), queue, producer_id),
            self.append_here(slot, batch),
        )
        .await;
        opened?;
        stored
    }

    /// Ends a Kafka transaction in a topic queue of this broker group: its
    /// marker written (on the queue's owner) and replicated.
    pub async fn end_txn(&self, q: &QueueRef, marker: Marker) -> Result<(), Failure> {
        let slot = self.locate(q)?;
        if !self.owns(slot) {
            return self.mesh().end_txn(slot.shard as usize, Call::EndTxn { queue: q.clone(), marker }).await;
        }
        self.may_store(slot)?;
        let queue = QueueId(slot.storage_id);
        refuse_frozen(self.storage(), queue)?;
        let now = self.clock().now_ms() as i64;
        let (_, end) = self.txn_marks().end(self.storage(), queue, marker, now).await?;
        self.replicated(end).await
    }

    /// Ends a Kafka transaction's pending offsets of `group` on the group's
    /// coordinator shard: the group's on commit, dropped on abort.
    pub async fn end_txn_offsets(&self, group: &str, producer_id: i64, commit: bool) -> Result<(), Failure> {
        let shard = self.coordinator(group)?;
        if shard != self.id() {
            let call = Call::EndTxnOffsets { group: group.to_string(), producer_id, commit };
            return self.mesh().end_txn(shard, call).await;
        }
        self.offsets().end_pending(self.storage(), producer_id, group, commit).await?;
        self.replicated_all().await
    }

    /// Durably records offsets a Kafka transaction commits for `group` (on
    /// the group's coordinator shard), pending until it ends.
    pub async fn commit_txn_offsets(
        &self,
        group: &str,
        producer_id: i64,
        offsets: &[(String, u32, Committed)],
    ) -> Result<(), Failure> {
        self.offsets().commit_pending(self.storage(), producer_id, group, offsets).await?;
        self.replicated_all().await
    }

    /// Appends the current Kafka transaction marks again (queues' starts
    /// tell which aborted ones readers may still meet).
    pub async fn snapshot_txn_marks(&self) -> Result<(), StorageError> {
        let metadata = self.metadata();
        let mut starts = HashMap::new();
        for (_, _, slot) in metadata.slots_on(self.id()) {
            starts.insert(slot.storage_id, self.storage().offsets(QueueId(slot.storage_id))?.0);
        }
        self.txn_marks().snapshot(self.storage(), &starts).await
    }

    /// Returns once everything this shard wrote so far is replicated as the
    /// group's mode asks.
    pub async fn replicated_all(&self) -> Result<(), Failure> {
        let (_, written_end, _) = self.storage().log_positions();
        self.replicated(written_end).await
    }

    /// Holds a batch to its topic's configs before it is stored: its size
    /// to `max.message.bytes` (as Kafka counts a batch), a key on every
    /// record of a compacted topic, the replicas in sync to
    /// `min.insync.replicas` (sync acks; one on a single node); the times its
    /// records are stored with (the broker's under LogAppendTime).
    fn apply_topic_configs(&self, configs: &TopicConfigs, batch: &[u8]) -> Result<RecordTimes, Failure> {
        if configs.cleanup_policy().compacts() {
            let mut scratch = Vec::new();
            let keyless = self.records_of(batch, &mut scratch)?.iter().position(|r| r.key.is_none());
            if let Some(i) = keyless {
                let m = format!("record {i} of the batch has no key: a compacted topic keeps records by key");
                return Err(Failure(Reason::KeyRequired, m));
            }
        }
        if let Some(max) = configs.max_message_bytes() {
            let size = batch.len().saturating_sub(ringmq_shards::batch::KAFKA_WRAPPER_BYTES);
            if size > max as usize {
                let m = format!("a batch of {size} bytes is larger than its topic's max.message.bytes ({max})");
                return Err(Failure(Reason::BatchTooLarge, m));
            }
        }
        if let Some(min) = configs.min_insync_replicas() {
            let in_sync = match self.role() {
                ShardRole::Leader(replication) => replication.in_sync_for_acks(),
                ShardRole::Single | ShardRole::Follower { .. } => Some(1),
            };
            if let Some(in_sync) = in_sync.filter(|n| *n < min as usize) {
                let m = format!("{in_sync} replica(s) in sync, fewer than the topic's min.insync.replicas ({min})");
                return Err(Failure(Reason::TooFewInSync, m));
            }
        }
        Ok(match configs.timestamp_type() {
            TimestampType::LogAppendTime => RecordTimes::LogAppend(self.clock().now_ms() as i64),
            TimestampType::CreateTime => RecordTimes::Producer,
        })
    }

    /// Appends `batch` to a topic's queue wherever it lives.
    pub async fn append(&self, q: &QueueRef, batch: &[u8]) -> Result<Stored, Failure> {
        let slot = self.locate(q)?;
        if self.owns(slot) {
            return self.append_here(slot, batch).await;
        }
        self.mesh().append(slot.shard as usize, q.clone(), batch.to_vec()).await
    }

    /// Appends `batch` to a topic's queue, trying again until it is stored
    /// (a delivery of a delayed, retried or committed message: the record
    /// it comes from stays until then, so it is delivered at least once).
    pub async fn append_until_stored(&self, q: &QueueRef, batch: &[u8]) {
        loop {
            match self.append_anywhere(q, batch).await {
                Ok(_) => return,
                Err(error) => {
                    let (topic, queue) = (&q.topic, q.queue);
                    tracing::warn!(shard = self.id(), %topic, queue, %error, "delivering a record failed; retrying");
                    glommio::timer::sleep(RETRY_PAUSE).await;
                }
            }
        }
    }

    /// Reads one of this shard's queues from `offset`, up to `max_bytes`
    /// (at least one batch), waiting up to `wait` at its end; a tiered
    /// queue below its local start from the bucket. The storage error
    /// stays whole: a damaged batch's offsets go back to the client.
    pub async fn read_here(
        &self,
        slot: QueueSlot,
        offset: u64,
        max_bytes: usize,
        wait: Duration,
    ) -> Result<ReadBatches, StorageError> {
        assert!(self.owns(slot), "queue {} lives on shard {}, not {}", slot.storage_id, slot.shard, self.id());
        let queue = QueueId(slot.storage_id);
        let wait = if wait.is_zero() { ReadWait::No } else { ReadWait::Upto(wait) };
        match self.storage().read(queue, offset, max_bytes, wait).await {
            Err(StorageError::OffsetOutOfRange { queue: q, offset, start, end }) if offset < start => {
                match self.remote_reads().read(self, queue, offset, max_bytes).await? {
                    Some(read) => Ok(read),
                    None => {
                        let start = self.queue_offsets(queue)?.0;
                        Err(StorageError::OffsetOutOfRange { queue: q, offset, start, end })
                    }
                }
            }
            read => read,
        }
    }

    /// A queue's first and end offsets as its readers see them: a tiered
    /// queue's first is in the bucket when its objects reach down from its
    /// local start. Until the shard has read its manifest (at start-up, the
    /// bucket down), a tiered queue's first is not known: a retriable
    /// `Remote` error, not the local start (a consumer reset to the
    /// earliest offset would skip what the bucket holds).
    pub fn queue_offsets(&self, queue: QueueId) -> Result<(u64, u64), StorageError> {
        let (start, end) = self.storage().offsets(queue)?;
        match self.manifest().current() {
            // Never past the local start: `reachable_start` goes down from it.
            Some(manifest) => Ok((manifest.reachable_start(queue.0, start), end)),
            None if self.objects().is_some() && self.is_tiered(queue) => Err(StorageError::Remote(format!(
                "queue {}: the first offset of a tiered queue is known once the bucket's manifest is read; retry",
                queue.0
            ))),
            None => Ok((start, end)),
        }
    }

    /// Whether `queue`'s topic keeps its records in tiered storage's bucket.
    fn is_tiered(&self, queue: QueueId) -> bool {
        self.queue_configs.borrow().get(&queue.0).is_some_and(|c| c.remote_storage())
    }

    /// The records of a client's batch, after checking its length, CRC and
    /// records against the broker's limits (a Kafka batch's inflated into `scratch`).
    pub fn records_of<'a>(&self, batch: &'a [u8], scratch: &'a mut Vec<u8>) -> Result<Vec<Record<'a>>, Failure> {
        ringmq_shards::batch::check(batch, self.config().batch_limits())?;
        Ok(ringmq_shards::batch::records(batch, scratch)?.collect::<Result<Vec<_>, _>>()?)
    }

    /// Durably records `committed` as `group`'s position in the queue (on
    /// this shard: the group's coordinator, or for the broker's own cursors
    /// the shard they belong to).
    pub async fn commit_offset(
        &self,
        group: &str,
        topic: &str,
        queue: u32,
        committed: Committed,
    ) -> Result<(), Failure> {
        Ok(self.offsets().commit(self.storage(), group, topic, queue, committed).await?)
    }

    /// Returns once the log up to `end` is replicated as the group's mode
    /// asks (at once on a single node or with async replication).
    pub async fn replicated(&self, end: u64) -> Result<(), Failure> {
        match self.role() {
            ShardRole::Leader(replication) => replication.wait_committed(self.storage(), end).await,
            ShardRole::Single | ShardRole::Follower { .. } => Ok(()),
        }
    }

    /// Waits up to `wait` until clients may read this shard: at once on a
    /// single node or a follower; a new leader once every member of the
    /// in-sync set holds the log it inherited (false if one does not by then).
    pub async fn readable(&self, wait: Duration) -> bool {
        match self.role() {
            ShardRole::Leader(replication) => replication.settle(self.storage(), wait).await,
            ShardRole::Single | ShardRole::Follower { .. } => true,
        }
    }

    /// `group`'s committed offset of the queue on this shard, if any.
    pub fn committed_offset(&self, group: &str, topic: &str, queue: u32) -> Option<u64> {
        self.offsets().get(group, topic, queue).map(|c| c.offset)
    }

    /// `group`'s committed position in the queue on this shard, with its metadata.
    pub fn committed(&self, group: &str, topic: &str, queue: u32) -> Option<Committed> {
        self.offsets().get(group, topic, queue)
    }

    /// Why this shard does not serve fully, if it does not: its storage
    /// failed or is out of space, it is stopping, or it no longer leads.
    pub fn trouble(&self) -> Option<String> {
        if self.tasks().stopping() {
            return Some(format!("shard {} is shutting down", self.id()));
        }
        if let ShardRole::Leader(replication) = self.role() {
            if replication.deposed() {
                return Some("this node no longer leads its broker group; it restarts in its new role".into());
            }
        }
        self.storage().trouble().map(|why| format!("shard {}: {why}", self.id()))
    }

    /// Serves what another shard's core asks; a forwarded client frame is
    /// the wire's, not the core's.
    pub async fn serve_call(self: &Rc<Self>, call: Call) -> Answer {
        match call {
            Call::Frame(_) | Call::VerifyTxn { .. } => unreachable!("served by the wire, which holds the coordinator"),
            Call::Metadata(next) => {
                if let Err(error) = self.apply_metadata(next).await {
                    tracing::error!(shard = self.id(), %error, "applying metadata failed");
                }
                Answer::Applied
            }
            Call::Append { queue, batch } => Answer::Appended(self.append(&queue, &batch).await),
            Call::CreateTopic(req) => Answer::Changed(self.create_topic(req).await),
            Call::DeleteTopic(name) => Answer::Changed(self.delete_topic(&name).await),
            Call::ConfigureTopic { name, changes } => Answer::Changed(self.configure_topic(&name, changes).await),
            Call::AddQueues { name, queues } => Answer::Changed(self.add_queues(&name, queues).await),
            Call::ChangeAccounts(change) => Answer::AccountsChanged(self.change_accounts(change).await),
            Call::Metrics => Answer::Metrics(self.collect_metrics()),
            Call::Health => Answer::Health(self.trouble()),
            commit @ Call::TraceCommit { .. } => self.serve_trace_commit(commit),
            Call::EndTxn { queue, marker } => Answer::Ended(self.end_txn(&queue, marker).await),
            Call::EndTxnOffsets { group, producer_id, commit } => {
                Answer::Ended(self.end_txn_offsets(&group, producer_id, commit).await)
            }
        }
    }
}

/// Refuses a queue frozen for a move before a transaction's record is
/// written beside its batch or marker: the engine would refuse the append,
/// and the record would stand without it.
fn refuse_frozen(storage: &ringmq_shards::Shard, queue: QueueId) -> Result<(), Failure> {
    match storage.frozen_end(queue)? {
        Some(_) => Err(Failure::moving()),
        None => Ok(()),
    }
}
