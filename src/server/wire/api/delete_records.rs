//! DeleteRecords: a queue's records below an offset removed (its start
//! moved there; u64::MAX: everything it holds), recorded in the replicated
//! log before the answer, on the shard that owns the queue. Delete on the topic.

use super::{Api, At, Need, Route};
use crate::protocol::codec::{DecodeError, Reader};
use crate::protocol::messages::QueueRef;
use crate::protocol::{ApiKey, Writer};
use crate::security::acl::Operation::Delete;
use crate::server::auth::authorizer::topic;
use crate::server::core::Failure;
use crate::server::data::retention;
use crate::server::wire::Services;

pub struct DeleteRecords;

impl Api for DeleteRecords {
    const KEY: ApiKey = ApiKey::DeleteRecords;
    const BODIES: (&'static str, &'static str) =
        ("string topic, u32 queue, u64 before (u64::MAX: all)", "u64 start (the queue's new start)");
    const WRITES: bool = true;
    type Request<'a> = (QueueRef, u64);

    fn decode(r: &mut Reader, _: u16) -> Result<(QueueRef, u64), DecodeError> {
        Ok((QueueRef::decode(r)?, r.u64()?))
    }

    fn authorize((q, _): &(QueueRef, u64), need: &mut Need) -> Result<(), Failure> {
        need(Delete, topic(&q.topic))
    }

    fn route((q, _): &(QueueRef, u64)) -> Route<'_> {
        Route::Queue(q)
    }

    async fn serve(s: &Services, (_, before): Self::Request<'_>, at: &At<'_>, w: &mut Writer) -> Result<(), Failure> {
        let before = (before != u64::MAX).then_some(before);
        w.u64(retention::delete_records(&s.core, at.slot()?, before).await?);
        Ok(())
    }
}
