//! Serves one request frame on the shard that received it: requests for
//! queues owned elsewhere are forwarded over the mesh, metadata changes go to
//! shard 0, everything else is served from this shard's storage.

use super::group_api;
use super::groups::Refusal;
use super::metadata::{self, Metadata, QueueSlot, QUEUES_MAX};
use super::retry;
use super::shard_server::ShardCtx;
use super::tag_filter::{self, TagFilter};
use crate::protocol::frame::{self, RequestHeader};
use crate::protocol::messages::{self as msg, CreateTopic, Fetch, FetchFailed, Fetched, Produce, QueueRef};
use crate::protocol::request::Request;
use crate::protocol::{coordinator_of, ApiKey, DecodeError, ErrorCode, Reader, Writer};
use ringmq_shards::{FlushPolicy, QueueId, ReadWait, StorageError};
use std::rc::Rc;
use std::time::Duration;

/// A failed request: the code and a message a user can act on.
pub struct Failure(pub ErrorCode, pub String);

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}: {}", self.0, self.1)
    }
}

impl From<DecodeError> for Failure {
    fn from(e: DecodeError) -> Self {
        Failure(ErrorCode::Malformed, e.to_string())
    }
}

impl From<Refusal> for Failure {
    fn from((code, message): Refusal) -> Self {
        Failure(code, message)
    }
}

impl From<StorageError> for Failure {
    fn from(e: StorageError) -> Self {
        let code = match &e {
            StorageError::BatchTooShort { .. } | StorageError::LengthMismatch { .. } | StorageError::Malformed(_) => {
                ErrorCode::InvalidBatch
            }
            StorageError::BatchTooLarge { .. } => ErrorCode::BatchTooLarge,
            StorageError::CrcMismatch { .. } => ErrorCode::CrcMismatch,
            StorageError::UnknownQueue(_) => ErrorCode::UnknownQueue,
            StorageError::OffsetOutOfRange { .. } => ErrorCode::OffsetOutOfRange,
            StorageError::Closed => ErrorCode::ShuttingDown,
            StorageError::CorruptBatch { .. } => ErrorCode::CorruptData,
            StorageError::Full { .. } => ErrorCode::StorageFull,
            e if e.is_no_space() => ErrorCode::StorageFull,
            StorageError::Failed(_) | StorageError::Io { .. } | StorageError::Corruption { .. } => {
                ErrorCode::StorageFailed
            }
            StorageError::QueueExists(_) | StorageError::Config(_) => ErrorCode::Internal,
        };
        Failure(code, e.to_string())
    }
}

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

/// Serves a request frame (length prefix included). None: no response (acks none).
pub async fn handle(ctx: &Rc<ShardCtx>, frame: Vec<u8>) -> Option<Vec<u8>> {
    let (header, body) = match RequestHeader::parse(&frame[4..]) {
        Ok(parsed) => parsed,
        Err(e) => return Some(frame::response(0, ErrorCode::Malformed, &e.to_string(), &[])),
    };
    let corr = header.correlation_id;
    let Some(api) = ApiKey::from_wire(header.api_key) else {
        return Some(frame::response(corr, ErrorCode::UnknownApi, &format!("unknown API key {}", header.api_key), &[]));
    };
    let (min, max) = api.versions();
    if header.api_version < min || header.api_version > max {
        let m = format!("{api:?} version {} is not supported; this broker speaks {min}..={max}", header.api_version);
        return Some(frame::response(corr, ErrorCode::UnsupportedVersion, &m, &[]));
    }
    let outcome = serve(ctx, api, body, &frame).await;
    match outcome {
        Ok(Reply::Body(buf)) => Some(frame::finish_ok_response(corr, buf)),
        Ok(Reply::Frame(frame)) => Some(frame),
        Ok(Reply::Nothing) => None,
        Err(Failure(code, m)) => Some(frame::response(corr, code, &m, &[])),
    }
}

