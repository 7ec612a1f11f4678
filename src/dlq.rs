//! A group's dead-letter topic (`%DLQ%group`, one queue) for operators:
//! list and inspect what landed there, and redrive messages to the topic
//! they were first produced to, with their message id, key, tag and value.
//! The dead-letter topic is a log: redriven messages stay in it.

use crate::client::{Client, ClientError, ConsumedMessage, Consumer, Message, Producer, ProducerConfig, SendResult};
use crate::client::{QueueSelector, StartFrom};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The dead-letter topic of `group`.
pub fn topic(group: &str) -> String {
    format!("%DLQ%{group}")
}

/// Up to `max` dead letters of `group` from `from` on (empty if it has none).
pub fn list(client: &Arc<Client>, group: &str, from: u64, max: usize) -> Result<Vec<ConsumedMessage>, ClientError> {
    let topic = topic(group);
    if client.refresh_metadata()?.topics.iter().all(|t| t.name != topic) {
        return Ok(Vec::new());
    }
    let (_, end) = client.list_offsets(&topic, 0)?;
    let mut consumer = Consumer::new(client.clone(), None);
    consumer.assign(&topic, &[0], StartFrom::Offset(from))?;
    let mut out = Vec::new();
    while out.len() < max && consumer.positions().first().is_some_and(|(_, _, at)| *at < end) {
        out.extend(consumer.poll(Duration::from_millis(500))?);
    }
    out.truncate(max);
    Ok(out)
}

/// The dead letter at `offset`.
pub fn show(client: &Arc<Client>, group: &str, offset: u64) -> Result<ConsumedMessage, ClientError> {
    list(client, group, offset, 1)?
        .into_iter()
        .find(|m| m.offset == offset)
        .ok_or_else(|| ClientError::Invalid(format!("{} has no message at offset {offset}", topic(group))))
}

/// Sends dead letters back to their origin topics (by key hash when they
/// have a key); the retry headers are dropped, so they start over.
pub fn redrive(client: &Arc<Client>, letters: &[ConsumedMessage]) -> Result<Vec<(u64, SendResult)>, ClientError> {
    let turn = AtomicU32::new(0);
    let by_key_or_turn = move |m: &Message, _queues: u32| match &m.key {
        Some(key) => crc32fast::hash(key),
        None => turn.fetch_add(1, Ordering::Relaxed),
    };
    let selector = QueueSelector::Custom(Arc::new(by_key_or_turn));
    let producer = Producer::new(client.clone(), ProducerConfig { selector, ..Default::default() });
    let mut out = Vec::new();
    for m in letters {
        let message = Message {
            id: Some(m.message_id),
            key: m.key.clone(),
            tag: (!m.tag.is_empty()).then(|| m.tag.clone()),
            headers: m.headers.iter().filter(|(n, _)| !n.starts_with("ringmq.")).cloned().collect(),
            value: m.value.clone(),
        };
        out.push((m.offset, producer.send(&m.origin_topic(), &message)?));
    }
    Ok(out)
}
