//! Serves one request frame on the shard that received it: the header is
//! checked, the body decoded whole into a typed request and checked against
//! the broker's limits, then the request is routed (a queue's request to its
//! owner, a group's to its coordinator, both as the client's own frame over
//! the mesh) and served by the core service or its feature; the answer is
//! encoded here. A refused request stores nothing.

use super::{authorize, Services};
use crate::protocol::frame::{self, RequestHeader};
use crate::protocol::groups::encode_listings;
use crate::protocol::messages::{self as msg, Assignment, Joined};
use crate::protocol::request::Request;
use crate::protocol::security::{encode_acls, encode_quotas};
use crate::protocol::{ApiKey, ErrorCode, Writer};
use crate::security::acl::Operation;
use crate::security::change::AccountsChange;
use crate::server::auth::{
    self,
    authorizer::{self, Principal},
};
use crate::server::core::context::ShardRole;
use crate::server::core::metadata::QueueSlot;
use crate::server::core::traffic::{Direction, Tally};
use crate::server::core::Core;
use crate::server::core::Failure;
use crate::server::data::{fetch, lookup, produce};
use crate::server::delay::retry;
use crate::server::groups::coordinator::{JoinRequest, NATIVE};
use crate::server::replica;
use std::rc::Rc;
use std::time::Duration;

/// What a served request sends back.
enum Reply {
    /// A successful response: its body after the room `frame::ok_response_buffer`
    /// leaves for the frame header, to fill in with this request's correlation id.
    Body(Vec<u8>),
    /// A complete response frame from the shard that served a forwarded request.
    Frame(Vec<u8>),
    /// Nothing (a produce with acks none).
    Nothing,
}

type Outcome = Result<Reply, Failure>;

/// Who sent a request.
#[derive(Debug, Clone)]
pub enum Caller {
    /// A client connection of this shard: who it authenticated as.
    Client(Rc<Principal>),
    /// Another shard, forwarding a client's request it already checked.
    Shard,
}

impl Caller {
    /// Whether the caller sees `topic` in a listing.
    fn sees(&self, core: &Core, topic: &str) -> bool {
        match self {
            Caller::Client(principal) => authorize::visible(core, principal, topic),
            Caller::Shard => true,
        }
    }

    /// Whether the caller sees consumer group `group` in a listing.
    fn sees_group(&self, core: &Core, group: &str) -> bool {
        match self {
            Caller::Client(principal) => authorize::visible_group(core, principal, group),
            Caller::Shard => true,
        }
    }

    /// Whether the caller may read messages of `topic` (a lookup by id).
    fn reads(&self, core: &Core, topic: &str) -> bool {
        match self {
            Caller::Client(principal) => principal.allows(core, Operation::Read, authorizer::topic(topic)),
            Caller::Shard => true,
        }
    }
}

/// Serves a request frame (length prefix included). None: no response (acks none).
pub async fn handle(s: &Services, frame: Vec<u8>, caller: &Caller) -> Option<Vec<u8>> {
    let (response, api) = respond(s, frame, caller).await;
    if let Caller::Client(_) = caller {
        // Counted where the client's request arrived (a forwarded one is not counted again).
        let error = response.as_deref().map(frame::response_error).filter(|code| *code != ErrorCode::None);
        s.core.traffic().request(api.map_or("(unknown)", ApiKey::name), error.map(ErrorCode::name));
    }
    response
}

async fn respond(s: &Services, frame: Vec<u8>, caller: &Caller) -> (Option<Vec<u8>>, Option<ApiKey>) {
    let (header, body) = match RequestHeader::parse(&frame[4..]) {
        Ok(parsed) => parsed,
        Err(e) => return (Some(frame::response(0, ErrorCode::Malformed, &e.to_string(), &[])), None),
    };
    let corr = header.correlation_id;
    let Some(api) = ApiKey::from_wire(header.api_key) else {
        let m = format!("unknown API key {}", header.api_key);
        return (Some(frame::response(corr, ErrorCode::UnknownApi, &m, &[])), None);
    };
    if let Err(m) = api.check_version(header.api_version) {
        return (Some(frame::response(corr, ErrorCode::UnsupportedVersion, &m, &[])), Some(api));
    }
    let mut throttle = Duration::ZERO;
    let mut response = match serve(s, (api, header.api_version), body, &frame, caller, &mut throttle).await {
        Ok(Reply::Body(buf)) => frame::finish_ok_response(corr, buf),
        Ok(Reply::Frame(frame)) => frame,
        Ok(Reply::Nothing) => return (None, Some(api)),
        Err(Failure(code, m)) => frame::response(corr, code, &m, &[]),
    };
    if !throttle.is_zero() {
        frame::set_throttle(&mut response, throttle.as_millis().min(u128::from(u32::MAX)) as u32);
    }
    (Some(response), Some(api))
}

