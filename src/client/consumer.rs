//! The consumer: assigned queues are fetched with long polling (one fetch in
//! flight per queue, all pipelined), messages come back in queue order, and
//! positions are committed for a group when the caller says so
//! (at-least-once: commit after processing).

use super::client::Client;
use super::connection::Tagged;
use super::error::ClientError;
use super::message_id::MessageId;
use crate::protocol::messages::{Fetch, Fetched, QueueRef};
use crate::protocol::{ApiKey, ErrorCode, Reader, Writer};
use ringmq_shards::batch;
use ringmq_shards::record::RecordIter;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

/// A consumed message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumedMessage {
    pub topic: String,
    pub queue: u32,
    pub offset: u64,
    pub message_id: MessageId,
    pub key: Vec<u8>,
    pub tag: String,
    pub headers: Vec<(String, Vec<u8>)>,
    pub value: Vec<u8>,
    /// Producer's timestamp, Unix milliseconds.
    pub timestamp_ms: i64,
}

/// Where an assigned queue starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartFrom {
    Earliest,
    Latest,
    Offset(u64),
    /// The group's committed offset, or the earliest if none.
    Committed,
}

struct Assignment {
    topic: String,
    queue: u32,
    position: u64,
    fetching: bool,
}

/// Reads assigned queues.
pub struct Consumer {
    client: Arc<Client>,
    group: Option<String>,
    assigned: Vec<Assignment>,
    replies: (mpsc::Sender<Tagged>, mpsc::Receiver<Tagged>),
    /// Bytes asked for per fetch.
    pub max_bytes: u32,
}

impl Consumer {
    /// A consumer; `group` names where offsets are committed.
    pub fn new(client: Arc<Client>, group: Option<String>) -> Consumer {
        Consumer { client, group, assigned: Vec::new(), replies: mpsc::channel(), max_bytes: 1 << 20 }
    }

    /// Adds queues of a topic, each starting as `start` says.
    pub fn assign(&mut self, topic: &str, queues: &[u32], start: StartFrom) -> Result<(), ClientError> {
        for &queue in queues {
            let (first, end) = self.client.list_offsets(topic, queue)?;
            let position = match start {
                StartFrom::Earliest => first,
                StartFrom::Latest => end,
                StartFrom::Offset(o) => o.clamp(first, end),
                StartFrom::Committed => match &self.group {
                    Some(g) => self.client.fetch_offset(g, topic, queue)?.unwrap_or(first),
                    None => return Err(ClientError::Invalid("StartFrom::Committed needs a consumer group".into())),
                },
            };
            self.assigned.push(Assignment { topic: topic.to_string(), queue, position, fetching: false });
        }
        Ok(())
    }

    /// Assigns every queue of the topic.
    pub fn assign_all(&mut self, topic: &str, start: StartFrom) -> Result<(), ClientError> {
        let n = self.client.topic(topic)?.queue_shards.len() as u32;
        self.assign(topic, &(0..n).collect::<Vec<_>>(), start)
    }

    /// Next offset to read of each assigned queue: (topic, queue, offset).
    pub fn positions(&self) -> Vec<(String, u32, u64)> {
        self.assigned.iter().map(|a| (a.topic.clone(), a.queue, a.position)).collect()
    }

    /// Waits up to `timeout` for messages; returns those that arrived (maybe none).
    pub fn poll(&mut self, timeout: Duration) -> Result<Vec<ConsumedMessage>, ClientError> {
        let wait_ms = timeout.as_millis().min(u128::from(u32::MAX)) as u32;
        for (i, a) in self.assigned.iter_mut().enumerate().filter(|(_, a)| !a.fetching) {
            let mut w = Writer::default();
            Fetch {
                queue: QueueRef { topic: a.topic.clone(), queue: a.queue },
                offset: a.position,
                max_bytes: self.max_bytes,
                max_wait_ms: wait_ms,
            }
            .encode(&mut w);
            self.client.send_queue(
                &a.topic,
                a.queue,
                ApiKey::Fetch,
                &w.buf,
                Some((self.replies.0.clone(), i as u64)),
            )?;
            a.fetching = true;
        }
        let deadline = Instant::now() + timeout + Duration::from_secs(5);
        let mut out = Vec::new();
        let first = self.replies.1.recv_timeout(deadline.saturating_duration_since(Instant::now()));
        let Ok(first) = first else {
            return Err(ClientError::Timeout {
                addr: self.client.config.bootstrap.clone(),
                timeout_ms: wait_ms as u64 + 5000,
            });
        };
        self.take(first, &mut out)?;
        while let Ok(more) = self.replies.1.try_recv() {
            self.take(more, &mut out)?;
        }
        Ok(out)
    }

    fn take(&mut self, (i, reply): Tagged, out: &mut Vec<ConsumedMessage>) -> Result<(), ClientError> {
        let a = &mut self.assigned[i as usize];
        a.fetching = false;
        let reply = reply?;
        if reply.error != ErrorCode::None {
            return Err(ClientError::Broker { code: reply.error, message: reply.message });
        }
        let f = Fetched::decode(&mut Reader::new(&reply.body))?;
        for b in batch::split(f.batches) {
            let h = batch::verify_stored(b)
                .map_err(|e| ClientError::Protocol(format!("fetched batch fails its check: {e}")))?;
            for (k, r) in RecordIter::new(&b[batch::HEADER_BYTES..]).enumerate() {
                let r = r.map_err(|e| ClientError::Protocol(e.to_string()))?;
                let offset = h.base_offset + k as u64;
                if offset < a.position {
                    continue;
                }
                out.push(ConsumedMessage {
                    topic: a.topic.clone(),
                    queue: a.queue,
                    offset,
                    message_id: MessageId(r.message_id),
                    key: r.key.to_vec(),
                    tag: String::from_utf8_lossy(r.tag).into_owned(),
                    headers: r
                        .headers
                        .iter()
                        .map(|(k, v)| (String::from_utf8_lossy(k).into_owned(), v.to_vec()))
                        .collect(),
                    value: r.value.to_vec(),
                    timestamp_ms: h.first_timestamp_ms + i64::from(r.timestamp_delta_ms),
                });
            }
        }
        a.position = a.position.max(f.next_offset);
        Ok(())
    }

    /// Commits every assigned queue's position for the group.
    pub fn commit(&self) -> Result<(), ClientError> {
        let group =
            self.group.as_deref().ok_or_else(|| ClientError::Invalid("commit needs a consumer group".into()))?;
        for a in &self.assigned {
            self.client.commit_offset(group, &a.topic, a.queue, a.position)?;
        }
        Ok(())
    }
}
