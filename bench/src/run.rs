//! `ringmq-bench run`: open-loop producers and consumers against a broker
//! (or an embedded one), end-to-end and publish latency from each message's
//! intended send time, live progress, a final table, and optionally the
//! histograms and a summary written to a directory.

use crate::cpu::CpuTimes;
use crate::delayed;
use crate::histogram::{self, new_histogram, percentiles_us, Schedule, PERCENTILES};
use crate::payload::{Payload, Payloads};
use crate::rebalance::{Split, Window};
use crate::summary::{KafkaBroker, Summary};
use clap::{Args, ValueEnum};
use hdrhistogram::Histogram;
use ringmq::client::{
    Client, ClientConfig, Consumer, GroupConfig, Message, Producer, ProducerConfig, QueueSelector, StartFrom, StartNew,
};
pub use ringmq::duration::parse_duration;
use ringmq::server::{self, ServerConfig};
use rustix::thread::CpuSet;
use rustix::time::ClockId;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Bytes at the start of every payload: intended send time, producer, sequence.
pub const STAMP_BYTES: usize = 20;

/// Workload and placement of a run.
#[derive(Args, Debug, Clone)]
pub struct RunArgs {
    /// A workload file (TOML, like bench/workloads/*.toml): its keys replace the flags of the
    /// same names (queues, message size, producers, rate, consumers, durations...).
    #[arg(long)]
    pub workload: Option<PathBuf>,
    /// Start a broker in this process on a temporary directory (removed at the end).
    #[arg(long, conflicts_with = "broker")]
    pub embedded: bool,
    /// Address of a running broker's shard.
    #[arg(long)]
    pub broker: Option<String>,
    /// Embedded broker's CPUs [default: the last CPU].
    #[arg(long, value_delimiter = ',')]
    pub broker_cores: Option<Vec<usize>>,
    /// CPUs for the producer and consumer threads, and for the client library's
    /// connection, ack and linger threads [default: the others].
    #[arg(long, value_delimiter = ',')]
    pub client_cores: Option<Vec<usize>>,
    #[arg(long, default_value = "bench")]
    pub topic: String,
    /// Deletes the topic when the run ends if the run created it (through Kafka's DeleteTopics
    /// with --protocol kafka); a topic that existed before the run is kept.
    #[arg(long)]
    pub delete_topic: bool,
    /// Queues of the topic (created if missing).
    #[arg(long, default_value_t = 8)]
    pub queues: u32,
    #[arg(long, default_value_t = 2)]
    pub producers: usize,
    /// Consumer threads that split the queues among themselves (per subscription).
    #[arg(long, default_value_t = 2)]
    pub consumers: usize,
    /// Subscriptions: every queue is read by this many consumers, each receiving every message
    /// (OpenMessaging Benchmark's subscriptions per topic); `--consumers` threads serve each.
    #[arg(long, default_value_t = 1, conflicts_with = "group", value_parser = clap::value_parser!(u64).range(1..))]
    pub consumers_per_queue: u64,
    /// Bytes per message (at least 20: the timestamp stamp).
    #[arg(long, default_value_t = 1024)]
    pub message_size: usize,
    /// What messages carry after the stamp: filler bytes, or JSON-like text (compressible as logs are).
    #[arg(long, value_enum, default_value_t = Payload::Filler)]
    pub payload: Payload,
    /// With --protocol kafka: the producer's compression.type (none, gzip, snappy, lz4, zstd).
    #[arg(long, default_value = "none")]
    pub kafka_compression: String,
    /// Messages per second over all producers, on an open-loop schedule; 0: as fast as possible.
    #[arg(long, default_value_t = 10_000.0)]
    pub rate: f64,
    /// Measured time, e.g. 30s, 500ms, 2m.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub duration: Duration,
    /// Time before measuring, e.g. 5s.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub warmup: Duration,
    /// async (batched, durable acks), sync (one at a time, durable acks), oneway (no acks).
    #[arg(long, value_enum, default_value_t = SendMode::Async)]
    pub mode: SendMode,
    /// Client batching: bytes per batch.
    #[arg(long, default_value_t = 64 << 10)]
    pub batch_bytes: usize,
    /// Client batching: longest wait to fill a batch behind one in flight, e.g. 1ms (native only).
    #[arg(long, default_value = "1ms", value_parser = parse_duration)]
    pub linger: Duration,
    /// Client batching: batches of one queue in flight at once (more: shorter waits, smaller batches).
    #[arg(long, default_value_t = 1)]
    pub max_in_flight: usize,
    /// Messages (not batches) a producer may have sent and not seen acknowledged; at the bound
    /// it waits, and its next messages' latency counts the wait (the same bound OpenMessaging
    /// Benchmark's producers and the peers' tools are set to). Sync mode has one; oneway none.
    #[arg(long, default_value_t = 20_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_outstanding: u64,
    /// Distinct keys (messages go to queues by key hash); 0: no keys, round-robin.
    #[arg(long, default_value_t = 0)]
    pub keys: u64,
    /// Clock of the send stamps: monotonic (one host) or realtime (several hosts; needs synced clocks).
    #[arg(long, value_enum, default_value_t = Clock::Monotonic)]
    pub clock: Clock,
    /// Write e2e.hgrm, publish.hgrm, send_delay.hgrm and summary.json here.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Longest wait for consumers to catch up after the producers stop.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub drain_timeout: Duration,
    /// Consumers join this consumer group (queues by rebalance, offsets auto-committed each second)
    /// instead of splitting the queues among themselves.
    #[arg(long)]
    pub group: Option<String>,
    /// With --group: consumer 0 leaves and rejoins this long into the measured time, e.g. 15s;
    /// end-to-end latency is then also reported for the rebalance and outside it.
    #[arg(long, requires = "group", value_parser = parse_duration)]
    pub restart_member_at: Option<Duration>,
    /// Before the run, store this many delayed messages (due in an hour) on one queue of TOPIC-delayed.
    #[arg(long, default_value_t = 0)]
    pub delayed_pending: u64,
    /// During the run, send this many delayed messages a second (due 1 s later) to TOPIC-probe and
    /// report how late they become visible.
    #[arg(long, default_value_t = 0.0)]
    pub delayed_probe_rate: f64,
    /// native (ringmq's SDK) or kafka (librdkafka on the broker's Kafka listener; needs the
    /// `kafka` feature): the same workload, schedule and histograms either way.
    #[arg(long, value_enum, default_value_t = Protocol::Native)]
    pub protocol: Protocol,
    /// With --protocol kafka: the Kafka listener to drive (host:port, or a comma-separated list);
    /// any Kafka-compatible broker: the topic is created and described through Kafka's admin API.
    #[arg(long)]
    pub kafka_broker: Option<String>,
    /// With --protocol kafka: a librdkafka setting for the producer and the consumers, e.g.
    /// acks=1, linger.ms=5, enable.idempotence=true, security.protocol=SASL_SSL (repeatable; over
    /// the driver's own defaults); recorded in summary.json.
    #[arg(long = "kafka-config", value_name = "KEY=VALUE", value_parser = key_value)]
    pub kafka_config: Vec<(String, String)>,
    /// With --protocol kafka: the replication factor of a topic the run creates (-1: the broker's
    /// default).
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    pub replication_factor: i32,
    /// Names the broker in summary.json and in `compare`'s table and legend, e.g. "Kafka 3.9"
    /// [default: ringmq native, ringmq Kafka listener, or the Kafka cluster's id].
    #[arg(long)]
    pub label: Option<String>,
    /// Says when the broker acknowledged a send, for summary.json and `compare`'s legend, e.g.
    /// "acks=all, fsync per batch" [default: from --mode, or the Kafka producer's acks].
    #[arg(long)]
    pub durability: Option<String>,
    /// With --broker: connect with TLS, trusting this CA (PEM) for the broker's certificate.
    #[arg(long, requires = "broker")]
    pub tls_ca: Option<PathBuf>,
    /// Producers sleep until this long before each send time, then yield the CPU in a loop until it
    /// comes: a sleep alone wakes 50-100 us late (timer slack, VM exits), and every message's latency
    /// counts from its send time; 0: sleep only.
    #[arg(long, default_value = "100us", value_parser = parse_duration)]
    pub spin_before_send: Duration,
}

