//! storage-bench: drives one ringmq shard's storage engine directly (no
//! network) with many concurrent appenders and reports durable throughput,
//! group-commit batch sizes and append-to-durable latency.

use clap::Parser;
use hdrhistogram::Histogram;
use ringmq_shards::batch::BatchBuilder;
use ringmq_shards::{FlushPolicy, QueueId, Record, Shard, ShardConfig, ShardStats};
use std::cell::RefCell;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// Appends records from concurrent writers to one shard and reports records/s,
/// MB/s, records and bytes per fdatasync, and append-to-durable latency.
#[derive(Parser, Debug, Clone)]
#[command(name = "storage-bench", version)]
struct Args {
    /// Concurrent appenders on the shard (each waits for its append to be durable).
    #[arg(long, default_value_t = 64)]
    writers: u32,
    /// Bytes of each record's value (one record per batch).
    #[arg(long, default_value_t = 1024)]
    record_size: usize,
    /// Seconds to measure.
    #[arg(long, default_value_t = 10.0)]
    duration: f64,
    /// Seconds to run before measuring.
    #[arg(long, default_value_t = 1.0)]
    warmup: f64,
    /// Directory for the shard's files (created, and removed at the end unless --keep).
    #[arg(long, default_value = "storage-bench-data")]
    dir: PathBuf,
    /// Keep the data directory at the end.
    #[arg(long)]
    keep: bool,
    /// Queues the writers spread over.
    #[arg(long, default_value_t = 8)]
    queues: u32,
    /// Flush policy: sync (ack after fdatasync) or async (ack when queued).
    #[arg(long, default_value = "sync", value_parser = ["sync", "async"])]
    flush: String,
    /// Segment size in MiB.
    #[arg(long, default_value_t = 1024)]
    segment_mib: u64,
    /// Size retention, MiB of log [default: none, the log grows]. With it, retired
    /// segments are recycled as new ones: run a warm-up that rolls over a few
    /// times to measure the steady state, where nothing is zero-filled.
    #[arg(long)]
    retention_mib: Option<u64>,
    /// Retired segment files kept for recycling.
    #[arg(long, default_value_t = ringmq_shards::config::SEGMENT_POOL_MAX)]
    segment_pool_max: usize,
    /// User-space cache size in MiB.
    #[arg(long, default_value_t = 256)]
    cache_mib: usize,
    /// Group-commit delay in microseconds (0: a round closes as soon as the previous one is durable).
    #[arg(long, default_value_t = 0)]
    flush_delay_us: u64,
    /// Durable writes in flight at once (1: one at a time).
    #[arg(long, default_value_t = 2)]
    flush_depth: usize,
    /// Microseconds the shard's executor spins for I/O completions before it
    /// sleeps (thread-per-core: the core is the shard's; spinning saves the wake-up).
    #[arg(long, default_value_t = 100)]
    spin_us: u64,
    /// CPU to pin the shard to (default: the last CPU).
    #[arg(long)]
    cpu: Option<usize>,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    json: bool,
    /// Seal every batch (encryption at rest) with a random AES-256-GCM data key.
    #[arg(long)]
    encrypt: bool,
}

/// A keyring of one random data key (the bench's data is thrown away).
fn random_keyring() -> std::sync::Arc<ringmq_shards::crypt::keyring::Keyring> {
    let hex: String = ringmq::security::random_bytes::<32>().iter().map(|b| format!("{b:02x}")).collect();
    std::sync::Arc::new(ringmq_shards::crypt::keyring::Keyring::parse(&format!("1 {hex}")).expect("a key"))
}

struct Outcome {
    elapsed: Duration,
    stats: ShardStats,
    latency_ns: Histogram<u64>,
    rss_bytes: u64,
}

fn main() {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .init();
    let args = Args::parse();
    let cpu = args.cpu.unwrap_or_else(|| std::thread::available_parallelism().map_or(0, |n| n.get() - 1));
    let run_args = args.clone();
    let outcome = glommio::LocalExecutorBuilder::new(glommio::Placement::Fixed(cpu))
        .name("storage-bench")
        .spin_before_park(Duration::from_micros(args.spin_us))
        .spawn(move || run(run_args))
        .expect("start the shard executor")
        .join()
        .expect("shard executor thread");
    if !args.keep {
        let _ = std::fs::remove_dir_all(&args.dir);
    }
    match outcome {
        Ok(o) => report(&args, cpu, &o),
        Err(e) => {
            eprintln!("storage-bench failed: {e}");
            std::process::exit(1);
        }
    }
}

