//! Topic changes: shard 0 owns them (one at a time), stores the new
//! metadata durably, makes it current on every other shard over the mesh
//! and then on itself before the change is answered. Every shard creates the
//! storage queues it owns and deletes those of deleted topics as it applies.
//! In a cluster, topics are changed in etcd (through the control plane) and
//! each group leader's shard 0 applies what etcd holds (`follow_placement`).

use super::context::Core;
use super::failure::Failure;
use super::failure::Reason;
use super::mesh::Call;
use super::metadata::{self, Home, Metadata, QUEUES_MAX};
use super::placement::ClusterView;
use super::topic_configs::{ConfigChange, TopicConfigs};
use crate::server::internal::queues::METADATA;
use ringmq_shards::{FlushPolicy, QueueId, StorageError};
use std::collections::{HashMap, HashSet};
use std::rc::Rc;

/// A topic to create, in the broker's terms: each protocol's edge builds
/// it from its own request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewTopic {
    pub name: String,
    pub queues: u32,
    /// How its appends are made durable.
    pub flush: FlushPolicy,
    /// The configs it sets for itself.
    pub configs: TopicConfigs,
}

/// The shard that owns metadata changes.
const METADATA_SHARD: usize = 0;

impl Core {
    /// Creates a topic (on shard 0, wherever it is asked).
    pub async fn create_topic(self: &Rc<Self>, req: NewTopic) -> Result<(), Failure> {
        check_new_topic(&req)?;
        self.check_topic_configs(&req.configs)?;
        if let Some(placement) = self.placement() {
            return placement.create(req).await;
        }
        if self.id() != METADATA_SHARD {
            return self.mesh().change_topics(METADATA_SHARD, Call::CreateTopic(req)).await;
        }
        let _one_change_at_a_time = self.metadata_lock.acquire_permit(1).await;
        let current = self.metadata();
        if current.topics.contains_key(&req.name) {
            return Err(Failure(Reason::TopicExists, format!("topic {:?} already exists", req.name)));
        }
        let shards = self.shards() as u32;
        let next = current.with_topic(&req.name, req.queues, flush_code(req.flush), req.configs, shards);
        self.publish(next).await
    }

    /// Changes a topic's configs, all of `changes` or none (on shard 0,
    /// wherever it is asked; in a cluster, in etcd).
    pub async fn configure_topic(self: &Rc<Self>, name: &str, changes: Vec<ConfigChange>) -> Result<(), Failure> {
        if let Some(placement) = self.placement() {
            // What this broker can do, checked here: etcd checks the configs alone.
            self.check_topic_change(name, &changes)?;
            return placement.configure(name, changes).await;
        }
        if self.id() != METADATA_SHARD {
            let call = Call::ConfigureTopic { name: name.to_string(), changes };
            return self.mesh().change_topics(METADATA_SHARD, call).await;
        }
        let _one_change_at_a_time = self.metadata_lock.acquire_permit(1).await;
        let mut next = (*self.metadata()).clone();
        let topic = next.topics.get_mut(name).ok_or_else(|| Failure::unknown_topic(name))?;
        let configs = topic.configs.changed(&changes)?;
        self.check_topic_configs(&configs)?;
        if configs == topic.configs {
            return Ok(());
        }
        topic.configs = configs;
        self.publish(next).await
    }

    /// Checks `changes` to a topic's configs without making them.
    pub fn check_topic_change(&self, name: &str, changes: &[ConfigChange]) -> Result<(), Failure> {
        let metadata = self.metadata();
        let topic = metadata.topics.get(name).ok_or_else(|| Failure::unknown_topic(name))?;
        self.check_topic_configs(&topic.configs.changed(changes)?)
    }

    /// Gives a topic `queues` queues in all (more than it has), on shard 0
    /// wherever it is asked (in a cluster, in etcd). A key's queue is its
    /// hash modulo the count, so keys move as Kafka's do when partitions are added.
    pub async fn add_queues(self: &Rc<Self>, name: &str, queues: u32) -> Result<(), Failure> {
        if queues > QUEUES_MAX {
            return Err(Failure::invalid(format!("a topic has 1..={QUEUES_MAX} queues, not {queues}")));
        }
        if let Some(placement) = self.placement() {
            return placement.add_queues(name, queues).await;
        }
        if self.id() != METADATA_SHARD {
            let call = Call::AddQueues { name: name.to_string(), queues };
            return self.mesh().change_topics(METADATA_SHARD, call).await;
        }
        let _one_change_at_a_time = self.metadata_lock.acquire_permit(1).await;
        let current = self.metadata();
        check_more_queues(name, current.topics.get(name).map(|t| t.queues.len()), queues)?;
        self.publish(current.with_queues(name, queues, self.shards() as u32)).await
    }