/// The slot of a queue this shard owns; for a queue another shard owns,
/// returns that shard's reply to the forwarded request from the caller.
macro_rules! on_owner {
    ($s:expr, $queue:expr, $frame:expr) => {
        match here_or_forward($s, $queue, $frame).await? {
            Served::Here(slot) => slot,
            Served::Elsewhere(reply) => return Ok(reply),
        }
    };
}

/// Serves a request; `throttle` is how long its client's quota held it back.
async fn serve(
    s: &Services,
    (api, version): (ApiKey, u16),
    body: &[u8],
    frame: &[u8],
    caller: &Caller,
    throttle: &mut Duration,
) -> Outcome {
    // Decoded and checked whole before anything is stored or parked.
    let request = Request::decode(api, version, body)?;
    check_limits(s, &request)?;
    let Caller::Client(principal) = caller else { return serve_checked(s, request, frame, caller).await };
    authorize::authorize(&s.core, &request, principal)?;
    // The native protocol names no client: quotas apply per user.
    *throttle = auth::quotas::before(&s.core, principal.user(), "", request.produced_bytes()).await;
    let fetches = request.fetches();
    let reply = serve_checked(s, request, frame, caller).await?;
    if let (true, Reply::Body(body)) = (fetches, &reply) {
        *throttle += auth::quotas::after_fetch(&s.core, principal.user(), "", body.len() as u64).await;
    }
    Ok(reply)
}

/// Serves a request that passed its checks.
async fn serve_checked(s: &Services, request: Request<'_>, frame: &[u8], caller: &Caller) -> Outcome {
    if request.acks() == Some(msg::ACKS_NONE) {
        // Acks none: no response at all, not even for an error (the client reads none).
        if let Err(failure) = serve_request(s, request, frame, caller).await {
            tracing::debug!(shard = s.core.id(), %failure, "an acks-0 produce failed");
        }
        return Ok(Reply::Nothing);
    }
    let writes = request.writes();
    let reply = serve_request(s, request, frame, caller).await?;
    if writes && matches!(reply, Reply::Body(_)) {
        // Whatever it stored on this shard (a feature's internal queues
        // too) is acknowledged once replicated as the group's mode asks.
        let (_, written_end, _) = s.core.storage().log_positions();
        s.core.replicated(written_end).await?;
    }
    Ok(reply)
}

/// Refuses a request that asks for more than the broker allows: a wait past
/// its maximum, acks other than 0 and 1, a session longer than a group wait.
fn check_limits(s: &Services, request: &Request) -> Result<(), Failure> {
    let config = s.core.config();
    if let Some((field, wait_ms)) = request.wait_ms() {
        let (max, name) = match request {
            Request::Heartbeat { .. } => (config.max_group_wait, "max_group_wait"),
            _ => (config.max_fetch_wait, "max_fetch_wait"),
        };
        if u128::from(wait_ms) > max.as_millis() {
            let m = format!("{field} {wait_ms} exceeds the broker's {name} of {} ms; ask for less", max.as_millis());
            return Err(Failure::invalid(m));
        }
    }
    if let Some(acks) = request.acks() {
        if acks != msg::ACKS_NONE && acks != msg::ACKS_DURABLE {
            return Err(Failure::invalid(format!("acks must be 0 (none) or 1 (durable), not {acks}")));
        }
    }
    if let Request::JoinGroup(j) = request {
        let max = config.max_group_wait;
        for (field, ms) in [("rebalance timeout", j.rebalance_timeout_ms), ("session timeout", j.session_timeout_ms)] {
            if u128::from(ms) > max.as_millis() {
                let m = format!("{field} of {ms} ms exceeds the broker's max_group_wait of {} ms", max.as_millis());
                return Err(Failure::invalid(m));
            }
        }
    }
    Ok(())
}

