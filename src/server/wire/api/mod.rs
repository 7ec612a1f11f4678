//! The native protocol's APIs, one file each, registered in `TABLE`: the
//! dispatcher finds a request's API there, ApiVersions answers from it and
//! PROTOCOL.md's API table is made from it. An API's file says its key,
//! versions and body layouts, how its body decodes, the limits it checks,
//! what its principal must be allowed, where it is served (here, the
//! queue's owner, the group's coordinator, a given shard) and how. What is
//! the same for every API (decoding whole, the order of the checks, quotas,
//! routing, acks none, waiting for replication) is `Entry` below, once.
//! Adding an API is a file here and a line in `TABLE`.

mod add_queues;
mod advance_clock;
mod alter_quotas;
mod alter_topic;
mod alter_user;
mod api_versions;
mod commit_offset;
mod create_acls;
mod create_topic;
mod delete_acls;
mod delete_records;
mod delete_topic;
mod describe_group;
mod describe_topic_configs;
mod end_transaction;
mod fetch;
mod fetch_many;
mod fetch_offset;
mod heartbeat;
mod join_group;
mod leave_group;
mod list_acls;
mod list_groups;
mod list_offsets;
mod list_quotas;
mod list_topics;
mod list_users;
mod lock_queues;
mod lookup_messages;
mod metadata;
mod poll_checks;
mod produce;
mod produce_delayed;
mod produce_half;
mod produce_many;
mod queue_copy;
mod replica_fetch;
pub mod sasl_authenticate;
pub mod sasl_handshake;
mod send_back;
mod sync_group;
mod unlock_queues;

use crate::protocol::codec::{DecodeError, Reader};
use crate::protocol::frame;
use crate::protocol::{ApiKey, Writer};
use crate::security::acl::Operation;
use crate::server::auth::authorizer::Resource;
use crate::server::auth::quotas;
use crate::server::core::context::ShardRole;
use crate::server::core::metadata::QueueSlot;
use crate::server::core::{Core, Failure, Reason};
use crate::server::wire::caller::Caller;
use crate::server::wire::Services;
use futures_util::future::LocalBoxFuture;
use std::marker::PhantomData;
use std::time::Duration;

/// Every native API, in wire order (a test checks the order).
pub static TABLE: [&(dyn Handler + Sync); 42] = [
    &Entry::<api_versions::ApiVersions>(PhantomData),
    &Entry::<metadata::Metadata>(PhantomData),
    &Entry::<create_topic::CreateTopic>(PhantomData),
    &Entry::<delete_topic::DeleteTopic>(PhantomData),
    &Entry::<list_topics::ListTopics>(PhantomData),
    &Entry::<produce::Produce>(PhantomData),
    &Entry::<fetch::Fetch>(PhantomData),
    &Entry::<list_offsets::ListOffsets>(PhantomData),
    &Entry::<commit_offset::CommitOffset>(PhantomData),
    &Entry::<fetch_offset::FetchOffset>(PhantomData),
    &Entry::<join_group::JoinGroup>(PhantomData),
    &Entry::<sync_group::SyncGroup>(PhantomData),
    &Entry::<heartbeat::Heartbeat>(PhantomData),
    &Entry::<leave_group::LeaveGroup>(PhantomData),
    &Entry::<send_back::SendBack>(PhantomData),
    &Entry::<advance_clock::AdvanceClock>(PhantomData),
    &Entry::<lock_queues::LockQueues>(PhantomData),
    &Entry::<unlock_queues::UnlockQueues>(PhantomData),
    &Entry::<produce_delayed::ProduceDelayed>(PhantomData),
    &Entry::<lookup_messages::LookupMessages>(PhantomData),
    &Entry::<produce_half::ProduceHalf>(PhantomData),
    &Entry::<end_transaction::EndTransaction>(PhantomData),
    &Entry::<poll_checks::PollChecks>(PhantomData),
    &Entry::<produce_many::ProduceMany>(PhantomData),
    &Entry::<fetch_many::FetchMany>(PhantomData),
    &Entry::<replica_fetch::ReplicaFetch>(PhantomData),
    &Entry::<sasl_handshake::SaslHandshake>(PhantomData),
    &Entry::<sasl_authenticate::SaslAuthenticate>(PhantomData),
    &Entry::<alter_user::AlterUser>(PhantomData),
    &Entry::<list_users::ListUsers>(PhantomData),
    &Entry::<create_acls::CreateAcls>(PhantomData),
    &Entry::<delete_acls::DeleteAcls>(PhantomData),
    &Entry::<list_acls::ListAcls>(PhantomData),
    &Entry::<alter_quotas::AlterQuotas>(PhantomData),
    &Entry::<list_quotas::ListQuotas>(PhantomData),
    &Entry::<list_groups::ListGroups>(PhantomData),
    &Entry::<describe_group::DescribeGroup>(PhantomData),
    &Entry::<alter_topic::AlterTopic>(PhantomData),
    &Entry::<describe_topic_configs::DescribeTopicConfigs>(PhantomData),
    &Entry::<add_queues::AddQueues>(PhantomData),
    &Entry::<delete_records::DeleteRecords>(PhantomData),
    &Entry::<queue_copy::QueueCopy>(PhantomData),
];