/// How producers send.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SendMode {
    Async,
    Sync,
    Oneway,
}

/// Which protocol the load generator speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Protocol {
    Native,
    Kafka,
}

/// Which clock stamps messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Clock {
    Monotonic,
    Realtime,
}

/// Nanoseconds on the chosen clock.
pub fn now_ns(clock: Clock) -> u64 {
    let id = if clock == Clock::Monotonic { ClockId::Monotonic } else { ClockId::Realtime };
    let ts = rustix::time::clock_gettime(id);
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// What a run measured.
pub struct Outcome {
    pub summary: Summary,
    pub e2e: Histogram<u64>,
    pub publish: Histogram<u64>,
    /// Send delay: how late producers handed messages to the client library
    /// (send call time - intended time): the load generator's own lag, part
    /// of both latencies above (the OpenMessaging Benchmark's publish delay).
    pub send_delay: Histogram<u64>,
    /// End-to-end latency during a member restart's rebalance and outside it.
    pub rebalance: Option<Split>,
    /// Delayed messages pending during the run, and the probes' lateness (µs).
    pub delayed: Option<(u64, Histogram<u64>)>,
}

/// Per-producer sets of sequence numbers (acked, received).
#[derive(Default)]
struct Seen {
    bits: Vec<u64>,
}

impl Seen {
    /// Marks `seq`; false if it was already marked.
    fn mark(&mut self, seq: u64) -> bool {
        let (word, bit) = ((seq / 64) as usize, seq % 64);
        if word >= self.bits.len() {
            self.bits.resize(word + 1, 0);
        }
        let fresh = self.bits[word] & (1 << bit) == 0;
        self.bits[word] |= 1 << bit;
        fresh
    }

    /// Marked here and not in `other`.
    fn missing_from(&self, other: &Seen) -> u64 {
        self.bits
            .iter()
            .enumerate()
            .map(|(i, w)| (w & !other.bits.get(i).copied().unwrap_or(0)).count_ones() as u64)
            .sum()
    }
}

/// State shared by the run's threads.
pub(crate) struct Shared {
    pub(crate) args: RunArgs,
    pub(crate) measure_from_ns: u64,
    pub(crate) end_ns: u64,
    pub(crate) sent: AtomicU64,
    acked: AtomicU64,
    received: AtomicU64,
    duplicates: AtomicU64,
    pub(crate) errors: AtomicU64,
    pub(crate) consumers_stop: AtomicBool,
    /// Each producer's acknowledged messages: its acks come on its own
    /// thread, so these locks are not contended.
    acks: Vec<Mutex<Acks>>,
    /// What each subscription received of each producer's messages (see `received_set`).
    received_sets: Vec<Mutex<Seen>>,
    pub(crate) e2e: Mutex<Histogram<u64>>,
    pub(crate) send_delay: Mutex<Histogram<u64>>,
    /// Per-second latencies, when a group member restarts.
    window: Option<Window>,
    /// The most messages any producer had outstanding right after a send.
    outstanding_seen: AtomicU64,
}

impl Shared {
    /// What `subscription` received of `producer`'s messages.
    fn received_set(&self, subscription: usize, producer: usize) -> Option<&Mutex<Seen>> {
        self.received_sets.get(subscription * self.args.producers + producer)
    }
}

/// One producer's acknowledged messages and their publish latencies.
struct Acks {
    seen: Seen,
    publish: Histogram<u64>,
}

/// Runs the workload and reports; Err if the run could not be done at all.
pub fn run(args: RunArgs) -> Result<Outcome, String> {
    let args = match &args.workload {
        Some(path) => crate::workload::Workload::load(path)?.apply(args)?,
        None => args,
    };
    if args.message_size < STAMP_BYTES {
        return Err(format!("--message-size must be at least {STAMP_BYTES} bytes (the send stamp)"));
    }
    if args.clock == Clock::Realtime {
        eprintln!("warning: --clock realtime: end-to-end latency is only as good as the clock sync between hosts");
    }
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let broker_cores = args.broker_cores.clone().unwrap_or_else(|| vec![cpus - 1]);
    let client_cores = args.client_cores.clone().unwrap_or_else(|| {
        let others: Vec<usize> = (0..cpus).filter(|c| !broker_cores.contains(c)).collect();
        if others.is_empty() {
            vec![0]
        } else {
            others
        }
    });
    let kafka = args.protocol == Protocol::Kafka;
    if kafka && (args.group.is_some() || args.delayed_pending > 0 || args.delayed_probe_rate > 0.0) {
        return Err("--protocol kafka runs plain produce and consume (no --group or delayed messages)".into());
    }
    if kafka && args.tls_ca.is_some() {
        return Err("--tls-ca drives the native protocol over TLS; the Kafka driver speaks in the clear".into());
    }
    let embedded = if args.embedded { Some(Embedded::start(&broker_cores, kafka)?) } else { None };
    let addr = match (&embedded, &args.broker) {
        (Some(e), _) => Some(e.addr.clone()),
        (None, Some(b)) => Some(b.clone()),
        (None, None) if kafka && args.kafka_broker.is_some() => None,
        (None, None) if kafka => return Err("--protocol kafka needs --embedded or --kafka-broker HOST:PORT".into()),
        (None, None) => return Err("pass --embedded or --broker ADDR".into()),
    };
    let kafka_addr = match (&embedded, &args.kafka_broker) {
        _ if !kafka => None,
        (Some(e), _) => e.kafka.clone(),
        (None, Some(k)) => Some(k.clone()),
        (None, None) => return Err("--protocol kafka with --broker needs --kafka-broker ADDR".into()),
    };
    let result = drive(args, addr.as_deref(), kafka_addr.as_deref(), &client_cores);
    if let Some(e) = embedded {
        e.stop();
    }
    result
}

/// A `KEY=VALUE` argument.
fn key_value(s: &str) -> Result<(String, String), String> {
    s.split_once('=').map(|(k, v)| (k.to_string(), v.to_string())).ok_or_else(|| format!("{s:?} is not KEY=VALUE"))
}

/// The SDK's settings for `addr`: TLS when --tls-ca is given.
fn client_config(args: &RunArgs, addr: &str) -> Result<ClientConfig, String> {
    let mut config = ClientConfig::new(addr);
    if let Some(ca) = &args.tls_ca {
        let files = ringmq::security::tls::ClientFiles { ca: Some(ca.clone()), cert: None, key: None };
        config.tls = Some(ringmq::security::tls::ClientTls::load(&files).map_err(|e| format!("--tls-ca: {e}"))?);
    }
    Ok(config)
}

/// `addr`: the native listener (a native run's); `kafka`: the Kafka
/// listener to drive instead, with no native connection at all.
fn drive(args: RunArgs, addr: Option<&str>, kafka: Option<&str>, client_cores: &[usize]) -> Result<Outcome, String> {
    // The client library's threads (connections, acks, linger) start from
    // this thread and inherit its CPUs: unconfined, they ran on the broker's
    // core (0.35 s of every 10 s at 150k msgs/s, by perf sched).
    confine_to(client_cores);
    match kafka {
        // Set up through Kafka's admin API: any Kafka-compatible broker.
        Some(bootstrap) => {
            let (queues, broker, created) = crate::kafka::prepare_topic(&args, bootstrap)?;
            let delete = (created && args.delete_topic).then(|| args.clone());
            let outcome = drive_with(args, None, queues, Some((bootstrap, broker)), client_cores);
            if let Some(a) = delete {
                report_deletion(&a.topic, crate::kafka::delete_topic(&a, bootstrap));
            }
            outcome
        }
        None => {
            let config = client_config(&args, addr.expect("a native run has the native listener"))?;
            let client = Client::connect(config.clone()).map_err(|e| e.to_string())?;
            let created = client.topic(&args.topic).is_err();
            if created {
                client.create_topic(&args.topic, args.queues, 0).map_err(|e| e.to_string())?;
            }
            let delete = (created && args.delete_topic).then(|| (client.clone(), args.topic.clone()));
            let queues = client.topic(&args.topic).map_err(|e| e.to_string())?.queue_shards.len() as u32;
            // Consumers have their own connection, as a separate consumer process
            // would; producers share one: a connection per producer cost tail latency
            // at moderate rates. (Consumers once starved on the producers' connection
            // at overload; the broker now gives produces and fetches separate
            // in-flight budgets per connection.)
            let consumer_client = Client::connect(config).map_err(|e| e.to_string())?;
            let outcome = drive_with(args, Some((client, consumer_client)), queues, None, client_cores);
            if let Some((client, topic)) = delete {
                report_deletion(&topic, client.delete_topic(&topic).map_err(|e| e.to_string()));
            }
            outcome
        }
    }
}

/// Says whether `--delete-topic` deleted the topic the run made. A failed
/// deletion leaves the topic, not the run's results, behind.
fn report_deletion(topic: &str, deleted: Result<(), String>) {
    match deleted {
        Ok(()) => eprintln!("deleted topic {topic} (the run created it)"),
        Err(e) => eprintln!("topic {topic} was not deleted: {e}"),
    }
}

/// The run on `queues` queues, over `native` (the producers' client and
/// the consumers') or the Kafka listener `kafka` (and the broker it reached).
fn drive_with(
    args: RunArgs,
    native: Option<(Arc<Client>, Arc<Client>)>,
    queues: u32,
    kafka: Option<(&str, KafkaBroker)>,
    client_cores: &[usize],
) -> Result<Outcome, String> {
    let (kafka, kafka_broker) = kafka.unzip();
    let (client, consumer_client) = native.unzip();
    let native_only = |what: &str| format!("{what} needs the native protocol");
    if args.delayed_pending > 0 {
        let client = client.as_ref().ok_or_else(|| native_only("--delayed-pending"))?;
        let topic = format!("{}-delayed", args.topic);
        delayed::load_pending(client, &topic, args.delayed_pending, Duration::from_secs(3600))?;
    }
    let probe = match args.delayed_probe_rate > 0.0 {
        true => {
            let client = client.as_ref().ok_or_else(|| native_only("--delayed-probe-rate"))?;
            Some(delayed::Probe::start(client, &format!("{}-probe", args.topic), args.delayed_probe_rate)?)
        }
        false => None,
    };
    let core = |i: usize| core_affinity::CoreId { id: client_cores[i % client_cores.len()] };
    let group = match &args.group {
        Some(name) => {
            let consumer_client = consumer_client.as_ref().ok_or_else(|| native_only("--group"))?;
            Some(GroupConsumers::join(&args, name, consumer_client, queues, core)?)
        }
        None => None,
    };
    let start_ns = now_ns(args.clock) + 500_000_000;
    let measure_from_ns = start_ns + args.warmup.as_nanos() as u64;
    let shared = Arc::new(Shared {
        measure_from_ns,
        end_ns: measure_from_ns + args.duration.as_nanos() as u64,
        sent: AtomicU64::new(0),
        acked: AtomicU64::new(0),
        received: AtomicU64::new(0),
        duplicates: AtomicU64::new(0),
        errors: AtomicU64::new(0),
        consumers_stop: AtomicBool::new(false),
        acks: (0..args.producers)
            .map(|_| Mutex::new(Acks { seen: Seen::default(), publish: new_histogram() }))
            .collect(),
        received_sets: (0..args.producers * args.consumers_per_queue as usize).map(|_| Mutex::default()).collect(),
        e2e: Mutex::new(new_histogram()),
        send_delay: Mutex::new(new_histogram()),
        window: args.restart_member_at.map(|_| Window::new(start_ns)),
        outstanding_seen: AtomicU64::new(0),
        args,
    });
    let kafka_producer = kafka.map(|bootstrap| crate::kafka::producer(&shared, bootstrap)).transpose()?;
    let consumers: Vec<_> = match (group, kafka) {
        (Some(g), _) => g.go(&shared),
        (None, Some(bootstrap)) => crate::kafka::consumers(&shared, bootstrap, queues, core)?,
        (None, None) => subscribers(&shared)
            .map(|(subscription, i)| {
                let s = shared.clone();
                let c = consumer_client.clone().expect("a native run has the consumers' client");
                let mine: Vec<u32> = (0..queues).filter(|q| *q as usize % s.args.consumers == i).collect();
                let cpu = core(i);
                let mut consumer = Consumer::new(c, None);
                consumer.assign(&s.args.topic, &mine, StartFrom::Latest).map_err(|e| e.to_string())?;
                let name = format!("consumer-{subscription}-{i}");
                Ok(spawn_pinned(name, cpu, move || consume(&s, consumer, subscription, None)))
            })
            .collect::<Result<_, String>>()?,
    };
    let producers: Vec<_> = (0..shared.args.producers)
        .map(|i| {
            let (s, c, cpu) = (shared.clone(), client.clone(), core(i + shared.args.consumers));
            let kafka = kafka_producer.clone();
            spawn_pinned(format!("producer-{i}"), cpu, move || match (kafka, c) {
                (Some(k), _) => crate::kafka::produce(&s, &k, queues, i as u32, start_ns),
                (None, Some(c)) => produce(&s, c, i as u32, start_ns),
                (None, None) => unreachable!("a run has the native client or a Kafka producer"),
            })
        })
        .collect();
    let wall = Instant::now();
    let cpu = progress(&shared, || producers.iter().all(|p| p.is_finished()));
    for p in producers {
        p.join().map_err(|_| "a producer thread panicked".to_string())?;
    }
    let drain = Instant::now();
    let copies = shared.args.consumers_per_queue;
    while shared.received.load(Ordering::Relaxed) < shared.acked.load(Ordering::Relaxed) * copies
        && drain.elapsed() < shared.args.drain_timeout
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    // One-way messages are not acked: give them a moment to arrive too.
    std::thread::sleep(Duration::from_millis(300));
    shared.consumers_stop.store(true, Ordering::Relaxed);
    for c in consumers {
        c.join().map_err(|_| "a consumer thread panicked".to_string())?;
    }
    tracing::debug!(seconds = wall.elapsed().as_secs_f64(), "run finished");
    let mut o = outcome(&shared);
    o.summary.broker = broker_name(&shared.args, kafka_broker.as_ref());
    o.summary.durability = durability(&shared.args);
    o.summary.kafka_broker = kafka_broker;
    o.delayed = probe.map(|p| (shared.args.delayed_pending, p.finish()));
    if let Some(((from, sent_from), (to, sent_to))) = cpu {
        o.summary.cpu_us_per_msg = Some(to.since(from).per_message(sent_to - sent_from));
    }
    Ok(o)
}

/// The broker a run drove, as summary.json and `compare` name it: `--label`,
/// else ringmq's native or embedded Kafka listener, else the Kafka cluster's
/// id (or where it was reached, when it gives none).
fn broker_name(args: &RunArgs, kafka: Option<&KafkaBroker>) -> String {
    match (&args.label, kafka) {
        (Some(label), _) => label.clone(),
        (None, None) => "ringmq native".into(),
        (None, Some(_)) if args.embedded => "ringmq Kafka listener".into(),
        (None, Some(k)) => k
            .cluster_id
            .as_ref()
            .map_or_else(|| format!("Kafka at {}", k.bootstrap), |id| format!("Kafka cluster {id}")),
    }
}

/// When the run's sends were acknowledged: `--durability`, else the native
/// send mode (async and sync acks come once the broker holds a message
/// durably) or the Kafka producer's acks, as --kafka-config left them
/// (whether acks=all means on disk is the broker's setting: Kafka's default
/// leaves the flush to the page cache).
fn durability(args: &RunArgs) -> String {
    if let Some(durability) = &args.durability {
        return durability.clone();
    }
    let oneway = args.mode == SendMode::Oneway;
    match args.protocol {
        Protocol::Native if oneway => "one-way, no acks".into(),
        Protocol::Native => {
            format!("durable acks, {} sends", if args.mode == SendMode::Sync { "sync" } else { "async" })
        }
        Protocol::Kafka => {
            let setting = |key: &str| args.kafka_config.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v.as_str());
            let acks = setting("acks").unwrap_or(if oneway { "0" } else { "all" });
            let idempotent = setting("enable.idempotence") == Some("true");
            format!("acks={acks}{}", if idempotent { ", idempotent" } else { "" })
        }
    }
}