    /// Refuses configs past what this broker can do: a `max.message.bytes`
    /// larger than its own batch limit, tiered storage without a bucket.
    pub fn check_topic_configs(&self, configs: &TopicConfigs) -> Result<(), Failure> {
        if configs.remote_storage() && self.config().object_store.is_none() {
            let why = "remote.storage.enable=true needs the broker's bucket: start it with --s3-endpoint and \
                       --s3-bucket (check them with `ringmq tiered check`)";
            return Err(Failure(Reason::InvalidConfig, why.into()));
        }
        let most = self.config().kafka_batch_bytes_max();
        match configs.max_message_bytes() {
            Some(asked) if asked as usize > most => Err(Failure(
                Reason::InvalidConfig,
                format!(
                    "max.message.bytes={asked} is larger than the broker takes ({most} bytes); raise the broker's \
                     --batch-bytes-max first"
                ),
            )),
            _ => Ok(()),
        }
    }

    /// Deletes a topic and, on every shard, its queues' storage.
    pub async fn delete_topic(self: &Rc<Self>, name: &str) -> Result<(), Failure> {
        if let Some(placement) = self.placement() {
            return placement.delete(name).await;
        }
        if self.id() != METADATA_SHARD {
            return self.mesh().change_topics(METADATA_SHARD, Call::DeleteTopic(name.to_string())).await;
        }
        let _one_change_at_a_time = self.metadata_lock.acquire_permit(1).await;
        let mut next = (*self.metadata()).clone();
        if next.topics.remove(name).is_none() {
            return Err(Failure(Reason::UnknownTopic, format!("unknown topic {name:?}")));
        }
        self.publish(next).await
    }

    /// Creates a one-queue topic (a group's retry or dead-letter topic) unless it exists.
    pub async fn ensure_topic(self: &Rc<Self>, name: &str) -> Result<(), Failure> {
        if self.metadata().topics.contains_key(name) {
            return Ok(());
        }
        let topic =
            NewTopic { name: name.to_string(), queues: 1, flush: FlushPolicy::Sync, configs: TopicConfigs::default() };
        match self.create_topic(topic).await {
            Err(Failure(Reason::TopicExists, _)) => Ok(()),
            other => other,
        }
    }

    /// A leader's shard 0 in a cluster: makes the group's metadata what
    /// etcd's placement says, each time the control plane publishes a new
    /// view, and tells it which view the group now holds.
    pub async fn follow_placement(self: Rc<Self>) {
        let link = self.placement().expect("cluster mode").clone();
        let mut views = link.view.clone();
        loop {
            let view: ClusterView = views.borrow_and_update().clone();
            // Revision 0: not read from etcd yet (applying it would delete every topic).
            if view.revision != 0 {
                if let Err(error) = self.apply_placement(&view).await {
                    tracing::warn!(%error, revision = view.revision, "applying the cluster's topics failed; retrying");
                    if !self.tasks().sleep(std::time::Duration::from_millis(500)).await {
                        return;
                    }
                    continue;
                }
                (link.ask)(super::placement::PlacementAsk::Applied(view.revision));
            }
            if !matches!(self.tasks().unless_stopping(views.changed()).await, Some(Ok(()))) {
                return;
            }
        }
    }

    async fn apply_placement(&self, view: &ClusterView) -> Result<(), Failure> {
        let _one_change_at_a_time = self.metadata_lock.acquire_permit(1).await;
        let current = self.metadata();
        let next = current.with_placement(&view.topics, self.group());
        if next == *current {
            return Ok(());
        }
        self.publish(next).await
    }

    /// Appends the current metadata to shard 0's log again once its newest
    /// record lies before the log's active segment, and drops the older
    /// records: the one record the log needs (start-up and followers read
    /// the newest) never holds retention back. Under the metadata lock, so
    /// it never lands after a newer change.
    pub async fn carry_metadata_forward(&self) -> Result<(), Failure> {
        let storage = self.storage();
        if self.id() != METADATA_SHARD || storage.is_mirror() {
            return Ok(());
        }
        let _one_change_at_a_time = self.metadata_lock.acquire_permit(1).await;
        let end = super::metadata_log::end(storage);
        let Some(active) = storage.segment_bases().last().copied() else { return Ok(()) };
        if end == 0 || storage.entry(METADATA, end - 1).await?.position.0 >= active {
            return Ok(());
        }
        super::metadata_log::append(storage, &self.metadata(), self.clock().now_ms() as i64).await?;
        storage.trim(METADATA, end)?;
        Ok(())
    }