/// The API of a wire key, if there is one.
pub fn find(key: u16) -> Option<&'static (dyn Handler + Sync)> {
    TABLE.get(usize::from(key)).copied()
}

/// One native API: what its file declares. (Its futures run on one shard's
/// executor and are never sent between threads, so `async fn` is fine here.)
#[allow(async_fn_in_trait)]
pub trait Api: 'static {
    const KEY: ApiKey;
    /// The versions served: (min, max).
    const VERSIONS: (u16, u16) = (0, 0);
    /// The request and the response body, as PROTOCOL.md lists them.
    const BODIES: (&'static str, &'static str);
    /// Served on a follower and a deposed leader too (everything else is
    /// answered NotLeader there).
    const ANY_ROLE: bool = false;
    /// Serving it may store something besides a topic append (internal
    /// queues, metadata): a sync-replicated leader answers once its
    /// replicas hold what this shard wrote. Produces are not marked: their
    /// appends wait for exactly their own bytes (`Core::append_here`).
    const WRITES: bool = false;
    /// The bytes of its response count against the principal's fetch quota.
    const FETCHES: bool = false;
    /// Served by the connection on its session (SASL), never dispatched.
    const BY_CONNECTION: bool = false;

    /// The decoded request body.
    type Request<'a>;

    /// Decodes the body at `version` (one it serves); the caller refuses
    /// trailing bytes.
    fn decode<'a>(r: &mut Reader<'a>, version: u16) -> Result<Self::Request<'a>, DecodeError>;

    /// Refuses a request that asks for more than the broker allows.
    fn check(_request: &Self::Request<'_>, _core: &Core) -> Result<(), Failure> {
        Ok(())
    }

    /// Calls `need` with every (operation, resource) the request asks for.
    fn authorize(request: &Self::Request<'_>, need: &mut Need<'_>) -> Result<(), Failure>;

    /// The shard that serves the request.
    fn route<'r>(_request: &'r Self::Request<'_>) -> Route<'r> {
        Route::Here
    }

    /// The record bytes it asks to store (what a produce quota meters).
    fn produced_bytes(_request: &Self::Request<'_>) -> u64 {
        0
    }

    /// The client waits for no answer (acks none): none is sent, not even an error.
    fn silent(_request: &Self::Request<'_>) -> bool {
        false
    }

    /// The request could not be routed (counted as a failed produce or fetch).
    fn refused(_core: &Core, _request: &Self::Request<'_>, _caller: &Caller) {}

    /// Serves the request on the shard it routes to, writing the response body.
    async fn serve(s: &Services, request: Self::Request<'_>, at: &At<'_>, w: &mut Writer) -> Result<(), Failure>;
}

/// What an authorization asks the principal for, one (operation, resource) at a time.
pub type Need<'n> = dyn FnMut(Operation, Resource) -> Result<(), Failure> + 'n;

