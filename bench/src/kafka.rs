//! The Kafka-protocol load driver (`run --protocol kafka`): librdkafka
//! producers and consumers on the broker's Kafka listener, on the same
//! open-loop schedule, stamps and tallies as the native run, so the two
//! histograms compare directly. Producers send with acks=all (durable, as
//! the native async and sync modes) or acks=0 (one-way); consumers are
//! assigned their partitions from the end, as native consumers are.
//!
//! librdkafka's linger.ms delays every batch, where the native batcher sends
//! an idle queue's batch at once and lingers only behind one in flight; so
//! the driver sets linger.ms to 0 (librdkafka still batches what accumulates
//! while its requests are in flight; holding it to one request in flight per
//! connection, as the native batcher holds one per queue, measured 0.7x the
//! msgs/s and 4x the p99) and `--linger` is the native batcher's.
//!
//! The topic is created and described through Kafka's admin API, so the
//! driver needs no native listener: it drives any Kafka-compatible broker.
//! `--kafka-config KEY=VALUE` settings go over the driver's defaults.

use crate::run::{now_ns, on_ack, on_schedule, spawn_pinned, RunArgs, SendMode, Shared, Tally};
use crate::summary::KafkaBroker;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{BaseRecord, DeliveryResult, Producer as _, ProducerContext, ThreadedProducer};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{ClientContext, Offset, TopicPartitionList};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How long the admin API's calls (and the wait for a new topic's leaders) may take.
const ADMIN_TIMEOUT: Duration = Duration::from_secs(30);

/// What a delivery report answers for: the message's producer, sequence and intended time.
struct Sent {
    producer: u32,
    seq: u64,
    intended: u64,
}

/// Delivery reports, on librdkafka's poll thread.
struct Acks {
    shared: Arc<Shared>,
    in_flight: Arc<[AtomicU64]>,
}

impl ClientContext for Acks {}

impl ProducerContext for Acks {
    type DeliveryOpaque = Box<Sent>;

    fn delivery(&self, result: &DeliveryResult<'_>, sent: Box<Sent>) {
        if self.shared.args.mode != SendMode::Oneway {
            on_ack(&self.shared, sent.producer, sent.intended, sent.seq, result.is_ok());
        } else if result.is_err() {
            self.shared.errors.fetch_add(1, Ordering::Relaxed);
        }
        self.in_flight[sent.producer as usize].fetch_sub(1, Ordering::Relaxed);
    }
}

/// The run's producer: one librdkafka instance the producer threads share,
/// as native producers share one client; each thread's messages in flight
/// are counted apart (`--max-outstanding` bounds each).
pub(crate) struct Producer {
    inner: ThreadedProducer<Acks>,
    in_flight: Arc<[AtomicU64]>,
}

pub(crate) fn producer(s: &Arc<Shared>, bootstrap: &str) -> Result<Arc<Producer>, String> {
    let a = &s.args;
    let in_flight: Arc<[AtomicU64]> = (0..a.producers).map(|_| AtomicU64::new(0)).collect();
    let acks = if a.mode == SendMode::Oneway { "0" } else { "all" };
    let inner = settings(a, bootstrap, |c| {
        c.set("acks", acks)
            .set("linger.ms", "0")
            .set("batch.size", a.batch_bytes.to_string())
            // As the native client: no Nagle delay behind a request in flight.
            .set("socket.nagle.disable", "true")
            .set("enable.idempotence", "false")
            .set("compression.type", &a.kafka_compression);
    })
    .create_with_context(Acks { shared: s.clone(), in_flight: in_flight.clone() })
    .map_err(|e| format!("kafka producer: {e}"))?;
    Ok(Arc::new(Producer { inner, in_flight }))
}

