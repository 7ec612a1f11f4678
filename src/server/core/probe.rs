//! What one shard reports at a scrape: its storage engine's counters and
//! histograms, its stalls and client traffic, its queues' ends
//! and the consumer offsets it stores (the admin listener joins the two into
//! consumer lag, since a group's coordinator may sit on another shard than
//! its queues), its replication state, then every registered feature probe.

use super::context::{Core, ShardRole};
use super::metrics::{Family, Samples};
use super::stall::Cause;
use ringmq_shards::{QueueId, ShardStats};

impl Core {
    /// Every sample this shard reports now.
    pub fn collect_metrics(&self) -> Vec<Family> {
        let mut out = Samples::default();
        storage(self, &mut out);
        let pulse = self.pulse();
        let help = "Times the shard's thread was held past the stall threshold, by cause (running, blocked: the broker's; starved, stolen: the machine's).";
        for cause in Cause::ALL {
            out.counter("ringmq_stalls", help, &[("cause", cause.as_str())], pulse.count_of(cause));
        }
        let help = "The longest hold of the shard's thread so far.";
        out.gauge("ringmq_stall_longest_seconds", help, &[], pulse.longest().as_secs_f64());
        let help = "Time the shard's thread ran tasks and polled I/O, without its idle spin and sleep: its work, where its CPU time also counts the spin.";
        out.counter_seconds("ringmq_shard_busy_seconds", help, &[], pulse.busy());
        self.traffic().collect(&self.metadata(), &mut out);
        self.trace().collect(&mut out);
        queues_and_offsets(self, &mut out);
        if let ShardRole::Leader(replication) = self.role() {
            replication.collect(self.storage(), &mut out);
        }
        let role = match self.role() {
            ShardRole::Single => "single",
            ShardRole::Leader(_) => "leader",
            ShardRole::Follower { .. } => "follower",
        };
        out.gauge(
            "ringmq_shard_role",
            "1, labelled with what this shard does in its broker group.",
            &[("role", role)],
            1.0,
        );
        self.probes().collect(&mut out);
        out.into_families()
    }
}