async fn run(args: Args) -> Result<Outcome, ringmq_shards::StorageError> {
    let config = ShardConfig {
        segment_bytes: args.segment_mib << 20,
        cache_bytes: args.cache_mib << 20,
        flush_delay: Duration::from_micros(args.flush_delay_us),
        flush_depth: args.flush_depth,
        default_flush_policy: if args.flush == "async" { FlushPolicy::Async } else { FlushPolicy::Sync },
        keyring: args.encrypt.then(random_keyring),
        retention_bytes: args.retention_mib.map(|m| m << 20),
        segment_pool_max: args.segment_pool_max,
        ..ShardConfig::new(&args.dir)
    };
    let shard = Shard::open(config).await?;
    for q in 0..args.queues {
        if !shard.queues().contains(&QueueId(q)) {
            shard.create_queue(QueueId(q), None).await?;
        }
    }
    let latency =
        Rc::new(RefCell::new(Histogram::<u64>::new_with_bounds(1_000, 60_000_000_000, 3).expect("histogram bounds")));
    let measuring = Rc::new(std::cell::Cell::new(false));
    let start = Instant::now();
    let warmup_end = start + Duration::from_secs_f64(args.warmup);
    let end = warmup_end + Duration::from_secs_f64(args.duration);
    let writers: Vec<_> = (0..args.writers)
        .map(|w| {
            let (shard, latency, measuring) = (shard.clone(), latency.clone(), measuring.clone());
            let value = vec![b'v'; args.record_size];
            let queue = QueueId(w % args.queues);
            glommio::spawn_local(async move {
                // The shard stamps a copy, so one prepared batch serves every append.
                let mut b = BatchBuilder::new(0);
                b.push(&Record { value: Some(&value), ..Record::default() });
                let batch = b.finish();
                // One clock read per append: the end of one is the start of the next.
                let mut t = Instant::now();
                while t < end {
                    shard.append(queue, &batch).await?;
                    let now = Instant::now();
                    if measuring.get() {
                        latency.borrow_mut().saturating_record((now - t).as_nanos() as u64);
                    }
                    t = now;
                }
                Ok::<(), ringmq_shards::StorageError>(())
            })
        })
        .collect();
    glommio::timer::sleep(warmup_end.saturating_duration_since(Instant::now())).await;
    let base = shard.stats();
    let measured_from = Instant::now();
    measuring.set(true);
    let progress = glommio::spawn_local(progress(shard.clone(), base, measured_from));
    for w in writers {
        w.await?;
    }
    let elapsed = measured_from.elapsed();
    measuring.set(false);
    drop(progress);
    let stats = diff(shard.stats(), base);
    let rss_bytes = rss_bytes();
    shard.close().await?;
    let latency_ns = latency.borrow().clone();
    Ok(Outcome { elapsed, stats, latency_ns, rss_bytes })
}

async fn progress(shard: Shard, base: ShardStats, from: Instant) {
    let mut last = base;
    loop {
        glommio::timer::sleep(Duration::from_secs(1)).await;
        let now = shard.stats();
        let d = diff(now, last);
        eprintln!(
            "[{:>5.1}s] {:>9} records/s {:>8.1} MB/s {:>6} fsyncs/s {:>7.1} records/fsync",
            from.elapsed().as_secs_f64(),
            d.records,
            d.append_bytes as f64 / 1e6,
            d.fsyncs,
            d.synced_records as f64 / d.fsyncs.max(1) as f64
        );
        last = now;
    }
}

fn diff(a: ShardStats, b: ShardStats) -> ShardStats {
    ShardStats {
        appends: a.appends - b.appends,
        records: a.records - b.records,
        append_bytes: a.append_bytes - b.append_bytes,
        rounds: a.rounds - b.rounds,
        write_bytes: a.write_bytes - b.write_bytes,
        fsyncs: a.fsyncs - b.fsyncs,
        overlapped_writes: a.overlapped_writes - b.overlapped_writes,
        write_busy_us: a.write_busy_us - b.write_busy_us,
        synced_records: a.synced_records - b.synced_records,
        synced_bytes: a.synced_bytes - b.synced_bytes,
        backpressure_waits: a.backpressure_waits - b.backpressure_waits,
        segment_waits: a.segment_waits - b.segment_waits,
        segments_created: a.segments_created - b.segments_created,
        segments_recycled: a.segments_recycled - b.segments_recycled,
        zero_fill_bytes: a.zero_fill_bytes - b.zero_fill_bytes,
        ..a
    }
}

fn rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

fn report(args: &Args, cpu: usize, o: &Outcome) {
    let secs = o.elapsed.as_secs_f64();
    let s = &o.stats;
    let fsyncs = s.fsyncs.max(1) as f64;
    let us = |q: f64| o.latency_ns.value_at_quantile(q) as f64 / 1e3;
    let fields: Vec<(&str, String)> = vec![
        ("writers", args.writers.to_string()),
        ("record_size", args.record_size.to_string()),
        ("flush", format!("\"{}\"", args.flush)),
        ("cpu", cpu.to_string()),
        ("spin_us", args.spin_us.to_string()),
        ("flush_depth", args.flush_depth.to_string()),
        ("seconds", format!("{secs:.3}")),
        ("records", s.records.to_string()),
        ("records_per_s", format!("{:.0}", s.records as f64 / secs)),
        ("mb_per_s", format!("{:.2}", s.append_bytes as f64 / secs / 1e6)),
        ("fsyncs", s.fsyncs.to_string()),
        ("rounds", s.rounds.to_string()),
        ("overlapped_writes", s.overlapped_writes.to_string()),
        ("write_busy", format!("{:.3}", s.write_busy_us as f64 / 1e6 / secs)),
        ("mean_batch_records", format!("{:.2}", s.synced_records as f64 / fsyncs)),
        ("mean_batch_bytes", format!("{:.0}", s.synced_bytes as f64 / fsyncs)),
        ("write_bytes", s.write_bytes.to_string()),
        ("p50_us", format!("{:.1}", us(0.5))),
        ("p99_us", format!("{:.1}", us(0.99))),
        ("p999_us", format!("{:.1}", us(0.999))),
        ("max_us", format!("{:.1}", o.latency_ns.max() as f64 / 1e3)),
        ("backpressure_waits", s.backpressure_waits.to_string()),
        ("segment_waits", s.segment_waits.to_string()),
        ("segments_created", s.segments_created.to_string()),
        ("segments_recycled", s.segments_recycled.to_string()),
        ("zero_fill_bytes", s.zero_fill_bytes.to_string()),
        ("cache_mib", args.cache_mib.to_string()),
        ("rss_mib", format!("{:.1}", o.rss_bytes as f64 / (1 << 20) as f64)),
    ];
    if args.json {
        let body: Vec<String> = fields.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
        println!("{{{}}}", body.join(","));
    } else {
        for (k, v) in &fields {
            println!("{k:>20}  {}", v.trim_matches('"'));
        }
    }
}
