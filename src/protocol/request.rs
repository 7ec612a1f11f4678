//! A request body decoded whole: every field of the API's layout, and no
//! byte after it. The broker decodes a request completely before it acts on
//! any of it, so a body that does not decode is refused at once (no parked
//! wait first) and stores nothing.

use super::api::ApiKey;
use super::codec::{DecodeError, Reader};
use super::messages::{
    decode_names, CreateTopic, Fetch, FetchMany, GroupOffset, JoinGroup, LookupQuery, Membership, Produce,
    ProduceDelayed, ProduceMany, QueueLocking, QueueRef, ReplicaFetch, SendBack, SyncGroup, Transactional,
};
use super::security::{decode_acls, decode_filter, decode_quota, AlterUser};
use crate::acl::{Acl, AclFilter};
use crate::quota::Entry;

/// A decoded request of any API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request<'a> {
    ApiVersions,
    Metadata(Vec<String>),
    CreateTopic(CreateTopic),
    DeleteTopic(String),
    ListTopics,
    Produce(Produce<'a>),
    Fetch(Fetch),
    ListOffsets(QueueRef),
    CommitOffset(GroupOffset),
    FetchOffset { group: String, queue: QueueRef },
    JoinGroup(JoinGroup),
    SyncGroup(SyncGroup),
    Heartbeat { member: Membership, wait_ms: u32 },
    LeaveGroup(Membership),
    SendBack(SendBack),
    AdvanceClock(u64),
    LockQueues(QueueLocking),
    UnlockQueues(QueueLocking),
    ProduceDelayed(ProduceDelayed<'a>),
    LookupMessages(LookupQuery),
    ProduceHalf(Transactional<'a>),
    EndTransaction(Transactional<'a>),
    PollChecks { group: String, wait_ms: u32 },
    ProduceMany(ProduceMany<'a>),
    FetchMany(FetchMany),
    ReplicaFetch(ReplicaFetch),
    SaslHandshake(String),
    SaslAuthenticate(&'a [u8]),
    AlterUser(AlterUser),
    ListUsers,
    CreateAcls(Vec<Acl>),
    DeleteAcls(AclFilter),
    ListAcls(AclFilter),
    AlterQuotas(Entry),
    ListQuotas,
    ListGroups,
    DescribeGroup(String),
}

impl<'a> Request<'a> {
    /// Decodes the body of an `api` request at `version` (one it speaks,
    /// checked by the caller); trailing bytes are an error.
    pub fn decode(api: ApiKey, version: u16, body: &'a [u8]) -> Result<Request<'a>, DecodeError> {
        let mut r = Reader::new(body);
        let request = match api {
            ApiKey::ApiVersions => Request::ApiVersions,
            ApiKey::Metadata => Request::Metadata(decode_names(&mut r)?),
            ApiKey::CreateTopic => Request::CreateTopic(CreateTopic::decode(&mut r)?),
            ApiKey::DeleteTopic => Request::DeleteTopic(r.string()?),
            ApiKey::ListTopics => Request::ListTopics,
            ApiKey::Produce => Request::Produce(Produce::decode(&mut r)?),
            ApiKey::Fetch => Request::Fetch(Fetch::decode(&mut r)?),
            ApiKey::ListOffsets => Request::ListOffsets(QueueRef::decode(&mut r)?),
            ApiKey::CommitOffset => Request::CommitOffset(GroupOffset::decode(&mut r)?),
            ApiKey::FetchOffset => Request::FetchOffset { group: r.string()?, queue: QueueRef::decode(&mut r)? },
            ApiKey::JoinGroup => Request::JoinGroup(JoinGroup::decode(&mut r)?),
            ApiKey::SyncGroup => Request::SyncGroup(SyncGroup::decode(&mut r)?),
            ApiKey::Heartbeat => Request::Heartbeat { member: Membership::decode(&mut r)?, wait_ms: r.u32()? },
            ApiKey::LeaveGroup => Request::LeaveGroup(Membership::decode(&mut r)?),
            ApiKey::SendBack => Request::SendBack(SendBack::decode(&mut r)?),
            ApiKey::AdvanceClock => Request::AdvanceClock(r.u64()?),
            ApiKey::LockQueues => Request::LockQueues(QueueLocking::decode(&mut r)?),
            ApiKey::UnlockQueues => Request::UnlockQueues(QueueLocking::decode(&mut r)?),
            ApiKey::ProduceDelayed => Request::ProduceDelayed(ProduceDelayed::decode(&mut r)?),
            ApiKey::LookupMessages => Request::LookupMessages(LookupQuery::decode(&mut r)?),
            ApiKey::ProduceHalf => Request::ProduceHalf(Transactional::decode(&mut r)?),
            ApiKey::EndTransaction => Request::EndTransaction(Transactional::decode(&mut r)?),
            ApiKey::PollChecks => Request::PollChecks { group: r.string()?, wait_ms: r.u32()? },
            ApiKey::ProduceMany => Request::ProduceMany(ProduceMany::decode(&mut r)?),
            ApiKey::FetchMany => Request::FetchMany(FetchMany::decode(&mut r, version)?),
            ApiKey::ReplicaFetch => Request::ReplicaFetch(ReplicaFetch::decode(&mut r)?),
            ApiKey::SaslHandshake => Request::SaslHandshake(r.string()?),
            ApiKey::SaslAuthenticate => Request::SaslAuthenticate(r.bytes()?),
            ApiKey::AlterUser => Request::AlterUser(AlterUser::decode(&mut r)?),
            ApiKey::ListUsers => Request::ListUsers,
            ApiKey::CreateAcls => Request::CreateAcls(decode_acls(&mut r)?),
            ApiKey::DeleteAcls => Request::DeleteAcls(decode_filter(&mut r)?),
            ApiKey::ListAcls => Request::ListAcls(decode_filter(&mut r)?),
            ApiKey::AlterQuotas => Request::AlterQuotas(decode_quota(&mut r)?),
            ApiKey::ListQuotas => Request::ListQuotas,
            ApiKey::ListGroups => Request::ListGroups,
            ApiKey::DescribeGroup => Request::DescribeGroup(r.string()?),
        };
        r.finish()?;
        Ok(request)
    }

    /// The consumer group a group request speaks for (served by its coordinator).
    pub fn group(&self) -> Option<&str> {
        match self {
            Request::CommitOffset(c) => Some(&c.member.group),
            Request::FetchOffset { group, .. } => Some(group),
            Request::JoinGroup(j) => Some(&j.group),
            Request::SyncGroup(s) => Some(&s.member.group),
            Request::Heartbeat { member, .. } | Request::LeaveGroup(member) => Some(&member.group),
            Request::LockQueues(l) | Request::UnlockQueues(l) => Some(&l.group),
            Request::DescribeGroup(group) => Some(group),
            _ => None,
        }
    }

    /// The longest wait the request asks the broker to park it for, in ms,
    /// and the field that asks for it.
    pub fn wait_ms(&self) -> Option<(&'static str, u32)> {
        match self {
            Request::Fetch(f) => Some(("max_wait_ms", f.max_wait_ms)),
            Request::FetchMany(f) => Some(("max_wait_ms", f.max_wait_ms)),
            Request::ReplicaFetch(f) => Some(("max_wait_ms", f.max_wait_ms)),
            Request::Heartbeat { wait_ms, .. } => Some(("wait_ms", *wait_ms)),
            Request::PollChecks { wait_ms, .. } => Some(("wait_ms", *wait_ms)),
            _ => None,
        }
    }

    /// True if serving the request stores something besides a topic
    /// append (what a sync-replicated leader acknowledges only once its
    /// replicas hold it). Produce and ProduceMany are not listed: their
    /// appends wait for exactly the bytes they stored (`Core::append_here`),
    /// not for everything other requests wrote meanwhile.
    pub fn writes(&self) -> bool {
        matches!(
            self,
            Request::CreateTopic(_)
                | Request::DeleteTopic(_)
                | Request::CommitOffset(_)
                | Request::SendBack(_)
                | Request::ProduceDelayed(_)
                | Request::ProduceHalf(_)
                | Request::EndTransaction(_)
        )
    }

    /// The record bytes the request asks to store (what a produce quota meters).
    pub fn produced_bytes(&self) -> u64 {
        let bytes = match self {
            Request::Produce(p) => p.batches.iter().map(|b| b.len()).sum(),
            Request::ProduceMany(p) => p.entries.iter().map(|(_, b)| b.len()).sum(),
            Request::ProduceDelayed(p) => p.batch.len(),
            Request::ProduceHalf(t) => t.batch.len(),
            _ => 0,
        };
        bytes as u64
    }

    /// True for the fetches whose returned bytes a fetch quota meters.
    pub fn fetches(&self) -> bool {
        matches!(self, Request::Fetch(_) | Request::FetchMany(_))
    }

    /// The acks a produce asks for.
    pub fn acks(&self) -> Option<u8> {
        match self {
            Request::Produce(p) => Some(p.acks),
            Request::ProduceMany(p) => Some(p.acks),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::messages::ACKS_DURABLE;
    use crate::Writer;

    fn body(encode: impl FnOnce(&mut Writer)) -> Vec<u8> {
        let mut w = Writer::default();
        encode(&mut w);
        w.buf
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
            assert!(Request::decode(api, 0, &good).is_ok(), "{api:?} decodes");
            let mut long = good.clone();
            long.push(0);
            assert_eq!(Request::decode(api, 0, &long), Err(DecodeError("trailing bytes after the body")), "{api:?}");
        }
        assert!(Request::decode(ApiKey::ApiVersions, 0, &[0]).is_err(), "an empty body means empty");
    }

    proptest::proptest! {
        /// Whatever a client sends, every API's decoder answers Ok or Err.
        #[test]
        fn no_body_makes_a_decoder_panic(api in 0..ApiKey::ALL.len(), bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..256)) {
            let _ = Request::decode(ApiKey::ALL[api], 0, &bytes);
        }

        /// Short counts and lengths inside an otherwise plausible body are refused, not trusted.
        #[test]
        fn a_truncated_body_is_refused(api in 0..ApiKey::ALL.len(), cut in 1usize..64) {
            let queue = QueueRef { topic: "topic".into(), queue: 3 };
            let good = body(|w| Produce { queue, acks: ACKS_DURABLE, batches: vec![&[7; 80], b"ab"] }.encode(w));
            let keep = good.len().saturating_sub(cut);
            proptest::prop_assert!(Request::decode(ApiKey::Produce, 0, &good[..keep]).is_err());
            let _ = Request::decode(ApiKey::ALL[api], 0, &good[..keep]);
        }
    }
}