async fn serve_request(s: &Services, request: Request<'_>, frame: &[u8], caller: &Caller) -> Outcome {
    let core = &s.core;
    let mut w = Writer::new(frame::ok_response_buffer());
    if !matches!(request, Request::ApiVersions) {
        match core.role() {
            ShardRole::Follower { leader } => {
                let m = format!("this node follows {leader}, its broker group's leader: send requests there");
                return Err(Failure(ErrorCode::NotLeader, m));
            }
            ShardRole::Leader(replication) if replication.deposed() => {
                let m = "this node does not lead its broker group now (its lease lapsed, a new epoch began, or \
                         its epoch is still starting); refresh metadata";
                return Err(Failure(ErrorCode::NotLeader, m.into()));
            }
            _ => {}
        }
    }
    if alters_accounts(&request) && core.id() != 0 {
        // Users, ACLs and quotas are changed on shard 0 (which stores them, or asks etcd to).
        return forward(s, 0, frame).await;
    }
    if let Some(group) = request.group() {
        let coordinator = core.coordinator(group)?;
        if coordinator != core.id() {
            return forward(s, coordinator, frame).await;
        }
        serve_group(s, request, &mut w).await?;
        return Ok(Reply::Body(w.buf));
    }
    match request {
        Request::ApiVersions => {
            w.u32(ApiKey::ALL.len() as u32);
            for &k in ApiKey::ALL {
                let (min, max) = k.versions();
                w.u16(k as u16).u16(min).u16(max);
            }
        }
        Request::Metadata(names) => {
            let metadata = core.metadata();
            if let Some(unknown) = names.iter().find(|n| !metadata.topics.contains_key(*n)) {
                return Err(Failure::unknown_topic(unknown));
            }
            let mut described = core.describe(&names);
            described.topics.retain(|t| caller.sees(core, &t.name));
            described.encode(&mut w);
        }
        Request::ListTopics => {
            let names: Vec<String> = core.metadata().topics.keys().filter(|t| caller.sees(core, t)).cloned().collect();
            msg::encode_names(&names, &mut w);
        }
        Request::CreateTopic(req) => core.create_topic(req).await?,
        Request::DeleteTopic(name) => core.delete_topic(&name).await?,
        Request::Produce(p) => {
            let slot = match here_or_forward(s, &p.queue, frame).await {
                Ok(Served::Here(slot)) => slot,
                Ok(Served::Elsewhere(reply)) => return Ok(reply),
                Err(refused) => {
                    produced(core, caller, "Produce", &p.queue, &p.batches, None);
                    return Err(refused);
                }
            };
            let stored = produce::produce(core, slot, &p.batches).await;
            produced(core, caller, "Produce", &p.queue, &p.batches, stored.as_deref().ok());
            msg::encode_produced(&stored?, &mut w);
        }
        Request::ProduceMany(p) => {
            let outcomes = produce::produce_many(core, &p.entries).await;
            for ((queue, batch), outcome) in p.entries.iter().zip(&outcomes) {
                let stored = outcome.as_ref().ok().map(std::slice::from_ref);
                produced(core, caller, "ProduceMany", queue, std::slice::from_ref(batch), stored);
            }
            msg::encode_produced_many(&outcomes, &mut w)
        }
        Request::Fetch(f) => {
            let slot = match here_or_forward(s, &f.queue, frame).await {
                Ok(Served::Here(slot)) => slot,
                Ok(Served::Elsewhere(reply)) => return Ok(reply),
                Err(refused) => {
                    fetched(core, "Fetch", &f, None, None);
                    return Err(refused);
                }
            };
            let wait = Duration::from_millis(u64::from(f.max_wait_ms));
            let read = fetch::read_queue(core, slot, &f, wait).await;
            fetched(core, "Fetch", &f, read.as_ref().ok(), None);
            let read = read.map_err(|f| Failure(f.code, f.message))?;
            read.fetched().encode(&mut w);
        }
        Request::FetchMany(f) => {
            let wait = Duration::from_millis(u64::from(f.max_wait_ms));
            let reads = fetch::fetch_many(core, &f.entries, wait).await;
            for (entry, read) in f.entries.iter().zip(&reads) {
                fetched(core, "FetchMany", entry, read.as_ref().ok(), f.consumer.as_ref());
            }
            let outcomes: Vec<_> =
                reads.iter().map(|o| o.as_ref().map(fetch::QueueRead::fetched).map_err(Clone::clone)).collect();
            // Sized once: growing to a megabyte copied it several times.
            let batches: usize = outcomes.iter().flatten().map(|f| f.batches.len()).sum();
            w.buf.reserve(batches + 64 * outcomes.len());
            msg::encode_fetched_many(&outcomes, &mut w);
        }
        Request::ListOffsets(q) => {
            let slot = on_owner!(s, &q, frame);
            let (start, end) = core.storage().offsets(ringmq_shards::QueueId(slot.storage_id))?;
            w.u64(start).u64(end);
        }
        Request::ProduceDelayed(p) => {
            on_owner!(s, &p.queue, frame);
            let (due_ms, count) = s.timer.produce_delayed(&p).await?;
            w.u64(due_ms).u32(count);
        }
        Request::LookupMessages(query) => {
            let mut looked_up = lookup::lookup(core, &query).await?;
            looked_up.found.retain(|(topic, ..)| caller.reads(core, topic));
            looked_up.encode(&mut w);
        }
        Request::ProduceHalf(t) => {
            on_owner!(s, &t.queue, frame);
            w.u64(s.transactions.produce_half(&t).await?);
        }
        Request::EndTransaction(t) => {
            on_owner!(s, &t.queue, frame);
            w.u8(s.transactions.end_requested(t.half, t.commit).await?);
        }
        Request::PollChecks { group, wait_ms } => {
            let wait = Duration::from_millis(u64::from(wait_ms));
            let found = s.transactions.poll_checks(&group, wait).await?;
            w.u32(found.len() as u32);
            for (half, topic, queue, batch) in &found {
                w.u64(*half).string(topic).u32(*queue).bytes(batch);
            }
        }
        Request::SendBack(req) => {
            let slot = on_owner!(s, &req.queue, frame);
            retry::send_back(core, &req, slot, s.timer.send_backs()).await?.encode(&mut w);
        }
        Request::ReplicaFetch(f) => {
            let shard = f.shard as usize;
            if shard >= core.shards() {
                return Err(Failure::invalid(format!(
                    "shard {shard} does not exist: this node runs {}",
                    core.shards()
                )));
            }
            if shard != core.id() {
                return forward(s, shard, frame).await;
            }
            replica::leader::serve_fetch(core, &f, &mut w).await?;
        }
        Request::AlterUser(change) => {
            auth::admin::change(core, AccountsChange::User(change)).await?;
        }
        Request::ListUsers => auth::admin::users(core).encode(&mut w),
        Request::CreateAcls(rules) => {
            auth::admin::change(core, AccountsChange::AddAcls(rules)).await?;
        }
        Request::DeleteAcls(filter) => {
            w.u32(auth::admin::change(core, AccountsChange::RemoveAcls(filter)).await?);
        }
        Request::ListAcls(filter) => encode_acls(&auth::admin::acls(core, &filter), &mut w),
        Request::AlterQuotas(entry) => {
            auth::admin::change(core, AccountsChange::Quota(entry)).await?;
        }
        Request::ListQuotas => encode_quotas(&auth::admin::quotas(core), &mut w),
        Request::ListGroups => {
            // This shard's groups only: a client asks every shard (`Client::list_groups`).
            let mut groups = s.groups.list();
            groups.retain(|g| caller.sees_group(core, &g.group));
            encode_listings(&groups, &mut w);
        }
        Request::SaslHandshake(_) | Request::SaslAuthenticate(_) => {
            return Err(Failure::invalid("SASL requests are served by the connection, not forwarded"));
        }
        Request::AdvanceClock(ms) => {
            if !core.clock().advance(ms) {
                return Err(Failure::invalid("the broker's clock is not manual (--manual-clock)"));
            }
        }
        Request::CommitOffset(_)
        | Request::FetchOffset { .. }
        | Request::JoinGroup(_)
        | Request::SyncGroup(_)
        | Request::Heartbeat { .. }
        | Request::LeaveGroup(_)
        | Request::LockQueues(_)
        | Request::UnlockQueues(_)
        | Request::DescribeGroup(_) => unreachable!("group requests are served above"),
    }
    Ok(Reply::Body(w.buf))
}

