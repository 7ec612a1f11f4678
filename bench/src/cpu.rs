//! CPU time of the run's threads by role, from each thread's time on a CPU
//! (`/proc/self/task/*/schedstat`, nanoseconds), so a run reports what a
//! message costs the client library and the (embedded) broker. Producers
//! and shards spin while idle (`--spin-before-send`, the shard's poll before
//! it sleeps): their figures are costs only in a run as fast as possible
//! (`--rate 0`).

use serde::Serialize;

/// CPU time (ns) of the threads of each role.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CpuTimes {
    /// The load generator's producer threads (building and handing over messages).
    pub producers: u64,
    /// Its consumer threads (polling, checking and timing messages).
    pub consumers: u64,
    /// The client library's own threads: the SDK's connection readers, ack
    /// and linger threads and heartbeats, or librdkafka's (`rdk:*`, and
    /// rust-rdkafka's delivery-report thread).
    pub client_library: u64,
    /// The embedded broker's shard threads and their io_uring workers.
    pub broker: u64,
}

impl CpuTimes {
    /// The CPU time of this process's threads now.
    pub fn now() -> CpuTimes {
        let mut t = CpuTimes::default();
        let Ok(tasks) = std::fs::read_dir("/proc/self/task") else { return t };
        for task in tasks.flatten() {
            let dir = task.path();
            let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
            let on_cpu = std::fs::read_to_string(dir.join("schedstat"))
                .ok()
                .and_then(|s| s.split_whitespace().next().and_then(|n| n.parse::<u64>().ok()))
                .unwrap_or(0);
            if let Some(slot) = t.role(comm.trim()) {
                *slot += on_cpu;
            }
        }
        t
    }

    /// Where a thread named `comm` counts (None: the main thread and others).
    fn role(&mut self, comm: &str) -> Option<&mut u64> {
        match comm {
            c if c.starts_with("producer-") => Some(&mut self.producers),
            c if c.starts_with("consumer-") => Some(&mut self.consumers),
            c if c.starts_with("ringmq-shard") || c.starts_with("iou-wrk") => Some(&mut self.broker),
            // The bench's main thread is "ringmq-bench"; the SDK's are ringmq-conn, -acks, -linger...
            c if c.starts_with("ringmq-") && c != "ringmq-bench" => Some(&mut self.client_library),
            // librdkafka's threads, and ThreadedProducer's "producer polling thread" (comm keeps 15 bytes).
            c if c.starts_with("rdk:") || c.starts_with("producer pollin") => Some(&mut self.client_library),
            _ => None,
        }
    }

    /// What the threads spent since `earlier`.
    pub fn since(self, earlier: CpuTimes) -> CpuTimes {
        CpuTimes {
            producers: self.producers.saturating_sub(earlier.producers),
            consumers: self.consumers.saturating_sub(earlier.consumers),
            client_library: self.client_library.saturating_sub(earlier.client_library),
            broker: self.broker.saturating_sub(earlier.broker),
        }
    }

    /// Microseconds per message of each role, over `messages`.
    pub fn per_message(&self, messages: u64) -> CpuPerMessage {
        let us = |ns: u64| (ns as f64 / 1e3 / messages.max(1) as f64 * 1000.0).round() / 1000.0;
        CpuPerMessage {
            producers: us(self.producers),
            consumers: us(self.consumers),
            client_library: us(self.client_library),
            broker: us(self.broker),
        }
    }
}

/// CPU microseconds per message sent in the measured time, by role.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct CpuPerMessage {
    pub producers: f64,
    pub consumers: f64,
    pub client_library: f64,
    pub broker: f64,
}

impl std::fmt::Display for CpuPerMessage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "cpu us/msg: producers {:.3}, consumers {:.3}, client library {:.3}, broker {:.3}",
            self.producers, self.consumers, self.client_library, self.broker
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_count_by_their_names_and_this_one_is_on_the_cpu() {
        let mut t = CpuTimes::default();
        for (name, ns) in [("producer-0", 5), ("consumer-0-1", 7), ("ringmq-acks", 11), ("ringmq-conn", 6)] {
            *t.role(name).unwrap() += ns;
        }
        for (name, ns) in [("rdk:broker0", 3), ("producer pollin", 4)] {
            *t.role(name).unwrap() += ns;
        }
        *t.role("ringmq-shard-0-").unwrap() += 17;
        *t.role("iou-wrk-42").unwrap() += 19;
        assert!(t.role("ringmq-bench").is_none() && t.role("main").is_none());
        assert_eq!(t, CpuTimes { producers: 5, consumers: 7, client_library: 24, broker: 36 });
        let per = t.since(CpuTimes { producers: 1, ..CpuTimes::default() }).per_message(2);
        assert_eq!(per, CpuPerMessage { producers: 0.002, consumers: 0.004, client_library: 0.012, broker: 0.018 });
        // A live thread named like the SDK's, busy for 30 ms, shows up.
        let before = CpuTimes::now();
        let (busy, done) = (std::sync::mpsc::channel(), std::sync::mpsc::channel::<()>());
        let thread = std::thread::Builder::new()
            .name("ringmq-test".into())
            .spawn(move || {
                let start = std::time::Instant::now();
                while start.elapsed() < std::time::Duration::from_millis(30) {}
                busy.0.send(()).unwrap();
                let _ = done.1.recv();
            })
            .unwrap();
        busy.1.recv().unwrap();
        let during = CpuTimes::now().since(before);
        done.0.send(()).unwrap();
        thread.join().unwrap();
        assert!(during.client_library >= 20_000_000, "{during:?}");
    }
}