/// The slot of a queue this shard owns; for a queue another shard owns,
/// returns that shard's reply to the forwarded request from the caller.
macro_rules! on_owner {
    ($ctx:expr, $queue:expr, $frame:expr) => {
        match here_or_forward($ctx, $queue, $frame).await? {
            Served::Here(slot) => slot,
            Served::Elsewhere(reply) => return Ok(reply),
        }
    };
}

async fn serve(ctx: &Rc<ShardCtx>, api: ApiKey, body: &[u8], frame: &[u8]) -> Outcome {
    // Decoded and checked whole before anything is stored or parked.
    let request = Request::decode(api, body)?;
    check_limits(ctx, &request)?;
    if request.acks() == Some(msg::ACKS_NONE) {
        // Acks none: no response at all, not even for an error (the client reads none).
        if let Err(failure) = serve_request(ctx, request, frame).await {
            tracing::debug!(shard = ctx.id, %failure, "an acks-0 produce failed");
        }
        return Ok(Reply::Nothing);
    }
    serve_request(ctx, request, frame).await
}

/// Refuses a request that asks for more than the broker allows: a wait past
/// its maximum, acks other than 0 and 1, a session longer than a group wait.
fn check_limits(ctx: &ShardCtx, request: &Request) -> Result<(), Failure> {
    if let Some((field, wait_ms)) = request.wait_ms() {
        let (max, name) = match request {
            Request::Heartbeat { .. } => (ctx.config.max_group_wait, "max_group_wait"),
            _ => (ctx.config.max_fetch_wait, "max_fetch_wait"),
        };
        if u128::from(wait_ms) > max.as_millis() {
            let m = format!("{field} {wait_ms} exceeds the broker's {name} of {} ms; ask for less", max.as_millis());
            return Err(Failure(ErrorCode::InvalidRequest, m));
        }
    }
    if let Some(acks) = request.acks() {
        if acks != msg::ACKS_NONE && acks != msg::ACKS_DURABLE {
            return Err(Failure(
                ErrorCode::InvalidRequest,
                format!("acks must be 0 (none) or 1 (durable), not {acks}"),
            ));
        }
    }
    if let Request::JoinGroup(j) = request {
        let max = ctx.config.max_group_wait;
        for (field, ms) in [("rebalance timeout", j.rebalance_timeout_ms), ("session timeout", j.session_timeout_ms)] {
            if u128::from(ms) > max.as_millis() {
                let m = format!("{field} of {ms} ms exceeds the broker's max_group_wait of {} ms", max.as_millis());
                return Err(Failure(ErrorCode::InvalidRequest, m));
            }
        }
    }
    Ok(())
}