/// Where a request is served.
pub enum Route<'r> {
    /// On the shard that received it.
    Here,
    /// On the shard that owns the queue (`At::slot` names it there).
    Queue(&'r crate::protocol::messages::QueueRef),
    /// On the shard that coordinates the consumer group.
    Group(&'r str),
    /// On this shard of the node.
    Shard(usize),
}

/// Where a request is being served, and for whom.
pub struct At<'a> {
    pub caller: &'a Caller,
    slot: Option<QueueSlot>,
}

impl At<'_> {
    /// The queue a `Route::Queue` request is served on.
    pub fn slot(&self) -> Result<QueueSlot, Failure> {
        self.slot.ok_or_else(|| Failure(Reason::Internal, "a queue request was served without its queue".into()))
    }
}

/// What a served request sends back.
pub enum Reply {
    /// A successful response: its body after the room `frame::ok_response_buffer`
    /// leaves for the frame header, to fill in with the correlation id.
    Body(Vec<u8>),
    /// A complete response frame from the shard that served a forwarded request.
    Frame(Vec<u8>),
    /// Nothing (acks none).
    Nothing,
}

/// A request's outcome and how long its client's quota held it back.
pub struct Handled {
    pub outcome: Result<Reply, Failure>,
    pub throttle: Duration,
}

/// An API as the dispatcher and the docs see it (object safe).
pub trait Handler {
    fn key(&self) -> ApiKey;
    fn versions(&self) -> (u16, u16);
    fn bodies(&self) -> (&'static str, &'static str);
    fn by_connection(&self) -> bool;
    /// Whether a body decodes whole at `version` (tests, fuzzing).
    fn decodes(&self, version: u16, body: &[u8]) -> Result<(), Failure>;
    /// Decodes, checks, routes and serves a request; `frame` is the whole
    /// request frame (forwarded as is to the shard that serves it).
    fn handle<'a>(
        &'a self,
        s: &'a Services,
        version: u16,
        frame: &'a [u8],
        body: &'a [u8],
        caller: &'a Caller,
    ) -> LocalBoxFuture<'a, Handled>;
}

/// The `Handler` of an `Api`: the steps every request takes. (It holds no
/// value of its API, so it is `Sync` whatever the API: the table is a static.)
pub struct Entry<A>(PhantomData<fn() -> A>);

impl<A: Api> Handler for Entry<A> {
    fn key(&self) -> ApiKey {
        A::KEY
    }

    fn versions(&self) -> (u16, u16) {
        A::VERSIONS
    }

    fn bodies(&self) -> (&'static str, &'static str) {
        A::BODIES
    }

    fn by_connection(&self) -> bool {
        A::BY_CONNECTION
    }

    fn decodes(&self, version: u16, body: &[u8]) -> Result<(), Failure> {
        decode_whole::<A>(version, body).map(drop)
    }

    fn handle<'a>(
        &'a self,
        s: &'a Services,
        version: u16,
        frame: &'a [u8],
        body: &'a [u8],
        caller: &'a Caller,
    ) -> LocalBoxFuture<'a, Handled> {
        Box::pin(async move {
            let mut throttle = Duration::ZERO;
            let outcome = handle::<A>(s, version, frame, body, caller, &mut throttle).await;
            Handled { outcome, throttle }
        })
    }
}

/// Decodes a body whole (trailing bytes refused) before anything is
/// stored or parked.
pub fn decode_whole<A: Api>(version: u16, body: &[u8]) -> Result<A::Request<'_>, Failure> {
    let mut r = Reader::new(body);
    let request = A::decode(&mut r, version)?;
    r.finish()?;
    Ok(request)
}

/// Refuses a version the API does not serve, saying which it does
/// (UnsupportedVersion, on every path a request takes, SASL's too).
pub fn check_version(api: &dyn Handler, version: u16) -> Result<(), Failure> {
    let (min, max) = api.versions();
    if (min..=max).contains(&version) {
        return Ok(());
    }
    let m = format!("{:?} version {version} is not supported; this broker speaks {min}..={max}", api.key());
    Err(Failure(Reason::UnsupportedVersion, m))
}

