//! Message lookup by id or by topic and key: every shard is asked (each
//! keeps its own lookup index), and the answers are merged.

use super::client::Client;
use super::consumer::{decode_messages, ConsumedMessage};
use super::error::ClientError;
use super::message_id::MessageId;
use ringmq_protocol::messages::{LookedUp, LookupQuery};
use ringmq_protocol::{ApiKey, Reader, Writer};

/// What a lookup found.
#[derive(Debug, Clone, Default)]
pub struct Found {
    pub messages: Vec<ConsumedMessage>,
    /// Matches the brokers still knew of but retention had removed.
    pub removed: u32,
}

impl Client {
    /// The message with this id, if a shard still stores it.
    pub fn find_by_id(&self, id: MessageId) -> Result<Found, ClientError> {
        self.find(&LookupQuery::Id(id.0))
    }

    /// The messages of `topic` with this key, oldest first per queue.
    pub fn find_by_key(&self, topic: &str, key: &[u8]) -> Result<Found, ClientError> {
        self.topic(topic)?;
        self.find(&LookupQuery::Key { topic: topic.to_string(), key: key.to_vec() })
    }

    fn find(&self, query: &LookupQuery) -> Result<Found, ClientError> {
        let mut w = Writer::default();
        query.encode(&mut w);
        let mut found = Found::default();
        for shard in &self.refresh_metadata()?.shards {
            let reply = self.retrying(|| self.call_addr(&shard.addr, ApiKey::LookupMessages, &w.buf))?;
            let answer = LookedUp::decode(&mut Reader::new(&reply.body))?;
            found.removed += answer.removed;
            for (topic, queue, batch) in answer.found {
                found.messages.extend(decode_messages(&topic, queue, &batch, 0)?);
            }
        }
        found.messages.sort_by(|a, b| (&a.topic, a.queue, a.offset).cmp(&(&b.topic, b.queue, b.offset)));
        Ok(found)
    }
}