/// (subscription, consumer) of every consumer thread to start.
pub(crate) fn subscribers(s: &Shared) -> impl Iterator<Item = (usize, usize)> {
    let consumers = s.args.consumers;
    (0..s.args.consumers_per_queue as usize).flat_map(move |k| (0..consumers).map(move |i| (k, i)))
}

fn outcome(s: &Shared) -> Outcome {
    // Each subscription must receive every acknowledged message.
    let lost = (0..s.args.consumers_per_queue as usize)
        .flat_map(|subscription| (0..s.args.producers).map(move |producer| (subscription, producer)))
        .map(|(subscription, producer)| {
            let received = s.received_set(subscription, producer).expect("a set for every pair").lock().expect("lock");
            s.acks[producer].lock().expect("lock").seen.missing_from(&received)
        })
        .sum();
    let e2e = s.e2e.lock().expect("lock").clone();
    let summary = Summary {
        measured: e2e.len(),
        seconds: s.args.duration.as_secs_f64(),
        message_size: s.args.message_size,
        sent: s.sent.load(Ordering::Relaxed),
        acked: s.acked.load(Ordering::Relaxed),
        received: s.received.load(Ordering::Relaxed),
        lost,
        duplicates: s.duplicates.load(Ordering::Relaxed),
        errors: s.errors.load(Ordering::Relaxed),
        max_outstanding: s.args.max_outstanding,
        outstanding_seen: s.outstanding_seen.load(Ordering::Relaxed),
        consumers_per_queue: s.args.consumers_per_queue,
        cpu_us_per_msg: None,
        protocol: s.args.protocol.to_possible_value().map_or_else(String::new, |v| v.get_name().to_string()),
        kafka_config: s.args.kafka_config.clone(),
        kafka_broker: None,
        broker: String::new(),
        durability: String::new(),
    };
    let rebalance = s.window.as_ref().and_then(|w| w.split(s.measure_from_ns));
    Outcome {
        summary,
        e2e,
        publish: s.acks.iter().fold(new_histogram(), |mut all, a| {
            all.add(&a.lock().expect("lock").publish).expect("histograms of the same bounds");
            all
        }),
        send_delay: s.send_delay.lock().expect("lock").clone(),
        rebalance,
        delayed: None,
    }
}

