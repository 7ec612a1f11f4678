//! What each native request needs its principal to be allowed, checked
//! before the request is routed or served (a request another shard forwards
//! was checked where it arrived). Listings (Metadata of every topic,
//! ListTopics, a lookup by id) are filtered instead: a principal sees only
//! the topics it may describe or read.

use crate::protocol::request::Request;
use crate::security::acl::Operation::{self, *};
use crate::server::auth::authorizer::{cluster, group, topic, transactional, Principal, Resource};
use crate::server::core::{Core, Failure};

/// Refuses the request unless the principal may do all it asks.
pub fn authorize(core: &Core, request: &Request, principal: &Principal) -> Result<(), Failure> {
    if !core.config().auth.required {
        return Ok(());
    }
    needs(request, &mut |operation, resource| principal.check(core, operation, resource))
}

/// Whether the principal sees `name` in a listing (Describe).
pub fn visible(core: &Core, principal: &Principal, name: &str) -> bool {
    principal.allows(core, Describe, topic(name))
}

/// Whether the principal sees consumer group `name` in a listing (Describe).
pub fn visible_group(core: &Core, principal: &Principal, name: &str) -> bool {
    principal.allows(core, Describe, group(name))
}

/// Calls `need` with every (operation, resource) the request asks for.
fn needs(request: &Request, need: &mut dyn FnMut(Operation, Resource) -> Result<(), Failure>) -> Result<(), Failure> {
    match request {
        Request::ApiVersions | Request::SaslHandshake(_) | Request::SaslAuthenticate(_) => Ok(()),
        // Listed topics are filtered; named ones must be describable.
        Request::Metadata(names) => names.iter().try_for_each(|n| need(Describe, topic(n))),
        Request::ListTopics => Ok(()),
        Request::CreateTopic(c) => need(Create, topic(&c.name)).or_else(|_| need(Create, cluster())),
        Request::DeleteTopic(name) => need(Delete, topic(name)),
        Request::Produce(p) => need(Write, topic(&p.queue.topic)),
        Request::ProduceMany(p) => p.entries.iter().try_for_each(|(q, _)| need(Write, topic(&q.topic))),
        Request::ProduceDelayed(p) => need(Write, topic(&p.queue.topic)),
        Request::Fetch(f) => need(Read, topic(&f.queue.topic)),
        Request::FetchMany(f) => f.entries.iter().try_for_each(|e| need(Read, topic(&e.queue.topic))),
        Request::ListOffsets(q) => need(Describe, topic(&q.topic)),
        Request::CommitOffset(c) => need(Read, group(&c.member.group)).and_then(|()| need(Read, topic(&c.queue.topic))),
        Request::FetchOffset { group: g, queue } => {
            need(Describe, group(g)).and_then(|()| need(Describe, topic(&queue.topic)))
        }
        Request::JoinGroup(j) => need(Read, group(&j.group)),
        Request::SyncGroup(s) => need(Read, group(&s.member.group)),
        Request::Heartbeat { member, .. } | Request::LeaveGroup(member) => need(Read, group(&member.group)),
        Request::LockQueues(l) | Request::UnlockQueues(l) => need(Read, group(&l.group)),
        Request::SendBack(b) => need(Read, group(&b.group)).and_then(|()| need(Read, topic(&b.queue.topic))),
        // By key: the topic must be readable; by id: the answer is filtered.
        Request::LookupMessages(crate::protocol::messages::LookupQuery::Key { topic: t, .. }) => need(Read, topic(t)),
        Request::LookupMessages(_) => Ok(()),
        Request::ProduceHalf(t) | Request::EndTransaction(t) => {
            need(Write, transactional(&t.group)).and_then(|()| need(Write, topic(&t.queue.topic)))
        }
        Request::PollChecks { group: g, .. } => need(Write, transactional(g)),
        Request::ReplicaFetch(_) | Request::AdvanceClock(_) => need(ClusterAction, cluster()),
        Request::AlterUser(_) | Request::CreateAcls(_) | Request::DeleteAcls(_) | Request::AlterQuotas(_) => {
            need(Alter, cluster())
        }
        Request::ListUsers | Request::ListAcls(_) | Request::ListQuotas => need(Describe, cluster()),
        // Listed groups are filtered; a described one must be describable.
        Request::ListGroups => Ok(()),
        Request::DescribeGroup(g) => need(Describe, group(g)),
    }
}