fn storage(core: &Core, out: &mut Samples) {
    let s: ShardStats = core.storage().stats();
    let counters = [
        ("ringmq_storage_appends", "Record batches appended to the shard's log.", s.appends),
        ("ringmq_storage_appended_records", "Records appended to the shard's log.", s.records),
        ("ringmq_storage_appended_bytes", "Bytes of record batches appended.", s.append_bytes),
        ("ringmq_storage_written_bytes", "Bytes written to log segments (tail-page rewrites included).", s.write_bytes),
        ("ringmq_storage_syncs", "Durability barriers: O_DSYNC writes of rounds and fdatasyncs.", s.fsyncs),
        ("ringmq_storage_group_commit_rounds", "Group-commit rounds written.", s.rounds),
        (
            "ringmq_storage_backpressure_waits",
            "Appends that waited for pending bytes to become durable.",
            s.backpressure_waits,
        ),
        ("ringmq_storage_segment_waits", "Appends that waited for the next segment to be ready.", s.segment_waits),
        ("ringmq_storage_segments_created", "Segments created (preallocated and zero-filled).", s.segments_created),
        ("ringmq_storage_segments_deleted", "Segments deleted by retention.", s.segments_deleted),
        (
            "ringmq_storage_segments_pooled",
            "Segments retention retired into the pool of spares instead of deleting them.",
            s.segments_pooled,
        ),
        (
            "ringmq_storage_segments_recycled",
            "Segments made from a pooled file: renamed, nothing zero-filled.",
            s.segments_recycled,
        ),
        (
            "ringmq_storage_zero_fill_bytes",
            "Bytes of zeros written into new segments ahead of appends.",
            s.zero_fill_bytes,
        ),
        ("ringmq_cache_hits", "Reads served from the shard's log cache.", s.cache_hits),
        ("ringmq_cache_misses", "Reads that missed the log cache and read the disk.", s.cache_misses),
        ("ringmq_cache_evictions", "Chunks evicted from the log cache.", s.cache_evictions),
        ("ringmq_cache_readahead_chunks", "Chunks read ahead of a sequential reader.", s.cache_readahead),
        ("ringmq_storage_checkpoints", "Checkpoints of the queue indexes written.", s.checkpoints),
        ("ringmq_storage_corrupt_reads", "Reads refused because a stored batch failed its check.", s.corrupt_reads),
        (
            "ringmq_storage_duplicate_appends",
            "Retried batches recognised and answered with where they were stored.",
            s.duplicates,
        ),
        ("ringmq_compaction_passes", "Compaction passes finished over compacted topics' queues.", s.compaction_passes),
        ("ringmq_compaction_records_read", "Records compaction passes read.", s.compaction_records_read),
        (
            "ringmq_compaction_records_removed",
            "Records compaction passes removed (superseded, expired tombstones and markers, aborted).",
            s.compaction_records_removed,
        ),
        (
            "ringmq_compaction_written_bytes",
            "Bytes compaction passes wrote into compacted parts.",
            s.compaction_bytes_written,
        ),
    ];
    for (name, help, value) in counters {
        out.counter(name, help, &[], value);
    }
    let segments = core.storage().segment_bytes();
    let help = "Bytes of the log's segment files by state (active, spare: preallocated next, sealed, pooled: retired, kept for recycling).";
    let states = [
        ("active", segments.active),
        ("spare", segments.spare),
        ("sealed", segments.sealed),
        ("pooled", segments.pooled),
    ];
    for (state, bytes) in states {
        out.gauge("ringmq_storage_segment_bytes", help, &[("state", state)], bytes as f64);
    }
    let h = core.storage().histograms();
    let help = "Seconds from an append's arrival at the storage engine to its answer (durable, for a sync queue).";
    out.histogram("ringmq_storage_append_seconds", help, &[], h.append_seconds);
    let help = "Seconds of one durability barrier (an O_DSYNC write of group-commit rounds, or an fdatasync).";
    out.histogram("ringmq_storage_sync_seconds", help, &[], h.sync_seconds);
    let help = "Records made durable by one durability barrier: the group-commit batch size.";
    out.histogram("ringmq_storage_group_commit_records", help, &[], h.sync_records);
}

/// Each queue's start and end offsets (of the queues this shard owns) and
/// each consumer group's committed offsets (of the groups it coordinates).
fn queues_and_offsets(core: &Core, out: &mut Samples) {
    let end_help = "The offset the next message of the queue gets (its end), on the shard that owns it.";
    let start_help = "The queue's oldest offset still stored.";
    let mut parked = 0;
    for (topic, queue, slot) in core.metadata().slots_on(core.id()) {
        parked += core.storage().parked_reads(QueueId(slot.storage_id));
        if let Ok((start, end)) = core.storage().offsets(QueueId(slot.storage_id)) {
            let queue = queue.to_string();
            let labels = [("topic", topic.as_str()), ("queue", queue.as_str())];
            out.gauge("ringmq_queue_end_offset", end_help, &labels, end as f64);
            out.gauge("ringmq_queue_start_offset", start_help, &labels, start as f64);
        }
        if let Some(part) = core.storage().compacted(QueueId(slot.storage_id)) {
            let queue = queue.to_string();
            let labels = [("topic", topic.as_str()), ("queue", queue.as_str())];
            let help = "Bytes of a compacted queue's compacted part (each key's latest record below its end).";
            out.gauge("ringmq_compacted_bytes", help, &labels, part.bytes as f64);
            let help = "Offsets below this of a compacted queue were compacted; the log holds the rest.";
            out.gauge("ringmq_compacted_end_offset", help, &labels, part.end as f64);
        }
    }
    let help = "Client fetches parked at a topic queue's end waiting for data (a long poll of many queues counts once per queue).";
    out.gauge("ringmq_long_polls_parked", help, &[], parked as f64);
    let help = "A consumer group's committed offset of a queue (reported by the group's coordinator shard).";
    for ((group, topic, queue), offset) in core.offsets().consumers() {
        let queue = queue.to_string();
        let labels = [("group", group.as_str()), ("topic", topic.as_str()), ("queue", queue.as_str())];
        out.gauge("ringmq_group_committed_offset", help, &labels, offset as f64);
    }
}