async fn serve_request(ctx: &Rc<ShardCtx>, request: Request<'_>, frame: &[u8]) -> Outcome {
    let mut w = Writer::new(frame::ok_response_buffer());
    if let Some(group) = request.group() {
        let coordinator = coordinator_of(group, ctx.mesh.peers());
        if coordinator != ctx.id {
            return forward(ctx, coordinator, frame).await;
        }
        group_api::serve(ctx, request, &mut w).await?;
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
            let metadata = ctx.metadata();
            if let Some(unknown) = names.iter().find(|n| !metadata.topics.contains_key(*n)) {
                return Err(unknown_topic(unknown));
            }
            metadata.describe(&ctx.addrs, &names).encode(&mut w);
        }
        Request::ListTopics => {
            msg::encode_names(&ctx.metadata().topics.keys().cloned().collect::<Vec<_>>(), &mut w);
        }
        Request::CreateTopic(_) | Request::DeleteTopic(_) if ctx.id != 0 => return forward(ctx, 0, frame).await,
        Request::CreateTopic(req) => create_topic(ctx, req).await?,
        Request::DeleteTopic(name) => delete_topic(ctx, &name).await?,
        Request::Produce(p) => {
            let slot = on_owner!(ctx, &p.queue, frame);
            // Every batch is checked before any is stored: a refused request stores nothing.
            for b in &p.batches {
                ringmq_shards::batch::check(b, ctx.config.max_batch_bytes)?;
            }
            let appends = p.batches.iter().map(|b| ctx.storage.append(QueueId(slot.storage_id), b));
            let mut results = Vec::with_capacity(p.batches.len());
            for appended in ringmq_shards::join_all(appends.collect()).await {
                let a = appended?;
                results.push((a.base_offset, a.record_count));
            }
            msg::encode_produced(&results, &mut w);
        }
        Request::ProduceMany(p) => {
            // Entries start in order, so each queue's batches are placed in request order.
            let appends = p.entries.iter().map(|(queue, batch)| produce_entry(ctx, queue, batch));
            let outcomes = ringmq_shards::join_all(appends.collect()).await;
            msg::encode_produced_many(&outcomes, &mut w);
        }
        Request::Fetch(f) => {
            let slot = on_owner!(ctx, &f.queue, frame);
            let wait = Duration::from_millis(u64::from(f.max_wait_ms));
            let read = read_queue(ctx, slot, &f, wait).await.map_err(|f| Failure(f.code, f.message))?;
            read.fetched().encode(&mut w);
        }
        Request::FetchMany(f) => {
            let wait = Duration::from_millis(u64::from(f.max_wait_ms));
            let reads = fetch_many(ctx, &f.entries, wait).await;
            let outcomes: Vec<_> =
                reads.iter().map(|o| o.as_ref().map(QueueRead::fetched).map_err(Clone::clone)).collect();
            // Sized once: growing to a megabyte copied it several times.
            let batches: usize = outcomes.iter().flatten().map(|f| f.batches.len()).sum();
            w.buf.reserve(batches + 64 * outcomes.len());
            msg::encode_fetched_many(&outcomes, &mut w);
        }
        Request::ListOffsets(q) => {
            let slot = on_owner!(ctx, &q, frame);
            let (start, end) = ctx.storage.offsets(QueueId(slot.storage_id))?;
            w.u64(start).u64(end);
        }
        Request::ProduceDelayed(p) => {
            on_owner!(ctx, &p.queue, frame);
            let (due_ms, count) = super::timer::produce_delayed(ctx, &p).await?;
            w.u64(due_ms).u32(count);
        }
        Request::LookupMessages(query) => super::lookup::lookup(ctx, &query).await?.encode(&mut w),
        Request::ProduceHalf(t) => {
            on_owner!(ctx, &t.queue, frame);
            w.u64(super::transactions::produce_half(ctx, &t).await?);
        }
        Request::EndTransaction(t) => {
            on_owner!(ctx, &t.queue, frame);
            w.u8(super::transactions::end_requested(ctx, t.half, t.commit).await?);
        }
        Request::PollChecks { group, wait_ms } => {
            let wait = Duration::from_millis(u64::from(wait_ms));
            super::transactions::poll_checks(ctx, &group, wait, &mut w).await?
        }
        Request::SendBack(req) => {
            let slot = on_owner!(ctx, &req.queue, frame);
            retry::send_back(ctx, &req, slot.storage_id).await?.encode(&mut w);
        }
        Request::AdvanceClock(ms) => {
            if !ctx.clock.advance(ms) {
                return Err(Failure(
                    ErrorCode::InvalidRequest,
                    "the broker's clock is not manual (--manual-clock)".into(),
                ));
            }
        }
        Request::CommitOffset(_)
        | Request::FetchOffset { .. }
        | Request::JoinGroup(_)
        | Request::SyncGroup(_)
        | Request::Heartbeat { .. }
        | Request::LeaveGroup(_)
        | Request::LockQueues(_)
        | Request::UnlockQueues(_) => unreachable!("group requests are served above"),
    }
    Ok(Reply::Body(w.buf))
}

