//! Consumer groups as operators see them: every group of the cluster, and
//! one group's members, committed offsets, queue ends and lag.

use super::client::Client;
use super::error::ClientError;
use ringmq_protocol::groups::{decode_listings, GroupDescription, GroupListing};
use ringmq_protocol::{ApiKey, Reader, Writer};
use std::collections::BTreeMap;

/// A queue a group consumes (or committed an offset of).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueLag {
    pub topic: String,
    pub queue: u32,
    /// The member assigned the queue now, if any.
    pub member: Option<String>,
    /// The group's committed offset, if it committed one.
    pub committed: Option<u64>,
    /// The queue's end: the offset its next message gets.
    pub end: u64,
}

impl QueueLag {
    /// Messages the group has not committed yet (None before its first commit).
    pub fn lag(&self) -> Option<u64> {
        self.committed.map(|c| self.end.saturating_sub(c))
    }
}

impl Client {
    /// Every consumer group of the cluster (each shard lists those it coordinates), by name.
    pub fn list_groups(&self) -> Result<Vec<GroupListing>, ClientError> {
        let mut groups = Vec::new();
        for shard in &self.refresh_metadata()?.shards {
            let reply = self.call_addr(&shard.addr, ApiKey::ListGroups, &[])?;
            groups.extend(decode_listings(&mut Reader::new(&reply.body))?);
        }
        groups.sort_by(|a, b| a.group.cmp(&b.group));
        Ok(groups)
    }

    /// The group as its coordinator knows it.
    pub fn describe_group(&self, group: &str) -> Result<GroupDescription, ClientError> {
        let mut w = Writer::default();
        w.string(group);
        let reply = self.call_group(group, ApiKey::DescribeGroup, &w.buf, std::time::Duration::ZERO)?;
        Ok(GroupDescription::decode(&mut Reader::new(&reply.body))?)
    }

    /// Each queue the group holds or committed: who holds it, the committed
    /// offset, the queue's end (asked of its owner), sorted by topic and queue.
    pub fn group_lag(&self, description: &GroupDescription) -> Result<Vec<QueueLag>, ClientError> {
        let mut queues: BTreeMap<(String, u32), (Option<String>, Option<u64>)> = BTreeMap::new();
        for (topic, queue, offset) in &description.offsets {
            queues.entry((topic.clone(), *queue)).or_default().1 = Some(*offset);
        }
        for m in &description.members {
            for (topic, held) in &m.assignment.topics {
                for queue in held {
                    queues.entry((topic.clone(), *queue)).or_default().0 = Some(m.member.clone());
                }
            }
        }
        let mut lags = Vec::with_capacity(queues.len());
        for ((topic, queue), (member, committed)) in queues {
            let (_, end) = self.list_offsets(&topic, queue)?;
            lags.push(QueueLag { topic, queue, member, committed, end });
        }
        Ok(lags)
    }
}
