//! LookupMessages on one shard: the storage engine's lookup index (and,
//! for a tiered queue's records below its local start, the footers of the
//! bucket's objects) gives candidates by hash; each is confirmed against
//! the stored record (id, or topic and key), and those below their queue's
//! start are counted as removed by retention.

use super::tag_filter;
use crate::protocol::messages::{LookedUp, LookupQuery};
use crate::server::core::metadata::QueueSlot;
use crate::server::core::{Core, Failure};
use ringmq_shards::lookup::{id_hash, key_hash};
use ringmq_shards::QueueId;
use std::collections::{HashMap, HashSet};
use std::time::Duration;

/// Finds the messages the query names among this shard's.
pub async fn lookup(core: &Core, query: &LookupQuery) -> Result<LookedUp, Failure> {
    let hash = match query {
        LookupQuery::Id(id) => id_hash(id),
        LookupQuery::Key { key, .. } => key_hash(key),
    };
    let mut candidates = core.storage().lookup(hash).await?;
    candidates.extend(core.remote_reads().lookup(core, hash).await?);
    let candidates: HashSet<(QueueId, u64)> = candidates.into_iter().collect();
    let metadata = core.metadata();
    let by_storage_id: HashMap<u32, (&String, u32, QueueSlot)> = metadata
        .topics
        .iter()
        .flat_map(|(name, t)| {
            t.queues.iter().enumerate().filter_map(move |(i, home)| {
                let slot = home.served()?;
                Some((slot.storage_id, (name, i as u32, slot)))
            })
        })
        .collect();
    let mut out = LookedUp::default();
    for (q, offset) in candidates {
        let Some(&(topic, queue, slot)) = by_storage_id.get(&q.0) else { continue };
        if let LookupQuery::Key { topic: wanted, .. } = query {
            if wanted != topic {
                continue;
            }
        }
        let (start, end) = core.queue_offsets(q)?;
        if offset < start {
            out.removed += 1;
            continue;
        }
        if offset >= end {
            continue; // an entry of a batch the log lost (recovery rolled the queue back)
        }
        let read = core.read_here(slot, offset, 1, Duration::ZERO).await?;
        let mut batch = Vec::new();
        let matches = |o: u64, r: &ringmq_shards::Record<'_>| {
            o == offset
                && match query {
                    LookupQuery::Id(id) => r.message_id == *id,
                    LookupQuery::Key { key, .. } => r.key == Some(key.as_slice()),
                }
        };
        tag_filter::repack_where(&read.bytes, offset, matches, &mut batch);
        if !batch.is_empty() {
            out.found.push((topic.clone(), queue, batch));
        }
    }
    Ok(out)
}