/// The records of a client's batch, after checking its length, CRC and
/// records against the broker's limits.
pub fn checked_records<'a>(ctx: &ShardCtx, batch: &'a [u8]) -> Result<Vec<ringmq_shards::Record<'a>>, Failure> {
    ringmq_shards::batch::check(batch, ctx.config.max_batch_bytes)?;
    let body = &batch[ringmq_shards::batch::HEADER_BYTES..];
    Ok(ringmq_shards::record::RecordIter::new(body).collect::<Result<Vec<_>, _>>()?)
}

/// Appends a batch to a topic's queue from inside the broker (wherever the
/// queue lives), durably; returns its base offset and record count.
pub async fn produce_internal(
    ctx: &Rc<ShardCtx>,
    topic: &str,
    queue: u32,
    batch: &[u8],
) -> Result<(u64, u32), Failure> {
    let mut w = Writer::default();
    let queue = QueueRef { topic: topic.to_string(), queue };
    Produce { queue, acks: msg::ACKS_DURABLE, batches: vec![batch] }.encode(&mut w);
    let body = call_internal(ctx, ApiKey::Produce, &w.buf).await?;
    let results = msg::decode_produced(&mut Reader::new(&body))?;
    results.first().copied().ok_or_else(|| Failure(ErrorCode::Internal, "empty produce response".into()))
}

/// Creates a one-queue topic (a group's retry or dead-letter topic) unless it exists.
pub async fn ensure_topic(ctx: &Rc<ShardCtx>, name: &str) -> Result<(), Failure> {
    if ctx.metadata().topics.contains_key(name) {
        return Ok(());
    }
    let mut w = Writer::default();
    CreateTopic { name: name.to_string(), queues: 1, flush: 0 }.encode(&mut w);
    match call_internal(ctx, ApiKey::CreateTopic, &w.buf).await {
        Err(Failure(ErrorCode::TopicExists, _)) => Ok(()),
        other => other.map(|_| ()),
    }
}

/// Serves a request built inside the broker as if a client had sent it here;
/// returns the response body.
async fn call_internal(ctx: &Rc<ShardCtx>, api: ApiKey, body: &[u8]) -> Result<Vec<u8>, Failure> {
    // Any correlation id but the reserved 0: the answer comes back to this call alone.
    let request = frame::request(api as u16, 0, 1, body);
    let response = Box::pin(handle(ctx, request)).await.unwrap_or_default();
    let parsed = response.get(4..).map(frame::Response::parse);
    match parsed {
        Some(Ok(r)) if r.error == ErrorCode::None => Ok(r.body.to_vec()),
        Some(Ok(r)) => Err(Failure(r.error, r.message)),
        _ => Err(Failure(ErrorCode::Internal, format!("no response to an internal {api:?}"))),
    }
}

/// Where a queue's request was served.
enum Served {
    /// This shard owns the queue: serve it from this slot.
    Here(QueueSlot),
    /// Another shard owns it and answered the forwarded request.
    Elsewhere(Reply),
}

/// Resolves the queue; serves the request on its owner if that is another shard.
async fn here_or_forward(ctx: &Rc<ShardCtx>, q: &QueueRef, frame: &[u8]) -> Result<Served, Failure> {
    let slot = locate(ctx, q)?;
    if slot.shard as usize == ctx.id {
        return Ok(Served::Here(slot));
    }
    forward(ctx, slot.shard as usize, frame).await.map(Served::Elsewhere)
}

/// Where a topic's queue lives.
pub fn locate(ctx: &ShardCtx, q: &QueueRef) -> Result<QueueSlot, Failure> {
    let metadata = ctx.metadata();
    let topic = metadata.topics.get(&q.topic).ok_or_else(|| unknown_topic(&q.topic))?;
    let slot = *topic.queues.get(q.queue as usize).ok_or_else(|| {
        Failure(
            ErrorCode::UnknownQueue,
            format!("topic {:?} has queues 0..{}, not {}", q.topic, topic.queues.len(), q.queue),
        )
    })?;
    Ok(slot)
}

fn unknown_topic(name: &str) -> Failure {
    Failure(ErrorCode::UnknownTopic, format!("unknown topic {name:?}; create it first"))
}