async fn handle<A: Api>(
    s: &Services,
    version: u16,
    frame: &[u8],
    body: &[u8],
    caller: &Caller,
    throttle: &mut Duration,
) -> Result<Reply, Failure> {
    let core = &s.core;
    let request = decode_whole::<A>(version, body)?;
    A::check(&request, core)?;
    if let Caller::Client(principal) = caller {
        if core.config().auth.required {
            A::authorize(&request, &mut |operation, resource| principal.check(core, operation, resource))?;
        }
        // The native protocol names no client: quotas apply per user.
        *throttle = quotas::before(core, principal.user(), "", A::produced_bytes(&request)).await;
    }
    let silent = A::silent(&request);
    let served = route_and_serve::<A>(s, request, frame, caller).await;
    if silent {
        if let Err(failure) = served {
            tracing::debug!(shard = core.id(), %failure, "an acks-0 request failed");
        }
        return Ok(Reply::Nothing);
    }
    let body = match served? {
        Reply::Body(body) => body,
        forwarded => return Ok(forwarded),
    };
    if A::WRITES {
        // Whatever it stored on this shard (a feature's internal queues
        // too) is acknowledged once replicated as the group's mode asks.
        core.replicated_all().await?;
    }
    if let (true, Caller::Client(principal)) = (A::FETCHES, caller) {
        *throttle += quotas::after_fetch(core, principal.user(), "", body.len() as u64).await;
    }
    Ok(Reply::Body(body))
}

/// Serves the request where it routes: here, or forwarded to its shard.
async fn route_and_serve<A: Api>(
    s: &Services,
    request: A::Request<'_>,
    frame: &[u8],
    caller: &Caller,
) -> Result<Reply, Failure> {
    let core = &s.core;
    if !A::ANY_ROLE {
        serving_role(core)?;
    }
    let slot = match destination(core, A::route(&request)) {
        Ok(Destination::Here(slot)) => slot,
        Ok(Destination::Forward(shard)) => return forward(s, shard, frame).await,
        Err(refused) => {
            A::refused(core, &request, caller);
            return Err(refused);
        }
    };
    let mut w = Writer::new(frame::ok_response_buffer());
    A::serve(s, request, &At { caller, slot }, &mut w).await?;
    Ok(Reply::Body(w.buf))
}

/// NotLeader on a follower and a deposed leader.
fn serving_role(core: &Core) -> Result<(), Failure> {
    match core.role() {
        ShardRole::Follower { leader } => {
            let m = format!("this node follows {leader}, its broker group's leader: send requests there");
            Err(Failure(Reason::NotLeader, m))
        }
        ShardRole::Leader(replication) if replication.deposed() => {
            let m = "this node does not lead its broker group now (its lease lapsed, a new epoch began, or \
                     its epoch is still starting); refresh metadata";
            Err(Failure(Reason::NotLeader, m.into()))
        }
        _ => Ok(()),
    }
}

/// Where a routed request goes.
enum Destination {
    /// This shard serves it (on this queue, for a queue's request).
    Here(Option<QueueSlot>),
    /// This shard of the node serves it.
    Forward(usize),
}

fn destination(core: &Core, route: Route) -> Result<Destination, Failure> {
    let shard = match route {
        Route::Here => return Ok(Destination::Here(None)),
        Route::Queue(queue) => {
            let slot = core.locate(queue)?;
            if core.owns(slot) {
                return Ok(Destination::Here(Some(slot)));
            }
            slot.shard as usize
        }
        Route::Group(group) => core.coordinator(group)?,
        Route::Shard(shard) if shard >= core.shards() => {
            let m = format!("shard {shard} does not exist: this node runs {}", core.shards());
            return Err(Failure::invalid(m));
        }
        Route::Shard(shard) => shard,
    };
    Ok(if shard == core.id() { Destination::Here(None) } else { Destination::Forward(shard) })
}

/// Serves the request on `shard`; its response frame travels back as is.
async fn forward(s: &Services, shard: usize, frame: &[u8]) -> Result<Reply, Failure> {
    let reply = s.core.mesh().forward(shard, frame.to_vec()).await?;
    Ok(if reply.is_empty() { Reply::Nothing } else { Reply::Frame(reply) })
}

