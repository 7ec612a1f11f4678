//! ListOffsets: a queue's start and end, from the shard that owns it.

use super::{Api, At, Need, Route};
use crate::protocol::codec::{DecodeError, Reader};
use crate::protocol::messages::QueueRef;
use crate::protocol::{ApiKey, Writer};
use crate::security::acl::Operation::Describe;
use crate::server::auth::authorizer::topic;
use crate::server::core::Failure;
use crate::server::wire::Services;
use ringmq_shards::QueueId;

pub struct ListOffsets;

impl Api for ListOffsets {
    const KEY: ApiKey = ApiKey::ListOffsets;
    const BODIES: (&'static str, &'static str) =
        ("string topic, u32 queue", "u64 start (earliest), u64 end (latest: next offset)");
    type Request<'a> = QueueRef;

    fn decode(r: &mut Reader, _: u16) -> Result<QueueRef, DecodeError> {
        QueueRef::decode(r)
    }

    fn authorize(q: &QueueRef, need: &mut Need) -> Result<(), Failure> {
        need(Describe, topic(&q.topic))
    }

    fn route(q: &QueueRef) -> Route<'_> {
        Route::Queue(q)
    }

    async fn serve(s: &Services, _: Self::Request<'_>, at: &At<'_>, w: &mut Writer) -> Result<(), Failure> {
        let (start, end) = s.core.queue_offsets(QueueId(at.slot()?.storage_id))?;
        w.u64(start).u64(end);
        Ok(())
    }
}