/// Producer thread `id`: round-robin over the topic's `queues`, or by key
/// hash (librdkafka's partitioner) with --keys.
pub(crate) fn produce(s: &Arc<Shared>, p: &Producer, queues: u32, id: u32, start_ns: u64) {
    let (a, in_flight) = (&s.args, &p.in_flight[id as usize]);
    on_schedule(s, id, start_ns, in_flight, |seq, intended, payload, key| {
        in_flight.fetch_add(1, Ordering::Relaxed);
        let sent = Box::new(Sent { producer: id, seq, intended });
        let mut record = BaseRecord::with_opaque_to(&a.topic, sent).payload(payload);
        if let Some(key) = &key {
            record = record.key(key);
        } else {
            record = record.partition((seq % u64::from(queues)) as i32);
        }
        if let Err((error, _)) = p.inner.send(record) {
            tracing::warn!(%error, "kafka send refused");
            s.errors.fetch_add(1, Ordering::Relaxed);
            in_flight.fetch_sub(1, Ordering::Relaxed);
            return;
        }
        if a.mode == SendMode::Sync {
            let _ = p.inner.flush(Duration::from_secs(30));
        }
    });
    while in_flight.load(Ordering::Relaxed) > 0 {
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Consumers splitting the queues among themselves, each from the end.
pub(crate) fn consumers(
    s: &Arc<Shared>,
    bootstrap: &str,
    queues: u32,
    core: impl Fn(usize) -> core_affinity::CoreId,
) -> Result<Vec<std::thread::JoinHandle<()>>, String> {
    crate::run::subscribers(s)
        .map(|(subscription, i)| {
            let mine: Vec<u32> = (0..queues).filter(|q| *q as usize % s.args.consumers == i).collect();
            let consumer = consumer(&s.args, bootstrap, &mine, subscription)?;
            let s = s.clone();
            let name = format!("consumer-{subscription}-{i}");
            Ok(spawn_pinned(name, core(i), move || consume(&s, consumer, subscription)))
        })
        .collect()
}

/// A consumer of `partitions` for `subscription`, from their end, until the run stops it.
fn consumer(a: &RunArgs, bootstrap: &str, partitions: &[u32], subscription: usize) -> Result<BaseConsumer, String> {
    let topic = &a.topic;
    let consumer: BaseConsumer = settings(a, bootstrap, |c| {
        c.set("group.id", format!("ringmq-bench-{subscription}"))
            .set("enable.auto.commit", "false")
            .set("fetch.wait.max.ms", "100")
            .set("socket.nagle.disable", "true");
    })
    .create()
    .map_err(|e| format!("kafka consumer: {e}"))?;
    // From each partition's end as of now (looked up here, so no message
    // sent from the start is missed while librdkafka would look it up).
    let mut assignment = TopicPartitionList::new();
    for p in partitions {
        let (_, end) = consumer
            .fetch_watermarks(topic, *p as i32, Duration::from_secs(30))
            .map_err(|e| format!("kafka end offset of {topic}/{p}: {e}"))?;
        assignment.add_partition_offset(topic, *p as i32, Offset::Offset(end)).map_err(|e| e.to_string())?;
    }
    consumer.assign(&assignment).map_err(|e| format!("kafka assign: {e}"))?;
    Ok(consumer)
}

fn consume(s: &Shared, consumer: BaseConsumer, subscription: usize) {
    let mut tally = Tally::new(subscription);
    while !s.consumers_stop.load(Ordering::Relaxed) {
        match consumer.poll(Duration::from_millis(100)) {
            None => {}
            Some(Ok(m)) => tally.note(s, m.payload().unwrap_or_default(), now_ns(s.args.clock)),
            Some(Err(error)) => {
                tracing::warn!(%error, "kafka fetch failed");
                s.errors.fetch_add(1, Ordering::Relaxed);
            }
        }
        tally.merge_every(s, Duration::from_millis(200));
    }
    tally.merge_every(s, Duration::ZERO);
}

/// A librdkafka client's settings: `bootstrap`, the driver's `defaults`,
/// then the run's --kafka-config over them.
fn settings(a: &RunArgs, bootstrap: &str, defaults: impl FnOnce(&mut ClientConfig)) -> ClientConfig {
    let mut config = ClientConfig::new();
    config.set("bootstrap.servers", bootstrap);
    defaults(&mut config);
    for (key, value) in &a.kafka_config {
        config.set(key, value);
    }
    config
}

/// The run's topic on the Kafka listener `bootstrap`, through Kafka's admin
/// API (so any Kafka-compatible broker will do): created with --queues
/// partitions and --replication-factor unless it exists, then described;
/// its partition count (a topic that existed keeps its own), the broker as
/// its metadata describes it, and whether this call created the topic.
pub(crate) fn prepare_topic(a: &RunArgs, bootstrap: &str) -> Result<(u32, KafkaBroker, bool), String> {
    let admin: AdminClient<DefaultClientContext> =
        settings(a, bootstrap, |_| {}).create().map_err(|e| format!("kafka admin client: {e}"))?;
    let topic = NewTopic::new(&a.topic, a.queues as i32, TopicReplication::Fixed(a.replication_factor));
    let options = AdminOptions::new().operation_timeout(Some(ADMIN_TIMEOUT));
    let created = futures_lite::future::block_on(admin.create_topics([&topic], &options))
        .map_err(|e| format!("kafka CreateTopics {}: {e}", a.topic))?;
    let mut made = false;
    for result in created {
        match result {
            Ok(_) => made = true,
            Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
            Err((name, code)) => return Err(format!("kafka CreateTopics {name}: {code}")),
        }
    }
    // Described until the broker's metadata has every partition's leader (a new topic's take a moment).
    let describer = admin.inner();
    let deadline = std::time::Instant::now() + ADMIN_TIMEOUT;
    loop {
        let metadata = describer
            .fetch_metadata(Some(&a.topic), ADMIN_TIMEOUT)
            .map_err(|e| format!("kafka Metadata {}: {e}", a.topic))?;
        let described = metadata.topics().iter().find(|t| t.name() == a.topic);
        if let Some(t) = described.filter(|t| t.error().is_none() && !t.partitions().is_empty()) {
            if t.partitions().iter().all(|p| p.leader() >= 0 && p.error().is_none()) {
                let cluster_id = describer.fetch_cluster_id(ADMIN_TIMEOUT);
                let broker =
                    KafkaBroker { bootstrap: bootstrap.to_string(), cluster_id, brokers: metadata.brokers().len() };
                let partitions = t.partitions().len() as u32;
                eprintln!(
                    "kafka broker at {bootstrap}: cluster id {}, {} broker(s); topic {}: {partitions} partitions",
                    broker.cluster_id.as_deref().unwrap_or("(none given)"),
                    broker.brokers,
                    a.topic
                );
                return Ok((partitions, broker, made));
            }
        }
        if std::time::Instant::now() >= deadline {
            return Err(format!("kafka topic {} has no leader for every partition after {ADMIN_TIMEOUT:?}", a.topic));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Deletes the run's topic through Kafka's admin API (DeleteTopics).
pub(crate) fn delete_topic(a: &RunArgs, bootstrap: &str) -> Result<(), String> {
    let admin: AdminClient<DefaultClientContext> =
        settings(a, bootstrap, |_| {}).create().map_err(|e| format!("kafka admin client: {e}"))?;
    let options = AdminOptions::new().operation_timeout(Some(ADMIN_TIMEOUT));
    let deleted = futures_lite::future::block_on(admin.delete_topics(&[a.topic.as_str()], &options))
        .map_err(|e| format!("kafka DeleteTopics {}: {e}", a.topic))?;
    match deleted.into_iter().find_map(Result::err) {
        Some((name, code)) => Err(format!("kafka DeleteTopics {name}: {code}")),
        None => Ok(()),
    }
}
