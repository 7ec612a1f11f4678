//! ReplicaFetch: a follower's fetch of stored bytes from the same shard of
//! its leader, from its durable end (group and epoch checked there).

use super::{check_wait, Api, At, Need, Route};
use crate::protocol::codec::{DecodeError, Reader};
use crate::protocol::messages as msg;
use crate::protocol::{ApiKey, Writer};
use crate::security::acl::Operation::ClusterAction;
use crate::server::auth::authorizer::cluster;
use crate::server::core::{Core, Failure};
use crate::server::replica;
use crate::server::wire::Services;

pub struct ReplicaFetch;

impl Api for ReplicaFetch {
    const KEY: ApiKey = ApiKey::ReplicaFetch;
    const BODIES: (&'static str, &'static str) = (
        "string broker_group, string follower, u64 epoch, u32 shard, u64 from, u32 max_bytes, u32 max_wait_ms",
        "u64 epoch, u64 from, u64 next, u64 log_start, u64 shipped_end, u64 committed_end, bytes batches",
    );
    type Request<'a> = msg::ReplicaFetch;

    fn decode(r: &mut Reader, _: u16) -> Result<msg::ReplicaFetch, DecodeError> {
        msg::ReplicaFetch::decode(r)
    }

    fn check(f: &msg::ReplicaFetch, core: &Core) -> Result<(), Failure> {
        check_wait("max_wait_ms", f.max_wait_ms, core.config().fetch_wait_max, "--fetch-wait-ms-max")
    }

    fn authorize(_: &msg::ReplicaFetch, need: &mut Need) -> Result<(), Failure> {
        need(ClusterAction, cluster())
    }

    fn route(f: &msg::ReplicaFetch) -> Route<'_> {
        Route::Shard(f.shard as usize)
    }

    async fn serve(s: &Services, f: Self::Request<'_>, _: &At<'_>, w: &mut Writer) -> Result<(), Failure> {
        replica::leader::serve_fetch(&s.core, &f, w).await
    }
}
