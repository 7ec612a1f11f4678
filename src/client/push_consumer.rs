//! The push consumer (RocketMQ's concurrent listener): a dispatcher thread
//! long-polls the group's queues and its retry topic and hands each message
//! to a pool of workers running the user's listener. A message whose
//! listener asks to reconsume later (or panics) is sent back to the broker,
//! which returns it after a growing delay or dead-letters it past the
//! group's limit. Offsets are committed below the lowest message still in a
//! worker's hands, and before queues are given up in a rebalance, after the
//! workers finished what they hold of them.

use super::client::Client;
use super::consumer::{ConsumedMessage, Consumer};
use super::error::ClientError;
use super::group::GroupConfig;
use crate::protocol::ErrorCode;
use std::collections::{BTreeSet, HashMap};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What the listener says about a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsumeStatus {
    Success,
    /// Retry later (the broker's back-off), up to the group's limit.
    ReconsumeLater,
}

/// The user's code, run on the worker pool.
pub type Listener = Arc<dyn Fn(&ConsumedMessage) -> ConsumeStatus + Send + Sync>;

/// Push consumer settings.
#[derive(Clone)]
pub struct PushConfig {
    pub group: GroupConfig,
    /// Worker threads running the listener.
    pub threads: usize,
    /// Retries before a message goes to the dead-letter topic (RocketMQ's maxReconsumeTimes).
    pub max_retries: u32,
    /// How often progress is committed.
    pub commit_interval: Duration,
}

impl PushConfig {
    /// Defaults: 4 workers, 16 retries, commits every second.
    pub fn new(group: GroupConfig) -> Self {
        PushConfig { group, threads: 4, max_retries: 16, commit_interval: Duration::from_secs(1) }
    }
}

/// A running push consumer; `shutdown` finishes in-hand messages, commits and leaves.
pub struct PushConsumer {
    stop: Arc<AtomicBool>,
    dispatcher: Option<JoinHandle<()>>,
}

impl PushConsumer {
    /// Makes sure the group's retry topic exists, then starts consuming.
    pub fn start(client: Arc<Client>, config: PushConfig, listener: Listener) -> Result<PushConsumer, ClientError> {
        let retry = format!("%RETRY%{}", config.group.group);
        match client.create_topic(&retry, 1, 0) {
            Ok(()) | Err(ClientError::Broker { code: ErrorCode::TopicExists, .. }) => {}
            Err(e) => return Err(e),
        }
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let dispatcher = std::thread::Builder::new()
            .name("ringmq-push".into())
            .spawn(move || Dispatcher::new(client, config, retry, listener).run(&stop2))
            .expect("spawn push dispatcher");
        Ok(PushConsumer { stop, dispatcher: Some(dispatcher) })
    }

    /// Stops fetching, lets the workers finish, commits and leaves the group.
    pub fn shutdown(mut self) {
        self.stop_now();
    }

    fn stop_now(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(d) = self.dispatcher.take() {
            let _ = d.join();
        }
    }
}

impl Drop for PushConsumer {
    fn drop(&mut self) {
        self.stop_now();
    }
}

type QueueKey = (String, u32);

struct Dispatcher {
    consumer: Consumer,
    config: PushConfig,
    jobs: Option<mpsc::Sender<ConsumedMessage>>,
    done: mpsc::Receiver<Done>,
    workers: Vec<JoinHandle<()>>,
    /// Offsets handed to workers and not finished, per queue.
    in_hand: HashMap<QueueKey, BTreeSet<u64>>,
    /// Offsets the broker would not take back: progress stays below them, so
    /// the group reads them again after a restart or rebalance.
    stuck: HashMap<QueueKey, BTreeSet<u64>>,
    last_commit: Instant,
}

impl Dispatcher {
    fn new(client: Arc<Client>, config: PushConfig, retry_topic: String, listener: Listener) -> Dispatcher {
        let mut group = config.group.clone();
        group.topics.push(retry_topic);
        let consumer = Consumer::subscribe(client.clone(), group);
        let (jobs, job_rx) = mpsc::channel::<ConsumedMessage>();
        let (done_tx, done) = mpsc::channel();
        let job_rx = Arc::new(Mutex::new(job_rx));
        let workers = (0..config.threads.max(1))
            .map(|i| {
                let (rx, tx, listener, client) = (job_rx.clone(), done_tx.clone(), listener.clone(), client.clone());
                let (group, max_retries) = (config.group.group.clone(), config.max_retries);
                std::thread::Builder::new()
                    .name(format!("ringmq-worker-{i}"))
                    .spawn(move || work(&rx, &tx, &listener, &client, &group, max_retries))
                    .expect("spawn worker")
            })
            .collect();
        Dispatcher {
            consumer,
            config,
            jobs: Some(jobs),
            done,
            workers,
            in_hand: HashMap::new(),
            stuck: HashMap::new(),
            last_commit: Instant::now(),
        }
    }

