//! A topic's own configs, more queues and deleted records, from the SDK.

use super::client::Client;
use super::error::ClientError;
use ringmq_protocol::messages::{decode_configs, AlterTopic, CreateTopic, QueueRef, TopicChange};
use ringmq_protocol::{ApiKey, Reader, Writer};

impl Client {
    /// Creates a topic of `queues` queues (flush 0 sync, 1 async) with its
    /// own configs, by Kafka's names (`cleanup.policy`, `retention.ms`...):
    /// all valid, or no topic is made. Without configs it is asked at
    /// version 0, which every broker serves.
    pub fn create_topic_with_configs(
        &self,
        name: &str,
        queues: u32,
        flush: u8,
        configs: &[(String, String)],
    ) -> Result<(), ClientError> {
        let version = if configs.is_empty() { 0 } else { CreateTopic::WITH_CONFIGS };
        let mut w = Writer::default();
        CreateTopic { name: name.to_string(), queues, flush, configs: configs.to_vec() }.encode(&mut w, version);
        self.call_addr_version(&self.control_addr(), (ApiKey::CreateTopic, version), &w.buf)?;
        self.refresh_metadata()?;
        Ok(())
    }

    /// Changes a topic's configs, all or none (`validate_only`: only checks them).
    pub fn alter_topic(&self, topic: &str, changes: &[TopicChange], validate_only: bool) -> Result<(), ClientError> {
        let mut w = Writer::default();
        AlterTopic { topic: topic.to_string(), validate_only, changes: changes.to_vec() }.encode(&mut w);
        self.call_addr(&self.control_addr(), ApiKey::AlterTopic, &w.buf)?;
        Ok(())
    }

    /// The configs a topic set for itself (the rest are the broker's defaults).
    pub fn topic_configs(&self, topic: &str) -> Result<Vec<(String, String)>, ClientError> {
        let mut w = Writer::default();
        w.string(topic);
        let reply = self.call_addr(&self.control_addr(), ApiKey::DescribeTopicConfigs, &w.buf)?;
        Ok(decode_configs(&mut Reader::new(&reply.body))?)
    }

    /// Grows a topic to `queues` queues in all.
    pub fn add_queues(&self, topic: &str, queues: u32) -> Result<(), ClientError> {
        let mut w = Writer::default();
        w.string(topic).u32(queues);
        self.call_addr(&self.control_addr(), ApiKey::AddQueues, &w.buf)?;
        self.refresh_metadata()?;
        Ok(())
    }

    /// Removes a queue's records below `before` (None: all it holds); its new start.
    pub fn delete_records(&self, topic: &str, queue: u32, before: Option<u64>) -> Result<u64, ClientError> {
        let mut w = Writer::default();
        QueueRef { topic: topic.to_string(), queue }.encode(&mut w);
        w.u64(before.unwrap_or(u64::MAX));
        let reply = self.call_queue(topic, queue, ApiKey::DeleteRecords, &w.buf)?;
        Ok(Reader::new(&reply.body).u64()?)
    }
}
