//! LookupMessages on one shard: the storage engine's lookup index gives
//! candidates by hash; each is confirmed against the stored record (id, or
//! topic and key), and those below their queue's start are counted as
//! removed by retention.

use super::tag_filter;
use crate::protocol::messages::{LookedUp, LookupQuery};
use crate::server::core::{Core, Failure};
use ringmq_shards::lookup::{id_hash, key_hash};
use ringmq_shards::{QueueId, ReadWait};
use std::collections::HashMap;

/// Finds the messages the query names among this shard's.
pub async fn lookup(core: &Core, query: &LookupQuery) -> Result<LookedUp, Failure> {
    let hash = match query {
        LookupQuery::Id(id) => id_hash(id),
        LookupQuery::Key { key, .. } => key_hash(key),
    };
    let candidates = core.storage().lookup(hash).await?;
    let metadata = core.metadata();
    let by_storage_id: HashMap<u32, (&String, u32)> = metadata
        .topics
        .iter()
        .flat_map(|(name, t)| {
            t.queues.iter().enumerate().filter_map(move |(i, home)| Some((home.served()?.storage_id, (name, i as u32))))
        })
        .collect();
    let mut out = LookedUp::default();
    for (q, offset) in candidates {
        let Some(&(topic, queue)) = by_storage_id.get(&q.0) else { continue };
        if let LookupQuery::Key { topic: wanted, .. } = query {
            if wanted != topic {
                continue;
            }
        }
        let (start, end) = core.storage().offsets(QueueId(q.0))?;
        if offset < start {
            out.removed += 1;
            continue;
        }
        if offset >= end {
            continue; // an entry of a batch the log lost (recovery rolled the queue back)
        }
        let read = core.storage().read(q, offset, 1, ReadWait::No).await?;
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
