//! A broker group leader's shards report their queues' loads (stored
//! bytes, and bytes produced per second since the last report) to the
//! control plane every `load_report_interval`, which keeps them in etcd for
//! `ringmq cluster rebalance`. Queues moving here are not yet this group's
//! load; those leaving still are, until they have left.

use super::retention::estimated_bytes;
use crate::server::core::metadata::Home;
use crate::server::core::placement::{QueueLoad, ShardLoad};
use crate::server::core::Core;
use ringmq_shards::{QueueId, StorageError};
use std::collections::HashMap;
use std::rc::Rc;
use std::time::Instant;

/// Reports this shard's loads until the shard stops (a cluster leader's shard only).
pub async fn run(core: Rc<Core>) {
    let link = core.placement().expect("cluster mode").clone();
    let mut last: (Instant, HashMap<u32, u64>) = (Instant::now(), HashMap::new());
    while core.tasks().sleep(core.config().load_report_interval).await {
        match measure(&core, &mut last).await {
            Ok(loads) => link.report_load(core.id() as u32, loads),
            Err(error) => tracing::warn!(shard = core.id(), %error, "measuring the queues' loads failed; will retry"),
        }
    }
}

/// Each served queue's load; `last` keeps when, and each queue's end then.
async fn measure(core: &Core, last: &mut (Instant, HashMap<u32, u64>)) -> Result<ShardLoad, StorageError> {
    let storage = core.storage();
    let (now, metadata) = (Instant::now(), core.metadata());
    let seconds = now.duration_since(last.0).as_secs_f64().max(1e-3);
    let mut ends = HashMap::new();
    let mut loads = ShardLoad::new();
    for (name, topic) in &metadata.topics {
        for (queue, home) in topic.queues.iter().enumerate() {
            let (Home::Here(slot) | Home::Leaving { slot, .. }) = home else { continue };
            if slot.shard as usize != core.id() {
                continue;
            }
            let id = QueueId(slot.storage_id);
            let ((start, end), bytes) = (storage.offsets(id)?, estimated_bytes(storage, id).await?);
            let per_record = bytes.checked_div(end - start).unwrap_or(0);
            let produced = end.saturating_sub(last.1.get(&slot.storage_id).copied().unwrap_or(end));
            let bytes_per_sec = (produced * per_record) as f64 / seconds;
            loads.insert(format!("{name}/{queue}"), QueueLoad { bytes, bytes_per_sec });
            ends.insert(slot.storage_id, end);
        }
    }
    *last = (now, ends);
    Ok(loads)
}
