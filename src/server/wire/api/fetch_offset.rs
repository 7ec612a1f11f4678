//! FetchOffset: a group's committed offset of a queue, from its coordinator.

use super::{Api, At, Need, Route};
use crate::protocol::codec::{DecodeError, Reader};
use crate::protocol::messages::QueueRef;
use crate::protocol::{ApiKey, Writer};
use crate::security::acl::Operation::Describe;
use crate::server::auth::authorizer::{group, topic};
use crate::server::core::Failure;
use crate::server::wire::Services;

pub struct FetchOffset;

/// A group and one of its queues.
pub struct GroupQueue {
    group: String,
    queue: QueueRef,
}

impl Api for FetchOffset {
    const KEY: ApiKey = ApiKey::FetchOffset;
    const BODIES: (&'static str, &'static str) =
        ("string group, string topic, u32 queue", "u64 offset (u64::MAX: none committed)");
    type Request<'a> = GroupQueue;

    fn decode(r: &mut Reader, _: u16) -> Result<GroupQueue, DecodeError> {
        Ok(GroupQueue { group: r.string()?, queue: QueueRef::decode(r)? })
    }

    fn authorize(f: &GroupQueue, need: &mut Need) -> Result<(), Failure> {
        need(Describe, group(&f.group))?;
        need(Describe, topic(&f.queue.topic))
    }

    fn route(f: &GroupQueue) -> Route<'_> {
        Route::Group(&f.group)
    }

    async fn serve(s: &Services, f: Self::Request<'_>, _: &At<'_>, w: &mut Writer) -> Result<(), Failure> {
        w.u64(s.groups.committed(&f.group, &f.queue));
        Ok(())
    }
}
