//! A follower's shard: fetches the same shard of its group's leader from
//! its own durable end and mirrors what comes back, until the node stops
//! (the control plane restarts the node in a new role when the leader
//! changes). Shard 0 also keeps the metadata file current from the log,
//! and every shard builds the compacted parts of queues moving into its
//! group from the log (core/part_imports.rs).

use super::link::Link;
use super::ReplicaError;
use crate::protocol::messages::{ReplicaFetch, ReplicaRange};
use crate::protocol::{ApiKey, Reader, Writer};
use crate::server::core::{metadata_log, part_imports, Core};
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

/// How long a leader parks a fetch at its written end.
const FETCH_WAIT: Duration = Duration::from_millis(500);
/// Bytes asked for per fetch.
const FETCH_BYTES: u32 = 1 << 20;
/// A connect or a fetch that takes longer than this (past the park) fails.
const IO_TIMEOUT: Duration = Duration::from_secs(5);
/// Pause before fetching again after a failure.
const RETRY_PAUSE: Duration = Duration::from_millis(200);

/// Who this shard follows.
pub struct Leader {
    pub broker_group: String,
    /// This node's name, as the leader knows its followers.
    pub node: String,
    pub epoch: u64,
    /// The leader's address of this shard.
    pub addr: SocketAddr,
}

/// Mirrors the leader's shard until the node stops.
pub async fn follow(core: Rc<Core>, leader: Leader) {
    let mut failures = 0u32;
    loop {
        let Err(error) = fetch_until_failure(&core, &leader).await else { return };
        // The first failure in a row is worth a warning; repeats while the leader is away are not.
        if failures == 0 {
            tracing::warn!(shard = core.id(), leader = %leader.addr, %error, "replication fetch failed; retrying");
        }
        failures += 1;
        if !core.tasks().sleep(RETRY_PAUSE).await {
            return;
        }
    }
}

/// Fetches and mirrors until something fails (Ok once the node stops).
async fn fetch_until_failure(core: &Core, leader: &Leader) -> Result<(), ReplicaError> {
    let mut link =
        Link::connect(leader.addr, core.config().tls.as_ref(), IO_TIMEOUT, core.config().frame_bytes_max).await?;
    let storage = core.storage();
    let mut metadata_end = metadata_log::end(storage);
    // Again after a failed build: the first fetch tells the leader they are durable here.
    part_imports::build(core).await.map_err(ReplicaError::PartImport)?;
    let mut imports_end = part_imports::end(storage);
    loop {
        let (_, _, durable) = storage.log_positions();
        let fetch = ReplicaFetch {
            broker_group: leader.broker_group.clone(),
            follower: leader.node.clone(),
            epoch: leader.epoch,
            shard: core.id() as u32,
            from: durable,
            max_bytes: FETCH_BYTES,
            max_wait_ms: FETCH_WAIT.as_millis() as u32,
        };
        let mut w = Writer::default();
        fetch.encode(&mut w);
        let call = link.call(ApiKey::ReplicaFetch, &w.buf, FETCH_WAIT + IO_TIMEOUT);
        let Some(answer) = core.tasks().unless_stopping(call).await else { return Ok(()) };
        let answer = answer?;
        let response = answer.response()?;
        if response.error != crate::protocol::ErrorCode::None {
            return Err(ReplicaError::Refused(response.error, response.message.to_string()));
        }
        let mut r = Reader::new(response.body);
        let range = ReplicaRange::decode(&mut r).map_err(ReplicaError::Answer)?;
        if range.from != durable {
            return Err(ReplicaError::Position { asked: durable, from: range.from });
        }
        if range.batches.is_empty() {
            continue;
        }
        storage.mirror(range.from, range.batches).await.map_err(ReplicaError::Mirror)?;
        if core.id() == 0 && metadata_log::end(storage) != metadata_end {
            metadata_log::store_newest(storage, &core.config().data_dir).await.map_err(ReplicaError::Metadata)?;
            metadata_end = metadata_log::end(storage);
        }
        // Before the next fetch tells the leader they are durable here.
        if part_imports::end(storage) != imports_end {
            part_imports::build(core).await.map_err(ReplicaError::PartImport)?;
            imports_end = part_imports::end(storage);
        }
    }
}
