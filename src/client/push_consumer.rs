//! The push consumer (RocketMQ's listener consumers): a dispatcher thread
//! long-polls the group's queues and its retry topic and hands messages to a
//! pool of workers running the user's listener.
//!
//! Concurrent: each message to any worker; one whose listener asks to
//! reconsume later (or panics) is sent back to the broker, which returns it
//! after a growing delay or dead-letters it past the group's limit.
//!
//! Orderly: a queue is fetched only while this consumer holds its lock on
//! the coordinator (a lease, renewed), and its messages go to one worker at
//! a time, in offset order; a failing message is retried in place (holding
//! up its queue) and dead-lettered after the last try, so the queue moves on.
//!
//! Offsets are committed below the lowest message still in hand, and before
//! queues are given up in a rebalance, after the workers finished theirs.

use super::client::Client;
use super::consumer::{ConsumedMessage, Consumer};
use super::error::ClientError;
use super::group::GroupConfig;
use super::message_id::MessageIdGenerator;
use ringmq_protocol::ErrorCode;
use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
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
    /// Ordered consumption: queue locks, one worker per queue, retries in place.
    pub orderly: bool,
    /// Orderly: the queue locks' lease (renewed at a third of it).
    pub lock_lease: Duration,
    /// Orderly: the pause before a failed message is tried again in place.
    pub suspend: Duration,
}

