//! QueueCopy: a queue's stored batches from an offset, all of them (Kafka
//! transaction markers and aborted transactions' batches included), up to
//! what the broker group committed, and the queue's final end once it is
//! frozen, and where its compacted part ends: what a queue moving to
//! another broker group is copied from. A tiered queue is copied from its
//! first offset in the bucket: the target holds it whole, and uploads it
//! to its own place in the bucket.
//! Cluster members only (ClusterAction).

use super::{check_wait, Api, At, Need, Route};
use crate::protocol::codec::{DecodeError, Reader};
use crate::protocol::messages as msg;
use crate::protocol::{ApiKey, Writer};
use crate::security::acl::Operation::ClusterAction;
use crate::server::auth::authorizer::cluster;
use crate::server::core::{Core, Failure};
use crate::server::data::fetch::{self, Isolation};
use crate::server::wire::Services;
use std::time::Duration;

pub struct QueueCopy;

impl Api for QueueCopy {
    const KEY: ApiKey = ApiKey::QueueCopy;
    const BODIES: (&'static str, &'static str) = (
        "string topic, u32 queue, u64 offset, u32 max_bytes, u32 max_wait_ms",
        "u64 start, u64 end, u64 next_offset, bytes batches, u8 frozen, u64 frozen_end, u64 last_stable, u64 compacted_end",
    );
    type Request<'a> = msg::QueueCopy;

    fn decode(r: &mut Reader, _: u16) -> Result<msg::QueueCopy, DecodeError> {
        msg::QueueCopy::decode(r)
    }

    fn check(f: &msg::QueueCopy, core: &Core) -> Result<(), Failure> {
        check_wait("max_wait_ms", f.max_wait_ms, core.config().fetch_wait_max, "--fetch-wait-ms-max")
    }

    fn authorize(_: &msg::QueueCopy, need: &mut Need) -> Result<(), Failure> {
        need(ClusterAction, cluster())
    }

    fn route(f: &msg::QueueCopy) -> Route<'_> {
        Route::Queue(&f.queue)
    }

    async fn serve(s: &Services, f: Self::Request<'_>, at: &At<'_>, w: &mut Writer) -> Result<(), Failure> {
        let wait = Duration::from_millis(u64::from(f.max_wait_ms));
        let slot = at.slot()?;
        let queue = ringmq_shards::QueueId(slot.storage_id);
        // Asked first: a queue frozen now ends where it ends now, whatever the read below returns.
        let frozen_end = s.core.storage().frozen_end(queue)?;
        // Before the read: no compaction pass replaces the part the copy reads from now on.
        s.core.copied_out().note(queue);
        // A copy starts wherever the queue starts: a tiered queue's in the
        // bucket (retriable until the manifest is read), which the read
        // below reaches as any fetch does.
        let (start, _) = s.core.queue_offsets(queue)?;
        let read = msg::Fetch {
            queue: f.queue,
            offset: f.offset.max(start),
            max_bytes: f.max_bytes,
            max_wait_ms: f.max_wait_ms,
            tags: String::new(),
        };
        let read = fetch::read_queue(&s.core, slot, &read, wait, Isolation::Uncommitted).await;
        let read = read.map_err(|f| f.failure)?;
        // Read after the batches: a part that grew during the read ends past them.
        let compacted_end = s.core.storage().compacted(queue).map_or(0, |part| part.end);
        let (fetched, last_stable) = (read.fetched(), read.last_stable());
        msg::QueueCopied { fetched, frozen_end, last_stable, compacted_end }.encode(w);
        Ok(())
    }
}
