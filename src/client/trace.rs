//! A message's trace as the brokers wrote it (`serve --trace-topics` or
//! `--trace-sample-rate`): its events, oldest first.

use super::client::Client;
use super::error::ClientError;
use super::message_id::MessageId;
use ringmq_protocol::messages::TRACE_TOPIC;

impl Client {
    /// The trace events of message `id` (JSON objects with at least `event`
    /// and `time_ms`), oldest first; empty if it was not traced.
    pub fn trace(&self, id: MessageId) -> Result<Vec<serde_json::Value>, ClientError> {
        let found = match self.find_by_key(TRACE_TOPIC, id.to_string().as_bytes()) {
            // No broker traced anything yet.
            Err(ClientError::UnknownTopic(_)) => return Ok(Vec::new()),
            Err(ClientError::Broker { code: ringmq_protocol::ErrorCode::UnknownTopic, .. }) => return Ok(Vec::new()),
            other => other?,
        };
        let mut events: Vec<serde_json::Value> =
            found.messages.iter().filter_map(|m| serde_json::from_slice(m.value_or_empty()).ok()).collect();
        events.sort_by_key(|e| e["time_ms"].as_i64().unwrap_or(0));
        Ok(events)
    }
}