/// Counts a produce of `batches` to a queue, and traces what it stored;
/// `stored`: each batch's base offset and record count, if stored.
fn produced(
    core: &Core,
    caller: &Caller,
    api: &'static str,
    q: &msg::QueueRef,
    batches: &[&[u8]],
    stored: Option<&[(u64, u32)]>,
) {
    let bytes = batches.iter().map(|b| b.len() as u64).sum();
    let messages = stored.map_or(0, |s| s.iter().map(|(_, n)| u64::from(*n)).sum());
    core.count_traffic(Direction::Produce, api, &q.topic, Tally { messages, bytes, failed: stored.is_none() });
    if let (true, Some(stored)) = (core.trace().is_on(), stored) {
        let client = match caller {
            Caller::Client(principal) => principal.client(),
            Caller::Shard => "(forwarded by another shard)".to_string(),
        };
        for (batch, (base, _)) in batches.iter().zip(stored) {
            core.trace_stored(q, *base, batch, &client);
        }
    }
}

/// Counts a fetch of one queue and traces what it delivered to `consumer`
/// (group, member); `read`: what it read, if it did.
fn fetched(
    core: &Core,
    api: &'static str,
    f: &msg::Fetch,
    read: Option<&fetch::QueueRead>,
    consumer: Option<&(String, String)>,
) {
    let served = match read.map(fetch::QueueRead::fetched) {
        Some(r) => {
            let (group, member) = consumer.map_or(("", ""), |(g, m)| (g.as_str(), m.as_str()));
            core.trace_delivered(&f.queue, r.batches, f.offset, group, member);
            Tally { messages: r.next_offset.saturating_sub(f.offset), bytes: r.batches.len() as u64, failed: false }
        }
        None => Tally { failed: true, ..Tally::default() },
    };
    core.count_traffic(Direction::Fetch, api, &f.queue.topic, served);
}

