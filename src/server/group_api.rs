//! The group APIs, served on the group's coordinator shard: membership
//! (join, sync, heartbeat, leave), offsets, and queue locks.

use super::groups::{JoinRequest, Refusal};
use super::handler::Failure;
use super::shard_server::ShardCtx;
use crate::protocol::messages::{self as msg, GroupOffset, JoinGroup, Membership, QueueLocking, QueueRef, SyncGroup};
use crate::protocol::{ApiKey, ErrorCode, Reader, Writer};
use std::rc::Rc;
use std::time::Duration;

/// Serves a group request on its coordinator.
pub async fn serve(ctx: &Rc<ShardCtx>, api: ApiKey, r: &mut Reader<'_>, w: &mut Writer) -> Result<(), Failure> {
    match api {
        ApiKey::CommitOffset => {
            let c = GroupOffset::decode(r)?;
            ctx.groups.borrow().may_commit(&c.member, &c.queue.topic, c.queue.queue)?;
            ctx.offsets.commit(&ctx.storage, &c.member.group, &c.queue.topic, c.queue.queue, c.offset).await?;
        }
        ApiKey::FetchOffset => {
            let group = r.string()?;
            let q = QueueRef::decode(r)?;
            w.u64(ctx.offsets.get(&group, &q.topic, q.queue).unwrap_or(msg::NO_OFFSET));
        }
        ApiKey::JoinGroup => join_group(ctx, JoinGroup::decode(r)?).await?.encode(w),
        ApiKey::SyncGroup => {
            let sync = SyncGroup::decode(r)?;
            ctx.groups.borrow_mut().sync(&sync.member, &sync.assignments, ctx.now_ms())?;
            ctx.group_changed.notify();
            let limit = ctx.config.max_group_wait;
            let assignment = park(ctx, limit, || ctx.groups.borrow().synced(&sync.member)).await?;
            w.bytes(&assignment.encode());
        }
        ApiKey::LockQueues => {
            let l = QueueLocking::decode(r)?;
            let (mut locks, now) = (ctx.queue_locks.borrow_mut(), ctx.clock.now_ms());
            for q in &l.queues {
                let held = locks.lock(&l.group, &l.holder, &q.topic, q.queue, u64::from(l.lease_ms), now);
                w.u8(u8::from(held));
            }
        }
        ApiKey::UnlockQueues => {
            let l = QueueLocking::decode(r)?;
            let mut locks = ctx.queue_locks.borrow_mut();
            l.queues.iter().for_each(|q| locks.unlock(&l.group, &l.holder, &q.topic, q.queue));
        }
        ApiKey::Heartbeat => {
            let who = Membership::decode(r)?;
            let wait = Duration::from_millis(u64::from(r.u32()?)).min(ctx.config.max_group_wait);
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
        ApiKey::LeaveGroup => {
            ctx.groups.borrow_mut().leave(&Membership::decode(r)?, ctx.now_ms())?;
            ctx.group_changed.notify();
        }
        other => unreachable!("{other:?} is not a group API"),
    }
    Ok(())
}

async fn join_group(ctx: &Rc<ShardCtx>, j: JoinGroup) -> Result<msg::Joined, Failure> {
    let limit = Duration::from_millis(u64::from(j.rebalance_timeout_ms));
    if limit > ctx.config.max_group_wait {
        let m =
            format!("rebalance timeout {limit:?} exceeds the broker's max_group_wait {:?}", ctx.config.max_group_wait);
        return Err(Failure(ErrorCode::InvalidRequest, m));
    }
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
