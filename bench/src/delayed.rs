//! Delayed messages in a bench run: load a backlog of pending delayed
//! messages before the workload (`--delayed-pending`, all on one queue, so
//! one shard holds them), and probe delivery precision while it runs
//! (`--delayed-probe-rate`: delayed messages due 1 s after sending, and how
//! late each becomes visible to a consumer, by the wall clock).

use crate::histogram::new_histogram;
use hdrhistogram::Histogram;
use ringmq::client::{Client, Consumer, Delay, Message, Producer, ProducerConfig, StartFrom};
use ringmq::duration::unix_ms;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Messages per ProduceDelayed request while loading.
const LOAD_BATCH: usize = 1000;

/// Stores `n` delayed messages, due `delay` from now, in queue 0 of a
/// one-queue topic; prints progress.
pub fn load_pending(client: &Arc<Client>, topic: &str, n: u64, delay: Duration) -> Result<(), String> {
    if client.topic(topic).is_err() {
        client.create_topic(topic, 1, 0).map_err(|e| e.to_string())?;
    }
    let producer = Producer::new(client.clone(), ProducerConfig::default());
    let started = Instant::now();
    let mut stored = 0u64;
    let due = Delay::At(unix_ms() + delay.as_millis() as u64);
    while stored < n {
        let count = (n - stored).min(LOAD_BATCH as u64);
        let batch: Vec<Message> = (0..count).map(|i| Message::new(format!("pending-{:0>90}", stored + i))).collect();
        producer.send_delayed_batch(topic, 0, &batch, due).map_err(|e| format!("loading delayed messages: {e}"))?;
        stored += count;
        if stored.is_multiple_of(100_000) || stored == n {
            eprintln!("[delayed] {stored} of {n} pending stored ({:.1} s)", started.elapsed().as_secs_f64());
        }
    }
    Ok(())
}

/// A running precision probe.
pub struct Probe {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    lateness: Arc<Mutex<Histogram<u64>>>,
}

impl Probe {
    /// Sends `rate` delayed messages a second, each due 1 s later, to a
    /// one-queue topic, and consumes them.
    pub fn start(client: &Arc<Client>, topic: &str, rate: f64) -> Result<Probe, String> {
        if client.topic(topic).is_err() {
            client.create_topic(topic, 1, 0).map_err(|e| e.to_string())?;
        }
        let mut consumer = Consumer::new(client.clone(), None);
        consumer.assign(topic, &[0], StartFrom::Latest).map_err(|e| e.to_string())?;
        let (stop, lateness) = (Arc::new(AtomicBool::new(false)), Arc::new(Mutex::new(new_histogram())));
        let (s, l) = (stop.clone(), lateness.clone());
        let receiver = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                for m in consumer.poll(Duration::from_millis(100)).unwrap_or_default() {
                    let Some(due) =
                        m.value_or_empty().get(..8).map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
                    else {
                        continue;
                    };
                    let late_us = unix_us().saturating_sub(due * 1000);
                    l.lock().expect("lateness lock").saturating_record(late_us.max(1));
                }
            }
        });
        let (s, producer, topic) =
            (stop.clone(), Producer::new(client.clone(), ProducerConfig::default()), topic.to_string());
        let every = Duration::from_secs_f64(1.0 / rate.max(0.001));
        let sender = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                let due = unix_ms() + 1000;
                let mut value = due.to_le_bytes().to_vec();
                value.resize(64, b'p');
                if let Err(error) = producer.send_delayed(&topic, &Message::new(value), Delay::At(due)) {
                    tracing::warn!(%error, "delayed probe failed");
                }
                std::thread::sleep(every);
            }
        });
        Ok(Probe { stop, threads: vec![sender, receiver], lateness })
    }

    /// Stops after the last probes had time to arrive; the lateness histogram (µs).
    pub fn finish(self) -> Histogram<u64> {
        std::thread::sleep(Duration::from_millis(1500));
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads {
            let _ = t.join();
        }
        let h = self.lateness.lock().expect("lateness lock").clone();
        h
    }
}

fn unix_us() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_micros() as u64)
}
