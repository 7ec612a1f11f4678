//! The group APIs, served on the group's coordinator shard: membership
//! (join, sync, heartbeat, leave), offsets, and queue locks.

use super::groups::{JoinRequest, Refusal};
use super::handler::{self, Failure};
use super::shard_server::ShardCtx;
use crate::protocol::messages::{self as msg, JoinGroup};
use crate::protocol::request::Request;
use crate::protocol::{ErrorCode, Writer};
use std::rc::Rc;
use std::time::Duration;

/// Serves a group request on its coordinator.
pub async fn serve(ctx: &Rc<ShardCtx>, request: Request<'_>, w: &mut Writer) -> Result<(), Failure> {
    match request {
        Request::CommitOffset(c) => {
            // An offset of a queue that does not exist would be stored for nothing.
            handler::locate(ctx, &c.queue)?;
            ctx.groups.borrow().may_commit(&c.member, &c.queue.topic, c.queue.queue)?;
            ctx.offsets.commit(&ctx.storage, &c.member.group, &c.queue.topic, c.queue.queue, c.offset).await?;
        }
        Request::FetchOffset { group, queue: q } => {
            w.u64(ctx.offsets.get(&group, &q.topic, q.queue).unwrap_or(msg::NO_OFFSET));
        }
        Request::JoinGroup(join) => join_group(ctx, join).await?.encode(w),
        Request::SyncGroup(sync) => {
            ctx.groups.borrow_mut().sync(&sync.member, &sync.assignments, ctx.now_ms())?;
            ctx.group_changed.notify();
            let limit = ctx.config.max_group_wait;
            let assignment = park(ctx, limit, || ctx.groups.borrow().synced(&sync.member)).await?;
            w.bytes(&assignment.encode());
        }
        Request::LockQueues(l) => {
            let (mut locks, now) = (ctx.queue_locks.borrow_mut(), ctx.clock.now_ms());
            for q in &l.queues {
                let held = locks.lock(&l.group, &l.holder, &q.topic, q.queue, u64::from(l.lease_ms), now);
                w.u8(u8::from(held));
            }
        }
        Request::UnlockQueues(l) => {
            let mut locks = ctx.queue_locks.borrow_mut();
            l.queues.iter().for_each(|q| locks.unlock(&l.group, &l.holder, &q.topic, q.queue));
        }
        Request::Heartbeat { member: who, wait_ms } => {
            let wait = Duration::from_millis(u64::from(wait_ms));
            ctx.groups.borrow_mut().heartbeat(&who, ctx.now_ms())?;
            // Parked until the member must rejoin or `wait` passes, so a
            // rebalance reaches every member at once.
            let deadline = std::time::Instant::now() + wait;
            loop {
                let left = deadline.saturating_duration_since(std::time::Instant::now());
                if left.is_zero() || !ctx.group_changed.wait_for(left).await {
                    break;
                }
                ctx.groups.borrow().standing(&who)?;
            }
        }
        Request::LeaveGroup(who) => {
            ctx.groups.borrow_mut().leave(&who, ctx.now_ms())?;
            ctx.group_changed.notify();
        }
        other => unreachable!("{other:?} is not a group request"),
    }
    Ok(())
}

async fn join_group(ctx: &Rc<ShardCtx>, j: JoinGroup) -> Result<msg::Joined, Failure> {
    // At most max_group_wait: checked with the request's other limits.
    let limit = Duration::from_millis(u64::from(j.rebalance_timeout_ms));
    let req = JoinRequest {
        member: &j.member,
        client_id: &j.client_id,
        session_timeout_ms: j.session_timeout_ms,
        rebalance_timeout_ms: j.rebalance_timeout_ms,
        metadata: j.metadata,
    };
    let member = ctx.groups.borrow_mut().join(&j.group, req, ctx.now_ms())?;
    ctx.group_changed.notify();
    // The deadline evicts missing members on the shard's tick: allow for it.
    park(ctx, limit + Duration::from_secs(1), || ctx.groups.borrow().joined(&j.group, &member)).await
}

/// Waits until `ready` has an answer (or refuses), at most `limit`; after
/// that the member is told to rejoin.
async fn park<T>(
    ctx: &Rc<ShardCtx>,
    limit: Duration,
    ready: impl Fn() -> Result<Option<T>, Refusal>,
) -> Result<T, Failure> {
    let deadline = std::time::Instant::now() + limit;
    loop {
        if let Some(answer) = ready()? {
            return Ok(answer);
        }
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() || !ctx.group_changed.wait_for(left).await {
            if let Some(answer) = ready()? {
                return Ok(answer);
            }
            return Err(Failure(ErrorCode::RebalanceInProgress, format!("no answer within {limit:?}; rejoin")));
        }
    }
}