/// One producer: sends on the open-loop schedule until the end time.
fn produce(s: &Arc<Shared>, client: Arc<Client>, id: u32, start_ns: u64) {
    let a = &s.args;
    let selector = if a.keys > 0 { QueueSelector::KeyHash } else { QueueSelector::RoundRobin };
    let producer = Producer::new(
        client,
        ProducerConfig {
            selector,
            batch_bytes: a.batch_bytes,
            linger: a.linger,
            max_in_flight_per_queue: a.max_in_flight,
            fault_avoidance: false,
        },
    );
    let in_flight = Arc::new(AtomicU64::new(0));
    // One message, refilled for each send: the producer encodes it before send_with_callback returns.
    let mut m = Message::default();
    on_schedule(s, id, start_ns, &in_flight, |seq, intended, payload, key| {
        let value = m.value.get_or_insert_default();
        value.clear();
        value.extend_from_slice(payload);
        m.key = key;
        match s.args.mode {
            SendMode::Async => {
                in_flight.fetch_add(1, Ordering::Relaxed);
                let (acks, in_flight) = (s.clone(), in_flight.clone());
                producer.send_with_callback(&s.args.topic, &m, move |result| {
                    on_ack(&acks, id, intended, seq, result.is_ok());
                    in_flight.fetch_sub(1, Ordering::Relaxed);
                });
            }
            SendMode::Sync => {
                let ok = producer.send(&s.args.topic, &m).is_ok();
                on_ack(s, id, intended, seq, ok);
            }
            SendMode::Oneway => {
                if producer.send_oneway(&s.args.topic, &m).is_err() {
                    s.errors.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    });
    drop(producer);
    while in_flight.load(Ordering::Relaxed) > 0 {
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// The open-loop schedule of producer `id`: at each message's intended time
/// (held back while `in_flight` is at its bound), stamps the payload with
/// the time, producer and sequence, counts it sent and hands it to `send`
/// (sequence, intended time, payload, key), until the end time.
pub(crate) fn on_schedule(
    s: &Shared,
    id: u32,
    start_ns: u64,
    in_flight: &AtomicU64,
    mut send: impl FnMut(u64, u64, &[u8], Option<Vec<u8>>),
) {
    let a = &s.args;
    let schedule = Schedule::new(start_ns, a.rate / a.producers as f64);
    let mut payloads = Payloads::new(a.payload, a.message_size);
    let mut send_delay = new_histogram();
    for seq in 0u64.. {
        let intended = if schedule.interval_ns == 0 { now_ns(a.clock) } else { schedule.intended(seq) };
        if intended >= s.end_ns {
            break;
        }
        wait_until(a.clock, intended, a.spin_before_send);
        // Only this thread adds to `in_flight` (acks take away): past this wait a send keeps it within the bound.
        while in_flight.load(Ordering::Relaxed) >= a.max_outstanding {
            std::thread::sleep(Duration::from_micros(50));
        }
        let payload = payloads.for_seq(seq);
        payload[0..8].copy_from_slice(&intended.to_le_bytes());
        payload[8..12].copy_from_slice(&id.to_le_bytes());
        payload[12..20].copy_from_slice(&seq.to_le_bytes());
        let key = (a.keys > 0)
            .then(|| format!("key-{}", (seq.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 20) % a.keys).into_bytes());
        s.sent.fetch_add(1, Ordering::Relaxed);
        if intended >= s.measure_from_ns {
            histogram::record(&mut send_delay, intended, now_ns(a.clock));
        }
        send(seq, intended, payload, key);
        s.outstanding_seen.fetch_max(in_flight.load(Ordering::Relaxed), Ordering::Relaxed);
    }
    s.send_delay.lock().expect("lock").add(&send_delay).expect("histograms of the same bounds");
}

pub(crate) fn on_ack(s: &Shared, producer: u32, intended: u64, seq: u64, ok: bool) {
    if !ok {
        s.errors.fetch_add(1, Ordering::Relaxed);
        return;
    }
    let done = now_ns(s.args.clock);
    s.acked.fetch_add(1, Ordering::Relaxed);
    let mut acks = s.acks[producer as usize].lock().expect("lock");
    acks.seen.mark(seq);
    if intended >= s.measure_from_ns {
        histogram::record(&mut acks.publish, intended, done);
    }
}

/// Sleeps until `spin` before `t_ns`, then yields the CPU until `t_ns`: a
/// sleep overshoots by the timer slack, and the yields let the consumers and
/// the client's I/O threads that share the CPU run first (measured at 175k
/// msgs/s with 100 us, 3 alternating runs: e2e p50 0.93/0.85/0.84 ms against
/// 0.98/1.18/0.94 sleeping only).
fn wait_until(clock: Clock, t_ns: u64, spin: Duration) {
    let spin = spin.as_nanos() as u64;
    loop {
        let now = now_ns(clock);
        if now >= t_ns {
            return;
        }
        if t_ns - now > spin {
            std::thread::sleep(Duration::from_nanos(t_ns - now - spin));
        } else {
            std::thread::yield_now();
        }
    }
}

/// One consumer: polls its queues, records end-to-end latency, tracks every message.
/// Makes a group consumer again (a member restart).
type Remake = Box<dyn Fn() -> Consumer + Send>;

fn consume(s: &Shared, mut consumer: Consumer, subscription: usize, restart: Option<Remake>) {
    let mut tally = Tally::new(subscription);
    let restart_ns = s.args.restart_member_at.map(|at| s.measure_from_ns + at.as_nanos() as u64);
    let mut restarted = false;
    while !s.consumers_stop.load(Ordering::Relaxed) {
        if let (Some(make), Some(at), Some(w)) = (&restart, restart_ns, &s.window) {
            if !restarted && now_ns(s.args.clock) >= at {
                w.restarted(now_ns(s.args.clock));
                drop(consumer); // leaves the group
                consumer = make();
                restarted = true;
            }
        }
        let messages = match consumer.poll(Duration::from_millis(100)) {
            Ok(m) => m,
            Err(error) => {
                tracing::warn!(%error, "fetch failed");
                s.errors.fetch_add(1, Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(100));
                continue;
            }
        };
        let now = now_ns(s.args.clock);
        tally.latencies.clear();
        for m in &messages {
            tally.note(s, m.value_or_empty(), now);
        }
        if let Some(w) = &s.window {
            w.record(now, &tally.latencies);
            if restarted && !messages.is_empty() {
                w.back(now);
            }
        }
        tally.merge_every(s, Duration::from_millis(200));
    }
    tally.merge_every(s, Duration::ZERO);
}

/// A consumer's count of what it received: each message marked against its
/// producer's sequence (a second copy is a duplicate), and the end-to-end
/// latency of the measured ones, merged into the run's histogram now and then.
pub(crate) struct Tally {
    /// Which subscription's copy of each message this consumer receives.
    subscription: usize,
    local: Histogram<u64>,
    last_merge: Instant,
    /// This poll's measured latencies (ns).
    latencies: Vec<u64>,
}

impl Tally {
    pub(crate) fn new(subscription: usize) -> Tally {
        Tally { subscription, local: new_histogram(), last_merge: Instant::now(), latencies: Vec::new() }
    }

    /// A received payload, at `now`.
    pub(crate) fn note(&mut self, s: &Shared, value: &[u8], now: u64) {
        if value.len() < STAMP_BYTES {
            return;
        }
        let intended = u64::from_le_bytes(value[0..8].try_into().expect("8 bytes"));
        let producer = u32::from_le_bytes(value[8..12].try_into().expect("4 bytes")) as usize;
        let seq = u64::from_le_bytes(value[12..20].try_into().expect("8 bytes"));
        if producer >= s.args.producers {
            return;
        }
        let Some(set) = s.received_set(self.subscription, producer) else { return };
        if !set.lock().expect("lock").mark(seq) {
            s.duplicates.fetch_add(1, Ordering::Relaxed);
            return;
        }
        s.received.fetch_add(1, Ordering::Relaxed);
        if intended >= s.measure_from_ns && intended < s.end_ns {
            histogram::record(&mut self.local, intended, now);
            // Only a member restart's window looks at each latency.
            if s.window.is_some() {
                self.latencies.push(now.saturating_sub(intended));
            }
        }
    }

    /// Merges into the run's histogram if `every` passed since the last merge.
    pub(crate) fn merge_every(&mut self, s: &Shared, every: Duration) {
        if self.last_merge.elapsed() >= every {
            s.e2e.lock().expect("lock").add(&self.local).expect("same bounds");
            self.local.reset();
            self.last_merge = Instant::now();
        }
    }
}

/// Group consumers that joined before the producers start: each thread
/// polls until the group gave out every queue, then waits for the run.
struct GroupConsumers {
    go: Vec<mpsc::Sender<Arc<Shared>>>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl GroupConsumers {
    fn join(
        args: &RunArgs,
        group: &str,
        client: &Arc<Client>,
        queues: u32,
        core: impl Fn(usize) -> core_affinity::CoreId,
    ) -> Result<GroupConsumers, String> {
        let assigned: Arc<Vec<AtomicUsize>> = Arc::new((0..args.consumers).map(|_| AtomicUsize::new(0)).collect());
        let (mut go, mut threads) = (Vec::new(), Vec::new());
        for i in 0..args.consumers {
            let config = GroupConfig {
                start_new: StartNew::Latest,
                auto_commit: Some(Duration::from_secs(1)),
                client_id: format!("bench-{i}"),
                ..GroupConfig::new(group, &[&args.topic])
            };
            let (tx, rx) = mpsc::channel::<Arc<Shared>>();
            let (client, assigned, cpu) = (client.clone(), assigned.clone(), core(i));
            threads.push(spawn_pinned(format!("consumer-{i}"), cpu, move || {
                let make = move || Consumer::subscribe(client.clone(), config.clone());
                let mut consumer = make();
                let shared = loop {
                    if let Err(error) = consumer.poll(Duration::from_millis(100)) {
                        tracing::warn!(%error, "joining the group");
                    }
                    assigned[i].store(consumer.positions().len(), Ordering::Relaxed);
                    match rx.try_recv() {
                        Ok(shared) => break shared,
                        Err(mpsc::TryRecvError::Empty) => {}
                        Err(mpsc::TryRecvError::Disconnected) => return,
                    }
                };
                let restart: Option<Remake> = (i == 0).then(|| Box::new(make) as Remake);
                consume(&shared, consumer, 0, restart);
            }));
            go.push(tx);
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        while assigned.iter().map(|a| a.load(Ordering::Relaxed)).sum::<usize>() < queues as usize {
            if Instant::now() > deadline {
                return Err(format!("group {group:?} did not assign all {queues} queues within 60 s"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        eprintln!("group {group:?}: {} consumers hold all {queues} queues", args.consumers);
        Ok(GroupConsumers { go, threads })
    }

    /// Starts consuming the run.
    fn go(self, shared: &Arc<Shared>) -> Vec<std::thread::JoinHandle<()>> {
        for tx in &self.go {
            let _ = tx.send(shared.clone());
        }
        self.threads
    }
}

/// Prints rates once a second until `done()`, with the e2e p99 of that
/// second (stalls show up where they happen) and of the run so far.
/// The threads' CPU times and the messages sent at two moments.
type CpuWindow = ((CpuTimes, u64), (CpuTimes, u64));

/// Prints the live rates each second until `done`; returns the threads' CPU
/// times and messages sent at the first and the last progress line inside
/// the measured time (an exited thread's time leaves /proc, and producers
/// and their SDK threads exit at its end), if there were two.
fn progress(s: &Shared, done: impl Fn() -> bool) -> Option<CpuWindow> {
    let (mut last_sent, mut last_recv, started) = (0, 0, Instant::now());
    let (mut cpu_from, mut cpu_to) = (None, None);
    let mut last_e2e = s.e2e.lock().expect("lock").clone();
    while !done() {
        std::thread::sleep(Duration::from_secs(1));
        let (sent, recv) = (s.sent.load(Ordering::Relaxed), s.received.load(Ordering::Relaxed));
        let e2e = s.e2e.lock().expect("lock").clone();
        let mut second = e2e.clone();
        // Fails only if the histogram was reset in between; then the second is the whole.
        if second.subtract(&last_e2e).is_err() {
            second = e2e.clone();
        }
        let ms = |h: &Histogram<u64>| h.value_at_percentile(99.0) as f64 / 1000.0;
        let phase = if now_ns(s.args.clock) < s.measure_from_ns { "warm-up" } else { "measure" };
        if phase == "measure" && now_ns(s.args.clock) < s.end_ns {
            let at = (CpuTimes::now(), s.sent.load(Ordering::Relaxed));
            if cpu_from.is_none() {
                cpu_from = Some(at);
            } else {
                cpu_to = Some(at);
            }
        }
        eprintln!(
            "[{:>5.1}s {phase}] sent {:>8}/s recv {:>8}/s {:>7.1} MB/s  e2e p99 {:>7.2} ms (run {:>7.2})  backlog {:>8}  errors {}",
            started.elapsed().as_secs_f64(),
            sent - last_sent,
            recv - last_recv,
            (recv - last_recv) as f64 * s.args.message_size as f64 / 1e6,
            ms(&second),
            ms(&e2e),
            sent.saturating_sub(recv),
            s.errors.load(Ordering::Relaxed)
        );
        (last_sent, last_recv, last_e2e) = (sent, recv, e2e);
    }
    cpu_from.zip(cpu_to)
}

/// The final table.
pub fn report(o: &Outcome) -> String {
    let mut out = format!("{} ({})\n{:>10}", o.summary.broker, o.summary.durability, "ms");
    for (name, _) in PERCENTILES {
        out += &format!(" {name:>10}");
    }
    out.push('\n');
    for (name, h) in [("e2e", &o.e2e), ("publish", &o.publish), ("send delay", &o.send_delay)] {
        out += &format!("{name:>10}");
        for v in percentiles_us(h) {
            out += &format!(" {:>10.3}", v as f64 / 1000.0);
        }
        out.push('\n');
    }
    if let Some(cpu) = &o.summary.cpu_us_per_msg {
        out += &format!("{cpu}\n");
    }
    if let Some((pending, lateness)) = &o.delayed {
        out += &format!("{:>10}", "late");
        for v in percentiles_us(lateness) {
            out += &format!(" {:>10.3}", v as f64 / 1000.0);
        }
        out += &format!("\n(delayed probes: {} delivered, {pending} delayed messages pending)\n", lateness.len());
    }
    if let Some(r) = &o.rebalance {
        out += &format!("rebalance after the member restart: {:.1} ms until it received again\n", r.rebalance_s * 1e3);
        for (name, h) in [("during", &r.during), ("outside", &r.outside)] {
            out += &format!("{name:>10}");
            for v in percentiles_us(h) {
                out += &format!(" {:>10.3}", v as f64 / 1000.0);
            }
            out.push('\n');
        }
        let series: Vec<String> =
            r.p99_by_second.iter().map(|(s, p)| format!("{s}s:{:.1}", *p as f64 / 1000.0)).collect();
        out += &format!("e2e p99 ms by second: {}\n", series.join(" "));
    }
    let s = &o.summary;
    out += &format!(
        "throughput {:.0} msgs/s, {:.2} MB/s received\nsent {} acked {} received {} lost {} duplicates {} errors {}\n",
        s.msgs_per_s(),
        s.mb_per_s(),
        s.sent,
        s.acked,
        s.received,
        s.lost,
        s.duplicates,
        s.errors
    );
    out
}

/// Writes e2e.hgrm, publish.hgrm, send_delay.hgrm and summary.json into `dir`.
pub fn write_out(o: &Outcome, dir: &std::path::Path) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let write =
        |name: &str, text: String| std::fs::write(dir.join(name), text).map_err(|e| format!("writing {name}: {e}"));
    write("e2e.hgrm", histogram::to_hgrm(&o.e2e))?;
    write("publish.hgrm", histogram::to_hgrm(&o.publish))?;
    write("send_delay.hgrm", histogram::to_hgrm(&o.send_delay))?;
    let json = o.summary.to_json([&o.e2e, &o.publish, &o.send_delay], o.rebalance.as_ref(), o.delayed.as_ref());
    write("summary.json", json + "\n")
}

/// Embedded brokers started by this process (each gets its own directory).
static EMBEDDED_RUNS: AtomicU64 = AtomicU64::new(0);

/// A broker started inside this process on a temporary data directory.
struct Embedded {
    server: server::Server,
    dir: PathBuf,
    addr: String,
    /// Shard 0's Kafka listener, if it has one.
    kafka: Option<String>,
}

impl Embedded {
    fn start(cores: &[usize], kafka: bool) -> Result<Embedded, String> {
        let dir = std::env::current_dir().map_err(|e| e.to_string())?.join(format!(
            "ringmq-bench-data-{}-{}",
            std::process::id(),
            EMBEDDED_RUNS.fetch_add(1, Ordering::Relaxed)
        ));
        let mut cfg = ServerConfig::new(&dir);
        cfg.cores = cores.to_vec();
        cfg.listen = "127.0.0.1:0".parse().expect("address");
        cfg.segment_bytes = 256 << 20;
        cfg.cache_bytes = 128 << 20;
        if kafka {
            cfg.kafka_listen = Some(free_ports(cores.len())?);
        }
        let kafka = cfg.kafka_listen.map(|a| a.to_string());
        let server = server::start(cfg).map_err(|e| {
            let _ = std::fs::remove_dir_all(&dir);
            format!("embedded broker: {e}")
        })?;
        let addr = server.addrs[0].to_string();
        let listener = kafka.as_ref().map_or(String::new(), |k| format!(", Kafka listener at {k}"));
        eprintln!("embedded broker on CPUs {cores:?} at {addr}{listener}, data in {}", dir.display());
        Ok(Embedded { server, dir, addr, kafka })
    }

    fn stop(self) {
        self.server.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A loopback address whose port and the `n - 1` after it are free now
/// (shard k's Kafka listener takes port + k).
fn free_ports(n: usize) -> Result<std::net::SocketAddr, String> {
    for _ in 0..100 {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
        let base = probe.local_addr().map_err(|e| e.to_string())?;
        let rest_free = (1..n as u16).all(|k| std::net::TcpListener::bind(("127.0.0.1", base.port() + k)).is_ok());
        if rest_free && usize::from(base.port()) + n <= usize::from(u16::MAX) {
            return Ok(base);
        }
    }
    Err(format!("found no {n} free consecutive loopback ports for the Kafka listener"))
}

/// Starts a thread named `name` (as perf and top show it) on `cpu`.
pub(crate) fn spawn_pinned<T: Send + 'static>(
    name: String,
    cpu: core_affinity::CoreId,
    f: impl FnOnce() -> T + Send + 'static,
) -> std::thread::JoinHandle<T> {
    std::thread::Builder::new()
        .name(name)
        .spawn(move || {
            core_affinity::set_for_current(cpu);
            f()
        })
        .expect("spawn a load generator thread")
}

/// Lets the calling thread, and threads it starts later, run only on `cores`.
/// Best effort: on failure it warns and the threads go where the kernel puts them.
fn confine_to(cores: &[usize]) {
    // A set of CPUs, not one (core_affinity pins to one): rustix's sched_setaffinity.
    let mut set = CpuSet::new();
    cores.iter().filter(|&&c| c < CpuSet::MAX_CPU).for_each(|&c| set.set(c));
    if let Err(e) = rustix::thread::sched_setaffinity(None, &set) {
        eprintln!("warning: could not confine client threads to CPUs {cores:?}: {e}");
    }
}