/// Refuses a wait longer than the broker's limit `name`.
fn check_wait(field: &str, wait_ms: u32, max: Duration, name: &str) -> Result<(), Failure> {
    if u128::from(wait_ms) <= max.as_millis() {
        return Ok(());
    }
    let m = format!("{field} {wait_ms} exceeds the broker's {name} of {} ms; ask for less", max.as_millis());
    Err(Failure::invalid(m))
}

/// Refuses acks other than none (0) and durable (1).
fn check_acks(acks: u8) -> Result<(), Failure> {
    use crate::protocol::messages::{ACKS_DURABLE, ACKS_NONE};
    if acks == ACKS_NONE || acks == ACKS_DURABLE {
        return Ok(());
    }
    Err(Failure::invalid(format!("acks must be 0 (none) or 1 (durable), not {acks}")))
}

/// PROTOCOL.md's API table, made from `TABLE`.
pub fn markdown_table() -> String {
    let mut table =
        String::from("| key | API | versions | request body | response body |\n| --- | --- | --- | --- | --- |\n");
    for api in TABLE {
        let ((min, max), (request, response)) = (api.versions(), api.bodies());
        let versions = if min == max { min.to_string() } else { format!("{min}-{max}") };
        table += &format!("| {} | {:?} | {versions} | {request} | {response} |\n", api.key() as u16, api.key());
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::messages::{Membership, Produce, QueueRef, ACKS_DURABLE};

    fn body(encode: impl FnOnce(&mut Writer)) -> Vec<u8> {
        let mut w = Writer::default();
        encode(&mut w);
        w.buf
    }

    fn decodes(api: ApiKey, body: &[u8]) -> Result<(), Failure> {
        find(api as u16).expect("every key has an API").decodes(0, body)
    }

    #[test]
    fn the_table_holds_every_api_in_wire_order() {
        assert_eq!(TABLE.len(), ApiKey::ALL.len());
        for (api, key) in TABLE.iter().zip(ApiKey::ALL) {
            assert_eq!(api.key(), *key);
        }
        assert!(find(ApiKey::ALL.len() as u16).is_none());
    }

    #[test]
    fn protocol_md_lists_the_table() {
        crate::doc_tables::assert_lists("docs/PROTOCOL.md", &markdown_table());
    }

    #[test]
    fn a_whole_body_decodes_and_one_trailing_byte_does_not() {
        let queue = QueueRef { topic: "t".into(), queue: 1 };
        let produce = body(|w| Produce { queue: queue.clone(), acks: ACKS_DURABLE, batches: vec![b"x"] }.encode(w));
        let heartbeat = body(|w| {
            Membership { group: "g".into(), generation: 1, member: "m".into() }.encode(w);
            w.u32(100);
        });
        let poll = body(|w| {
            w.string("g").u32(5);
        });
        for (api, good) in [(ApiKey::Produce, produce), (ApiKey::Heartbeat, heartbeat), (ApiKey::PollChecks, poll)] {
            assert!(decodes(api, &good).is_ok(), "{api:?} decodes");
            let mut long = good.clone();
            long.push(0);
            let refused = decodes(api, &long).expect_err("trailing bytes");
            assert_eq!(
                refused,
                Failure(Reason::Malformed, "malformed body: trailing bytes after the body".into()),
                "{api:?}"
            );
        }
        assert!(decodes(ApiKey::ApiVersions, &[0]).is_err(), "an empty body means empty");
    }

    proptest::proptest! {
        /// Whatever a client sends, every API's decoder answers Ok or Err.
        #[test]
        fn no_body_makes_a_decoder_panic(api in 0..TABLE.len(), bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..256)) {
            let _ = TABLE[api].decodes(0, &bytes);
        }

        /// Short counts and lengths inside an otherwise plausible body are refused, not trusted.
        #[test]
        fn a_truncated_body_is_refused(api in 0..TABLE.len(), cut in 1usize..64) {
            let queue = QueueRef { topic: "topic".into(), queue: 3 };
            let good = body(|w| Produce { queue, acks: ACKS_DURABLE, batches: vec![&[7; 80], b"ab"] }.encode(w));
            let keep = good.len().saturating_sub(cut);
            proptest::prop_assert!(decodes(ApiKey::Produce, &good[..keep]).is_err());
            let _ = TABLE[api].decodes(0, &good[..keep]);
        }
    }
}