/// What a fetch of one queue read.
struct QueueRead {
    start: u64,
    end: u64,
    next_offset: u64,
    bytes: Vec<u8>,
}

impl QueueRead {
    fn fetched(&self) -> Fetched<'_> {
        Fetched { start: self.start, end: self.end, next_offset: self.next_offset, batches: &self.bytes }
    }
}

impl From<Failure> for FetchFailed {
    fn from(Failure(code, message): Failure) -> Self {
        FetchFailed { code, message, damaged: None }
    }
}

impl From<StorageError> for FetchFailed {
    fn from(e: StorageError) -> Self {
        let damaged = match e {
            StorageError::CorruptBatch { first_offset, next_offset, .. } => Some((first_offset, next_offset)),
            _ => None,
        };
        FetchFailed { damaged, ..Failure::from(e).into() }
    }
}

/// Reads one queue of this shard from `f.offset`, through its tag filter,
/// waiting up to `wait` at the end of the queue.
async fn read_queue(ctx: &ShardCtx, slot: QueueSlot, f: &Fetch, wait: Duration) -> Result<QueueRead, FetchFailed> {
    let q = QueueId(slot.storage_id);
    let filter = TagFilter::parse(&f.tags).map_err(|m| Failure(ErrorCode::InvalidRequest, m))?;
    let (bytes, next_offset, end) = if filter == TagFilter::All {
        let wait = if wait.is_zero() { ReadWait::No } else { ReadWait::Upto(wait) };
        let read = ctx.storage.read(q, f.offset, f.max_bytes as usize, wait).await?;
        (read.bytes, read.next_offset, read.end_offset)
    } else {
        let read = tag_filter::read_filtered(&ctx.storage, q, f.offset, f.max_bytes as usize, wait, &filter).await?;
        (read.bytes, read.next_offset, read.end_offset)
    };
    let (start, _) = ctx.storage.offsets(q)?;
    Ok(QueueRead { start, end, next_offset, bytes })
}

/// Reads one FetchMany entry; its queue must live on this shard (consumers
/// group their fetches by shard).
async fn fetch_entry(ctx: &ShardCtx, f: &Fetch, wait: Duration) -> Result<QueueRead, FetchFailed> {
    let slot = locate(ctx, &f.queue)?;
    if slot.shard as usize != ctx.id {
        let m = format!("queue {} of {:?} lives on shard {}; fetch it there", f.queue.queue, f.queue.topic, slot.shard);
        return Err(Failure(ErrorCode::InvalidRequest, m).into());
    }
    read_queue(ctx, slot, f, wait).await
}

/// Reads every entry at once; if none has anything to report, waits until
/// the first does (or `wait` passes) and reads the others again then.
async fn fetch_many(ctx: &ShardCtx, entries: &[Fetch], wait: Duration) -> Vec<Result<QueueRead, FetchFailed>> {
    let news = |f: &Fetch, r: &Result<QueueRead, FetchFailed>| {
        r.as_ref().map_or(true, |r| !r.bytes.is_empty() || r.next_offset != f.offset)
    };
    let mut reads =
        ringmq_shards::join_all(entries.iter().map(|f| fetch_entry(ctx, f, Duration::ZERO)).collect()).await;
    if wait.is_zero() || entries.is_empty() || entries.iter().zip(&reads).any(|(f, r)| news(f, r)) {
        return reads;
    }
    let (first, read) = ringmq_shards::first_of(entries.iter().map(|f| fetch_entry(ctx, f, wait)).collect()).await;
    reads[first] = read;
    let others: Vec<usize> = (0..entries.len()).filter(|&i| i != first).collect();
    let again =
        ringmq_shards::join_all(others.iter().map(|&i| fetch_entry(ctx, &entries[i], Duration::ZERO)).collect());
    for (i, read) in others.into_iter().zip(again.await) {
        reads[i] = read;
    }
    reads
}