impl PushConfig {
    /// Defaults: 4 workers, 16 retries, commits every second.
    pub fn new(group: GroupConfig) -> Self {
        PushConfig {
            group,
            threads: 4,
            max_retries: 16,
            commit_interval: Duration::from_secs(1),
            orderly: false,
            lock_lease: Duration::from_secs(30),
            suspend: Duration::from_secs(1),
        }
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

/// Messages of one queue run in order by an orderly worker.
const RUN_MAX: usize = 32;

struct Dispatcher {
    consumer: Consumer,
    config: PushConfig,
    jobs: Option<mpsc::Sender<Vec<ConsumedMessage>>>,
    done: mpsc::Receiver<Done>,
    workers: Vec<JoinHandle<()>>,
    /// Offsets handed out (waiting or at a worker) and not finished, per queue.
    in_hand: HashMap<QueueKey, BTreeSet<u64>>,
    /// Offsets the broker would not take back: progress stays below them, so
    /// the group reads them again after a restart or rebalance.
    stuck: HashMap<QueueKey, BTreeSet<u64>>,
    last_commit: Instant,
    orderly: Option<Orderly>,
}

/// An orderly consumer's locks and per-queue work.
struct Orderly {
    client: Arc<Client>,
    /// Stable for this consumer's life (member ids change on every join).
    holder: String,
    locked: HashSet<QueueKey>,
    last_renew: Instant,
    /// Messages waiting for their queue's worker.
    waiting: HashMap<QueueKey, VecDeque<ConsumedMessage>>,
    /// Queues a worker is running.
    busy: HashSet<QueueKey>,
}

impl Dispatcher {
    fn new(client: Arc<Client>, config: PushConfig, retry_topic: String, listener: Listener) -> Dispatcher {
        let mut group = config.group.clone();
        group.topics.push(retry_topic);
        let mut consumer = Consumer::subscribe(client.clone(), group);
        consumer.start_paused(config.orderly);
        consumer.hold_rejoins(true);
        let (jobs, job_rx) = mpsc::channel::<Vec<ConsumedMessage>>();
        let (done_tx, done) = mpsc::channel();
        let job_rx = Arc::new(Mutex::new(job_rx));
        let worker = Arc::new(Worker { listener, client: client.clone(), config: config.clone() });
        let workers = (0..config.threads.max(1))
            .map(|i| {
                let (rx, tx, worker) = (job_rx.clone(), done_tx.clone(), worker.clone());
                std::thread::Builder::new()
                    .name(format!("ringmq-worker-{i}"))
                    .spawn(move || worker.run(&rx, &tx))
                    .expect("spawn worker")
            })
            .collect();
        let orderly = config.orderly.then(|| Orderly {
            client,
            holder: format!("{}-{}", config.group.client_id, MessageIdGenerator::new().next_id()),
            locked: HashSet::new(),
            last_renew: Instant::now(),
            waiting: HashMap::new(),
            busy: HashSet::new(),
        });
        Dispatcher {
            consumer,
            config,
            jobs: Some(jobs),
            done,
            workers,
            in_hand: HashMap::new(),
            stuck: HashMap::new(),
            last_commit: Instant::now(),
            orderly,
        }
    }

    fn run(mut self, stop: &AtomicBool) {
        let limit = self.config.threads.max(1) * 256;
        while !stop.load(Ordering::Relaxed) {
            if self.consumer.rebalance_pending() {
                self.give_up_queues();
                self.consumer.release_queues();
            }
            self.keep_locks();
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
        self.give_up_queues();
        drop(self.jobs.take());
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }

    fn hand_out(&mut self, messages: Vec<ConsumedMessage>) {
        for m in messages {
            let key = (m.topic.clone(), m.queue);
            self.in_hand.entry(key.clone()).or_default().insert(m.offset);
            match &mut self.orderly {
                Some(o) => o.waiting.entry(key).or_default().push_back(m),
                None => {
                    let _ = self.jobs.as_ref().expect("running").send(vec![m]);
                }
            }
        }
        self.start_runs();
    }

    /// Orderly: gives each idle queue's waiting messages to a worker.
    fn start_runs(&mut self) {
        let (Some(o), Some(jobs)) = (&mut self.orderly, &self.jobs) else { return };
        for (key, waiting) in o.waiting.iter_mut().filter(|(_, w)| !w.is_empty()) {
            if o.busy.insert(key.clone()) {
                let n = waiting.len().min(RUN_MAX);
                let _ = jobs.send(waiting.drain(..n).collect());
            }
        }
    }

    fn collect_done(&mut self, wait: Duration) {
        let first = if wait.is_zero() { self.done.try_recv().ok() } else { self.done.recv_timeout(wait).ok() };
        for d in first.into_iter().chain(std::iter::from_fn(|| self.done.try_recv().ok())) {
            match d {
                Done::Message { queue, offset, handled } => {
                    if let Some(set) = self.in_hand.get_mut(&queue) {
                        set.remove(&offset);
                    }
                    if !handled {
                        self.stuck.entry(queue).or_default().insert(offset);
                    }
                }
                Done::Run(queue) => {
                    if let Some(o) = &mut self.orderly {
                        o.busy.remove(&queue);
                    }
                }
            }
        }
        self.start_runs();
    }

    /// Orderly: locks newly assigned queues (then fetches them) and renews
    /// held locks; a queue whose lock was lost is paused and its waiting
    /// messages dropped (whoever holds it reads them).
    fn keep_locks(&mut self) {
        let Some(o) = &mut self.orderly else { return };
        let assigned: Vec<QueueKey> = self.consumer.positions().into_iter().map(|(t, q, _)| (t, q)).collect();
        let renew = o.last_renew.elapsed() >= self.config.lock_lease / 3;
        let ask: Vec<QueueKey> = assigned.iter().filter(|k| renew || !o.locked.contains(*k)).cloned().collect();
        if ask.is_empty() {
            return;
        }
        let group = &self.config.group.group;
        let held = match o.client.lock_queues(group, &o.holder, self.config.lock_lease, &ask) {
            Ok(held) => held,
            Err(error) => {
                tracing::warn!(%error, "locking queues failed");
                vec![false; ask.len()]
            }
        };
        if renew {
            o.last_renew = Instant::now();
        }
        for (key, held) in ask.into_iter().zip(held) {
            match (held, o.locked.contains(&key)) {
                (true, false) => {
                    self.consumer.resume(&key.0, key.1);
                    o.locked.insert(key);
                }
                (false, true) => {
                    tracing::warn!(topic = %key.0, queue = key.1, "lost a queue lock; pausing the queue");
                    o.locked.remove(&key);
                    self.consumer.pause(&key.0, key.1);
                    // Read again from the first message not finished here, if the lock comes back.
                    if let Some(first) = self.in_hand.get(&key).and_then(|s| s.first().copied()) {
                        self.consumer.seek(&key.0, key.1, first);
                    }
                    drop_waiting(o, &key, &mut self.in_hand, None);
                }
                _ => {}
            }
        }
    }

    /// Before a rebalance or shutdown: drops what waits, lets the workers
    /// finish what they run, commits, releases the locks and forgets the
    /// queues (they may go to another member).
    fn give_up_queues(&mut self) {
        if let Some(o) = &mut self.orderly {
            let keys: Vec<QueueKey> = o.waiting.keys().cloned().collect();
            for key in keys {
                drop_waiting(o, &key, &mut self.in_hand, Some(&mut self.stuck));
            }
        }
        while self.in_hand.values().any(|s| !s.is_empty()) {
            self.collect_done(Duration::from_millis(10));
        }
        self.commit();
        self.stuck.clear();
        if let Some(o) = &mut self.orderly {
            let held: Vec<QueueKey> = o.locked.drain().collect();
            if let Err(error) = o.client.lock_queues(&self.config.group.group, &o.holder, Duration::ZERO, &held) {
                tracing::debug!(%error, "unlocking queues failed; their leases will end");
            }
            held.iter().for_each(|(t, q)| self.consumer.pause(t, *q));
        }
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

/// Orderly: forgets a queue's waiting messages; with `keep_below`, progress
/// stays below them (they were never processed).
fn drop_waiting(
    o: &mut Orderly,
    key: &QueueKey,
    in_hand: &mut HashMap<QueueKey, BTreeSet<u64>>,
    keep_below: Option<&mut HashMap<QueueKey, BTreeSet<u64>>>,
) {
    let offsets: Vec<u64> = o.waiting.remove(key).unwrap_or_default().iter().map(|m| m.offset).collect();
    if let Some(set) = in_hand.get_mut(key) {
        set.retain(|off| !offsets.contains(off));
    }
    if let (Some(stuck), Some(&first)) = (keep_below, offsets.first()) {
        stuck.entry(key.clone()).or_default().insert(first);
    }
}

/// What a worker reports.
enum Done {
    /// A message is finished; `handled` is false when a send-back failed.
    Message { queue: QueueKey, offset: u64, handled: bool },
    /// An orderly run of a queue is finished: the queue may run again.
    Run(QueueKey),
}

/// What every worker shares.
struct Worker {
    listener: Listener,
    client: Arc<Client>,
    config: PushConfig,
}

impl Worker {
    fn run(&self, jobs: &Mutex<mpsc::Receiver<Vec<ConsumedMessage>>>, done: &mpsc::Sender<Done>) {
        loop {
            let next = jobs.lock().expect("jobs lock").recv();
            let Ok(run) = next else { return };
            let queue = run.first().map(|m| (m.topic.clone(), m.queue));
            for m in run {
                let handled = if self.config.orderly { self.consume_in_place(&m) } else { self.consume(&m) };
                let _ = done.send(Done::Message { queue: (m.topic.clone(), m.queue), offset: m.offset, handled });
            }
            if let (true, Some(queue)) = (self.config.orderly, queue) {
                let _ = done.send(Done::Run(queue));
            }
        }
    }

    fn listen(&self, m: &ConsumedMessage) -> ConsumeStatus {
        catch_unwind(AssertUnwindSafe(|| (self.listener)(m))).unwrap_or(ConsumeStatus::ReconsumeLater)
    }

    /// Concurrent: a failure goes back to the broker's retry schedule.
    fn consume(&self, m: &ConsumedMessage) -> bool {
        self.listen(m) == ConsumeStatus::Success || self.send_back(m, false)
    }

    /// Orderly: a failure is retried here, holding up the queue, then dead-lettered.
    fn consume_in_place(&self, m: &ConsumedMessage) -> bool {
        for attempt in 0..=self.config.max_retries {
            if attempt > 0 {
                std::thread::sleep(self.config.suspend);
            }
            if self.listen(m) == ConsumeStatus::Success {
                return true;
            }
        }
        self.send_back(m, true)
    }

    /// Sends a message back for a retry (or to the dead-letter topic),
    /// trying a few times; false if the broker never took it.
    fn send_back(&self, m: &ConsumedMessage, dead_letter: bool) -> bool {
        let group = &self.config.group.group;
        let mut pause = Duration::from_millis(100);
        for _ in 0..6 {
            let at = (m.topic.as_str(), m.queue, m.offset);
            match self.client.send_back_or_dead_letter(group, at, self.config.max_retries, dead_letter) {
                Ok(sent) => {
                    if sent.dead_lettered {
                        tracing::warn!(group, id = %m.message_id, times = sent.reconsume_times, "message dead-lettered");
                    }
                    return true;
                }
                Err(error) => {
                    tracing::warn!(%error, "sending a message back failed; trying again");
                    std::thread::sleep(pause);
                    pause *= 2;
                }
            }
        }
        tracing::error!(group, id = %m.message_id, "the broker did not take the message back; it will be read again");
        false
    }
}