fn alters_accounts(request: &Request) -> bool {
    matches!(request, Request::AlterUser(_) | Request::CreateAcls(_) | Request::DeleteAcls(_) | Request::AlterQuotas(_))
}

/// Serves a group request on its coordinator.
async fn serve_group(s: &Services, request: Request<'_>, w: &mut Writer) -> Result<(), Failure> {
    let groups = &s.groups;
    match request {
        Request::CommitOffset(c) => groups.commit(&c).await?,
        Request::FetchOffset { group, queue } => {
            w.u64(groups.committed(&group, &queue));
        }
        Request::JoinGroup(j) => {
            let req = JoinRequest {
                member: j.member,
                client_id: j.client_id,
                session_timeout_ms: j.session_timeout_ms,
                rebalance_timeout_ms: j.rebalance_timeout_ms,
                protocol_type: NATIVE.into(),
                protocols: vec![(NATIVE.into(), j.metadata)],
            };
            let f = groups.join(&j.group, req).await?;
            Joined { generation: f.generation, member: f.member, leader: f.leader, members: f.members }.encode(w)
        }
        Request::SyncGroup(sync) => {
            let parse = |b: &[u8]| Assignment::decode(b).map_err(|e| e.to_string());
            let share = groups.sync(&sync.member, &sync.assignments, parse).await?;
            // A member the leader left out gets no queues (the coordinator hands out no bytes).
            let bytes = if share.bytes.is_empty() { Assignment::default().encode() } else { share.bytes };
            w.bytes(&bytes);
        }
        Request::LockQueues(l) => groups.lock(&l).into_iter().for_each(|held| {
            w.u8(u8::from(held));
        }),
        Request::UnlockQueues(l) => groups.unlock(&l),
        Request::Heartbeat { member, wait_ms } => {
            groups.heartbeat(&member, Duration::from_millis(u64::from(wait_ms))).await?;
        }
        Request::LeaveGroup(who) => groups.leave(&who)?,
        Request::DescribeGroup(group) => groups.describe(&group).encode(w),
        other => unreachable!("{other:?} is not a group request"),
    }
    Ok(())
}

/// Where a queue's request was served.
enum Served {
    /// This shard owns the queue: serve it from this slot.
    Here(QueueSlot),
    /// Another shard owns it and answered the forwarded request.
    Elsewhere(Reply),
}

/// Resolves the queue; serves the request on its owner if that is another shard.
async fn here_or_forward(s: &Services, q: &msg::QueueRef, frame: &[u8]) -> Result<Served, Failure> {
    let slot = s.core.locate(q)?;
    if s.core.owns(slot) {
        return Ok(Served::Here(slot));
    }
    forward(s, slot.shard as usize, frame).await.map(Served::Elsewhere)
}

/// Serves the request on `shard`; its response frame travels back as is.
async fn forward(s: &Services, shard: usize, frame: &[u8]) -> Outcome {
    let reply = s.core.mesh().forward(shard, frame.to_vec()).await?;
    Ok(if reply.is_empty() { Reply::Nothing } else { Reply::Frame(reply) })
}