    /// Stores new metadata durably, then applies it on every shard.
    async fn publish(&self, next: Metadata) -> Result<(), Failure> {
        assert_eq!(self.id(), METADATA_SHARD, "metadata changes are made on shard 0");
        // In the log first, so that a broker group's followers have it and
        // the log is never behind the file (start-up takes the log's newest).
        super::metadata_log::append(self.storage(), &next, self.clock().now_ms() as i64).await?;
        // Committed in the group before any shard acts on it: a queue frozen
        // for a move stays frozen under whichever member leads next.
        self.replicated_all().await?;
        // A buffered write and two fsyncs: on the blocking pool, not the shard's thread.
        let (stored, dir) = (next.clone(), self.config().data_dir.clone());
        glommio::executor().spawn_blocking(move || stored.store(&dir)).await.map_err(|e| {
            let code = if ringmq_shards::is_no_space(&e) { Reason::StorageFull } else { Reason::StorageFailed };
            Failure(code, format!("storing metadata: {e}"))
        })?;
        for peer in (0..self.shards()).filter(|p| *p != self.id()) {
            self.mesh().apply_metadata(peer, next.clone()).await?;
        }
        self.apply_metadata(next).await.map_err(Failure::from)
    }

    /// Creates the storage queues this shard owns in `next` and sets their
    /// flush policies, makes `next` current, then deletes the storage of the
    /// topic queues `next` no longer has (deleted topics; also at start-up,
    /// after a crash between storing metadata and deleting).
    pub async fn apply_metadata(&self, next: Metadata) -> Result<(), StorageError> {
        let storage = self.storage();
        let existing: HashSet<QueueId> = storage.queues().into_iter().collect();
        let mut wanted = HashSet::new();
        let mut create = Vec::new();
        let mut configs = HashMap::new();
        let mut frozen = HashSet::new();
        for topic in next.topics.values() {
            for home in &topic.queues {
                let Some(slot) = home.stored().filter(|s| s.shard as usize == self.id()) else { continue };
                let q = QueueId(slot.storage_id);
                wanted.insert(q);
                if matches!(home, Home::Leaving { .. }) {
                    frozen.insert(q);
                }
                if !topic.configs.is_empty() {
                    configs.insert(slot.storage_id, topic.configs.clone());
                }
                if existing.contains(&q) {
                    storage.set_flush_policy(q, flush_policy(topic.flush))?;
                } else {
                    create.push((q, Some(flush_policy(topic.flush))));
                }
            }
        }
        storage.create_queues(&create).await?;
        storage.freeze_queues(frozen);
        // Topic queues have ids below `next_storage_id`; internal ones sit at the top of the range.
        let deleted: Vec<QueueId> =
            existing.into_iter().filter(|q| q.0 < next.next_storage_id && !wanted.contains(q)).collect();
        *self.metadata.borrow_mut() = Rc::new(next);
        *self.queue_configs.borrow_mut() = Rc::new(configs);
        storage.delete_queues(&deleted).await
    }
}

/// Refuses a topic that could not be created: a bad name or queue count.
fn check_new_topic(req: &NewTopic) -> Result<(), Failure> {
    if !metadata::valid_topic_name(&req.name) {
        return Err(Failure(
            Reason::InvalidTopic,
            format!("topic name {:?} must be 1-200 characters of A-Z a-z 0-9 . _ -", req.name),
        ));
    }
    if req.queues == 0 || req.queues > QUEUES_MAX {
        return Err(Failure::invalid(format!("a topic has 1..={QUEUES_MAX} queues, not {}", req.queues)));
    }
    Ok(())
}

/// Refuses a queue count that is not more than a topic's `now` (None: no such topic).
pub fn check_more_queues(name: &str, now: Option<usize>, queues: u32) -> Result<(), Failure> {
    let now = now.ok_or_else(|| Failure::unknown_topic(name))?;
    if queues as usize <= now {
        return Err(Failure::invalid(format!(
            "topic {name:?} has {now} queues: a new count must be more, not {queues}"
        )));
    }
    Ok(())
}

/// A flush policy as the metadata and the cluster's placement store it.
pub fn flush_code(policy: FlushPolicy) -> u8 {
    match policy {
        FlushPolicy::Sync => 0,
        FlushPolicy::Async => 1,
    }
}

/// The storage policy of a topic's flush code.
pub fn flush_policy(code: u8) -> FlushPolicy {
    if code == 1 {
        FlushPolicy::Async
    } else {
        FlushPolicy::Sync
    }
}