    fn run(mut self, stop: &AtomicBool) {
        let limit = self.config.threads.max(1) * 256;
        while !stop.load(Ordering::Relaxed) {
            if self.consumer.rebalance_pending() {
                self.finish_in_hand();
            }
            self.collect_done(Duration::ZERO);
            if self.in_hand.values().map(BTreeSet::len).sum::<usize>() >= limit {
                self.collect_done(Duration::from_millis(10));
                continue;
            }
            match self.consumer.poll(Duration::from_millis(100)) {
                Ok(messages) => self.hand_out(messages),
                Err(error) => {
                    tracing::warn!(%error, "push consumer poll failed; retrying");
                    std::thread::sleep(Duration::from_millis(200));
                }
            }
            if self.last_commit.elapsed() >= self.config.commit_interval {
                self.commit();
            }
        }
        self.finish_in_hand();
        drop(self.jobs.take());
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }

    fn hand_out(&mut self, messages: Vec<ConsumedMessage>) {
        let jobs = self.jobs.as_ref().expect("running");
        for m in messages {
            self.in_hand.entry((m.topic.clone(), m.queue)).or_default().insert(m.offset);
            let _ = jobs.send(m);
        }
    }

    fn collect_done(&mut self, wait: Duration) {
        let first = if wait.is_zero() { self.done.try_recv().ok() } else { self.done.recv_timeout(wait).ok() };
        for d in first.into_iter().chain(std::iter::from_fn(|| self.done.try_recv().ok())) {
            if let Some(set) = self.in_hand.get_mut(&d.queue) {
                set.remove(&d.offset);
            }
            if !d.handled {
                self.stuck.entry(d.queue).or_default().insert(d.offset);
            }
        }
    }

    /// Waits for the workers to finish every message in hand, commits, and
    /// forgets the queues' state (they may go to another member).
    fn finish_in_hand(&mut self) {
        while self.in_hand.values().any(|s| !s.is_empty()) {
            self.collect_done(Duration::from_millis(10));
        }
        self.commit();
        self.stuck.clear();
    }

    /// Commits, per queue, the lowest offset still in hand, else the fetch position.
    fn commit(&mut self) {
        self.last_commit = Instant::now();
        let positions: Vec<(String, u32, u64)> = self
            .consumer
            .positions()
            .into_iter()
            .map(|(topic, queue, fetched)| {
                let key = (topic.clone(), queue);
                let first = |m: &HashMap<QueueKey, BTreeSet<u64>>| m.get(&key).and_then(|s| s.first().copied());
                let position = [first(&self.in_hand), first(&self.stuck)].into_iter().flatten().fold(fetched, u64::min);
                (topic, queue, position)
            })
            .collect();
        if let Err(error) = self.consumer.commit_offsets(&positions) {
            tracing::debug!(%error, "push consumer commit refused (rebalancing)");
        }
    }
}

/// A message a worker finished; `handled` is false when a send-back failed.
struct Done {
    queue: QueueKey,
    offset: u64,
    handled: bool,
}

/// A worker: runs the listener; a message to reconsume is sent back to the
/// broker before it counts as handled.
fn work(
    jobs: &Mutex<mpsc::Receiver<ConsumedMessage>>,
    done: &mpsc::Sender<Done>,
    listener: &Listener,
    client: &Client,
    group: &str,
    max_retries: u32,
) {
    loop {
        let next = jobs.lock().expect("jobs lock").recv();
        let Ok(m) = next else { return };
        let status = catch_unwind(AssertUnwindSafe(|| listener(&m))).unwrap_or(ConsumeStatus::ReconsumeLater);
        let handled = status == ConsumeStatus::Success || send_back(client, group, &m, max_retries);
        let _ = done.send(Done { queue: (m.topic.clone(), m.queue), offset: m.offset, handled });
    }
}

/// Sends a message back for a retry, trying a few times; false if the broker never took it.
fn send_back(client: &Client, group: &str, m: &ConsumedMessage, max_retries: u32) -> bool {
    let mut pause = Duration::from_millis(100);
    for _ in 0..6 {
        match client.send_back(group, &m.topic, m.queue, m.offset, max_retries) {
            Ok(sent) => {
                if sent.dead_lettered {
                    tracing::warn!(group, id = %m.message_id, times = sent.reconsume_times, "message dead-lettered");
                }
                return true;
            }
            Err(error) => {
                tracing::warn!(%error, "sending a message back for a retry failed; trying again");
                std::thread::sleep(pause);
                pause *= 2;
            }
        }
    }
    tracing::error!(group, id = %m.message_id, "the broker did not take the message back; it will be read again");
    false
}