/// Appends one ProduceMany entry: here, or as a Produce on the queue's owner
/// (a producer that has not yet seen a metadata change may send it here).
async fn produce_entry(ctx: &Rc<ShardCtx>, queue: &QueueRef, batch: &[u8]) -> msg::EntryOutcome {
    let outcome = async {
        let slot = locate(ctx, queue)?;
        if slot.shard as usize == ctx.id {
            let a = ctx.storage.append(QueueId(slot.storage_id), batch).await?;
            return Ok((a.base_offset, a.record_count));
        }
        produce_internal(ctx, &queue.topic, queue.queue, batch).await
    };
    outcome.await.map_err(|Failure(code, message)| (code, message))
}

/// Serves the request on `shard`; its response frame travels back as is.
async fn forward(ctx: &Rc<ShardCtx>, shard: usize, frame: &[u8]) -> Outcome {
    let reply =
        ctx.mesh.forward(shard, frame.to_vec()).await.map_err(|e| Failure(ErrorCode::ShuttingDown, e.to_string()))?;
    Ok(if reply.is_empty() { Reply::Nothing } else { Reply::Frame(reply) })
}

async fn create_topic(ctx: &Rc<ShardCtx>, req: CreateTopic) -> Result<(), Failure> {
    if !metadata::valid_topic_name(&req.name) {
        return Err(Failure(
            ErrorCode::InvalidTopic,
            format!("topic name {:?} must be 1-200 characters of A-Z a-z 0-9 . _ -", req.name),
        ));
    }
    if req.queues == 0 || req.queues > QUEUES_MAX {
        return Err(Failure(
            ErrorCode::InvalidRequest,
            format!("a topic has 1..={QUEUES_MAX} queues, not {}", req.queues),
        ));
    }
    if req.flush > 1 {
        return Err(Failure(ErrorCode::InvalidRequest, "flush must be 0 (sync) or 1 (async)".into()));
    }
    let _one_change_at_a_time = ctx.metadata_lock.acquire_permit(1).await;
    let current = ctx.metadata();
    if current.topics.contains_key(&req.name) {
        return Err(Failure(ErrorCode::TopicExists, format!("topic {:?} already exists", req.name)));
    }
    let next = current.with_topic(&req.name, req.queues, req.flush, ctx.mesh.peers() as u32);
    publish(ctx, next).await
}

async fn delete_topic(ctx: &Rc<ShardCtx>, name: &str) -> Result<(), Failure> {
    let _one_change_at_a_time = ctx.metadata_lock.acquire_permit(1).await;
    let mut next = (*ctx.metadata()).clone();
    if next.topics.remove(name).is_none() {
        return Err(Failure(ErrorCode::UnknownTopic, format!("unknown topic {name:?}")));
    }
    publish(ctx, next).await
}

/// Stores new metadata durably, then applies it on every shard.
async fn publish(ctx: &Rc<ShardCtx>, next: Metadata) -> Result<(), Failure> {
    // A buffered write and two fsyncs: on the blocking pool, not the shard's thread.
    let (stored, dir) = (next.clone(), ctx.config.data_dir.clone());
    glommio::executor().spawn_blocking(move || stored.store(&dir)).await.map_err(|e| {
        let code = if ringmq_shards::is_no_space(&e) { ErrorCode::StorageFull } else { ErrorCode::StorageFailed };
        Failure(code, format!("storing metadata: {e}"))
    })?;
    let snapshot = next.encode();
    for peer in (0..ctx.mesh.peers()).filter(|p| *p != ctx.id) {
        ctx.mesh
            .push_metadata(peer, snapshot.clone())
            .await
            .map_err(|e| Failure(ErrorCode::Internal, e.to_string()))?;
    }
    ctx.apply_metadata(next).await.map_err(Failure::from)
}

/// The storage policy of a topic's flush code.
pub fn flush_policy(code: u8) -> FlushPolicy {
    if code == 1 {
        FlushPolicy::Async
    } else {
        FlushPolicy::Sync
    }
}
