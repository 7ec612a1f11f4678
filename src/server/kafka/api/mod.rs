//! The Kafka APIs served, one file each, registered in `TABLE`: a request's
//! API is found there, ApiVersions advertises exactly it, and the Kafka API
//! table of OPERATIONS.md is made from it. An API's file says its key, its
//! versions (the ones implemented and tested), what ringmq does with it and
//! how it is served; authorization is per resource inside it, as Kafka
//! answers it per topic or group. What is the same for every API (decoding
//! whole before serving, the quota's wait, the request count, encoding the
//! response with the header version its API and version call for) is
//! `Entry` below, once. Adding an API is a file here and a line in `TABLE`.

mod add_offsets_to_txn;
mod add_partitions_to_txn;
mod alter_client_quotas;
mod alter_configs;
mod alter_partition_reassignments;
mod alter_user_scram_credentials;
mod api_versions;
mod consumer_group_describe;
mod consumer_group_heartbeat;
mod create_acls;
mod create_partitions;
mod create_topics;
mod delete_acls;
mod delete_groups;
mod delete_records;
mod delete_topics;
mod describe_acls;
mod describe_client_quotas;
mod describe_cluster;
mod describe_configs;
mod describe_groups;
mod describe_log_dirs;
mod describe_producers;
mod describe_transactions;
mod describe_user_scram_credentials;
mod elect_leaders;
mod end_txn;
mod fetch;
mod find_coordinator;
mod heartbeat;
mod incremental_alter_configs;
mod init_producer_id;
mod join_group;
mod leave_group;
mod list_groups;
mod list_offsets;
mod list_partition_reassignments;
mod list_transactions;
mod metadata;
mod offset_commit;
mod offset_delete;
mod offset_fetch;
pub mod produce;
pub mod sasl_authenticate;
pub mod sasl_handshake;
mod sync_group;
mod txn_offset_commit;

use crate::server::auth::authorizer::Principal;
use crate::server::auth::quotas;
use crate::server::kafka::{KafkaError, Services};
use bytes::{Bytes, BytesMut};
use futures_util::future::LocalBoxFuture;
use kafka_protocol::messages::{ApiKey, ResponseHeader};
use kafka_protocol::protocol::{decode_request_header_from_buffer, Decodable, Encodable};
use kafka_protocol::ResponseError;
use std::marker::PhantomData;
use std::rc::Rc;
use std::time::Duration;

/// Every Kafka API served.
pub static TABLE: [&(dyn Handler + Sync); 47] = [
    &Entry::<produce::Produce>(PhantomData),
    &Entry::<fetch::Fetch>(PhantomData),
    &Entry::<list_offsets::ListOffsets>(PhantomData),
    &Entry::<metadata::Metadata>(PhantomData),
    &Entry::<offset_commit::OffsetCommit>(PhantomData),
    &Entry::<offset_fetch::OffsetFetch>(PhantomData),
    &Entry::<find_coordinator::FindCoordinator>(PhantomData),
    &Entry::<join_group::JoinGroup>(PhantomData),
    &Entry::<heartbeat::Heartbeat>(PhantomData),
    &Entry::<leave_group::LeaveGroup>(PhantomData),
    &Entry::<sync_group::SyncGroup>(PhantomData),
    &Entry::<sasl_handshake::SaslHandshake>(PhantomData),
    &Entry::<api_versions::ApiVersions>(PhantomData),
    &Entry::<create_topics::CreateTopics>(PhantomData),
    &Entry::<delete_topics::DeleteTopics>(PhantomData),
    &Entry::<init_producer_id::InitProducerId>(PhantomData),
    &Entry::<describe_configs::DescribeConfigs>(PhantomData),
    &Entry::<describe_groups::DescribeGroups>(PhantomData),
    &Entry::<list_groups::ListGroups>(PhantomData),
    &Entry::<delete_groups::DeleteGroups>(PhantomData),
    &Entry::<offset_delete::OffsetDelete>(PhantomData),
    &Entry::<delete_records::DeleteRecords>(PhantomData),
    &Entry::<create_partitions::CreatePartitions>(PhantomData),
    &Entry::<describe_acls::DescribeAcls>(PhantomData),
    &Entry::<create_acls::CreateAcls>(PhantomData),
    &Entry::<delete_acls::DeleteAcls>(PhantomData),
    &Entry::<describe_log_dirs::DescribeLogDirs>(PhantomData),
    &Entry::<elect_leaders::ElectLeaders>(PhantomData),
    &Entry::<consumer_group_heartbeat::ConsumerGroupHeartbeat>(PhantomData),
    &Entry::<consumer_group_describe::ConsumerGroupDescribe>(PhantomData),
    &Entry::<describe_client_quotas::DescribeClientQuotas>(PhantomData),
    &Entry::<alter_client_quotas::AlterClientQuotas>(PhantomData),
    &Entry::<describe_user_scram_credentials::DescribeUserScramCredentials>(PhantomData),
    &Entry::<alter_user_scram_credentials::AlterUserScramCredentials>(PhantomData),
    &Entry::<alter_configs::AlterConfigs>(PhantomData),
    &Entry::<incremental_alter_configs::IncrementalAlterConfigs>(PhantomData),
    &Entry::<sasl_authenticate::SaslAuthenticate>(PhantomData),
    &Entry::<add_partitions_to_txn::AddPartitionsToTxn>(PhantomData),
    &Entry::<add_offsets_to_txn::AddOffsetsToTxn>(PhantomData),
    &Entry::<end_txn::EndTxn>(PhantomData),
    &Entry::<txn_offset_commit::TxnOffsetCommit>(PhantomData),
    &Entry::<describe_producers::DescribeProducers>(PhantomData),
    &Entry::<describe_transactions::DescribeTransactions>(PhantomData),
    &Entry::<list_transactions::ListTransactions>(PhantomData),
    &Entry::<alter_partition_reassignments::AlterPartitionReassignments>(PhantomData),
    &Entry::<list_partition_reassignments::ListPartitionReassignments>(PhantomData),
    &Entry::<describe_cluster::DescribeCluster>(PhantomData),
];

/// Request header fields every version has: api key, api version, correlation id.
const HEADER_BYTES: usize = 8;

/// One Kafka API: what its file declares. (Its futures run on one shard's
/// executor and are never sent between threads, so `async fn` is fine here.)
#[allow(async_fn_in_trait)]
pub trait Api: 'static {
    const KEY: ApiKey;
    /// The versions served: (min, max).
    const VERSIONS: (i16, i16);
    /// The oldest version ApiVersions advertises: `VERSIONS.0` but where a
    /// client's negotiation looks for an older one (those are still refused
    /// when used, as other versions not served).
    const ADVERTISED_MIN: i16 = Self::VERSIONS.0;
    /// The request's name in metrics.
    const NAME: &'static str;
    /// What ringmq does with it, as OPERATIONS.md's Kafka API table says.
    const NOTE: &'static str;
    /// Counts against the client's request quota (everything but ApiVersions).
    const METERED: bool = true;

    type Request: Decodable;
    type Response: Encodable;

    /// Whether a request of `version` is served (else UNSUPPORTED_VERSION,
    /// and the connection closes).
    fn accepts(version: i16) -> bool {
        (Self::VERSIONS.0..=Self::VERSIONS.1).contains(&version)
    }

    /// Decodes the body at `version`.
    fn decode(body: &mut Bytes, version: i16) -> Result<Self::Request, KafkaError> {
        Self::Request::decode(body, version).map_err(|e| KafkaError::Malformed(Self::KEY, version, e.to_string()))
    }

    /// The versions of the response's header and body for a request of `version`.
    fn response_versions(version: i16) -> (i16, i16) {
        (Self::KEY.response_header_version(version), version)
    }

    /// The record bytes it asks to store (what a produce quota meters).
    fn produced_bytes(_request: &Self::Request) -> u64 {
        0
    }

    /// Serves the request; None: no response (a produce with acks=0).
    async fn serve(s: &Services, request: Self::Request, at: &At) -> Option<Self::Response>;
}

/// Who asked, and how long the quota held the request back.
pub struct At {
    pub version: i16,
    pub client_id: String,
    pub principal: Rc<Principal>,
    waited: Duration,
}

impl At {
    /// The response's throttle time: the quota's wait before serving.
    pub fn throttle_ms(&self) -> i32 {
        self.throttle_ms_with(Duration::ZERO)
    }

    /// The throttle time with `more` (a fetch's wait for the bytes it read).
    pub fn throttle_ms_with(&self, more: Duration) -> i32 {
        (self.waited + more).as_millis().min(i32::MAX as u128) as i32
    }
}

/// What the connection does with a request it answers at once.
pub enum Outcome {
    /// Send this response frame (its length first).
    Respond(Bytes),
    /// Send this response, then close the connection (an API or version not
    /// served, answered UNSUPPORTED_VERSION; a failed authentication).
    Last(Bytes),
}

/// A request's header, read before its body.
pub struct Head {
    pub correlation: i32,
    pub version: i16,
    pub client_id: String,
}

/// A request frame whose header was read.
pub enum Decoded {
    /// An API and version served: its body is decoded by `Handler::start`.
    Served { api: &'static (dyn Handler + Sync), head: Head, body: Bytes },
    /// An API or version that is not served.
    Unsupported { correlation: i32 },
}

/// The serving of one request, to spawn: its response frame (None: none,
/// a produce with acks=0).
pub type Serving = LocalBoxFuture<'static, Result<Option<Bytes>, KafkaError>>;

/// An API as the connection and the docs see it (object safe).
pub trait Handler {
    fn key(&self) -> ApiKey;
    fn versions(&self) -> (i16, i16);
    /// The versions ApiVersions advertises.
    fn advertised(&self) -> (i16, i16);
    fn note(&self) -> &'static str;
    fn accepts(&self, version: i16) -> bool;
    /// Whether a body decodes at `version` (fuzzing).
    fn decodes(&self, version: i16, body: Bytes) -> Result<(), KafkaError>;
    /// Decodes the body whole (an error closes the connection) and returns
    /// the serving of it.
    fn start(&self, s: &Rc<Services>, head: Head, body: Bytes, principal: Rc<Principal>)
        -> Result<Serving, KafkaError>;
}

/// The `Handler` of an `Api`: the steps every request takes. (It holds no
/// value of its API, so it is `Sync` whatever the API: the table is a static.)
pub struct Entry<A>(PhantomData<fn() -> A>);

impl<A: Api> Handler for Entry<A> {
    fn key(&self) -> ApiKey {
        A::KEY
    }

    fn versions(&self) -> (i16, i16) {
        A::VERSIONS
    }

    fn advertised(&self) -> (i16, i16) {
        (A::ADVERTISED_MIN, A::VERSIONS.1)
    }

    fn note(&self) -> &'static str {
        A::NOTE
    }

    fn accepts(&self, version: i16) -> bool {
        A::accepts(version)
    }

    fn decodes(&self, version: i16, mut body: Bytes) -> Result<(), KafkaError> {
        A::decode(&mut body, version).map(drop)
    }

    fn start(
        &self,
        s: &Rc<Services>,
        head: Head,
        mut body: Bytes,
        principal: Rc<Principal>,
    ) -> Result<Serving, KafkaError> {
        let request = A::decode(&mut body, head.version)?;
        let s = s.clone();
        Ok(Box::pin(async move { serve::<A>(&s, head, request, principal).await }))
    }
}

async fn serve<A: Api>(
    s: &Services,
    head: Head,
    request: A::Request,
    principal: Rc<Principal>,
) -> Result<Option<Bytes>, KafkaError> {
    let started = std::time::Instant::now();
    // Every request but ApiVersions counts against the client's quota (a
    // produce's records too); the wait is each response's throttle time.
    let waited = match A::METERED {
        true => quotas::before(&s.core, principal.user(), &head.client_id, A::produced_bytes(&request)).await,
        false => Duration::ZERO,
    };
    let at = At { version: head.version, client_id: head.client_id, principal, waited };
    let served = A::serve(s, request, &at).await;
    s.core.traffic().answered(A::NAME, None, started.elapsed());
    let Some(response) = served else { return Ok(None) };
    let (header_version, version) = A::response_versions(head.version);
    respond(head.correlation, header_version, &response, version).map(Some)
}

/// Reads a request frame's header (without its length prefix) and finds its API.
pub fn decode(mut frame: Bytes) -> Result<Decoded, KafkaError> {
    if frame.len() < HEADER_BYTES {
        return Err(KafkaError::ShortHeader(frame.len()));
    }
    let (key, version) = (i16::from_be_bytes([frame[0], frame[1]]), i16::from_be_bytes([frame[2], frame[3]]));
    let correlation = i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
    let Some(api) = TABLE.iter().find(|api| api.key() as i16 == key && api.accepts(version)) else {
        return Ok(Decoded::Unsupported { correlation });
    };
    let header = decode_request_header_from_buffer(&mut frame)
        .map_err(|e| KafkaError::Malformed(api.key(), version, format!("its header: {e}")))?;
    let client_id = header.client_id.as_deref().unwrap_or("kafka").to_string();
    Ok(Decoded::Served { api: *api, head: Head { correlation, version, client_id }, body: frame })
}

/// The answer to a request that is not served: the correlation id and
/// UNSUPPORTED_VERSION, laid out as ApiVersions v0 begins (length first);
/// the connection closes after it.
pub fn refuse(correlation: i32) -> Outcome {
    let mut out = 6u32.to_be_bytes().to_vec();
    out.extend_from_slice(&correlation.to_be_bytes());
    out.extend_from_slice(&ResponseError::UnsupportedVersion.code().to_be_bytes());
    Outcome::Last(Bytes::from(out))
}

/// The response frame, its 4-byte length first.
pub fn respond(
    correlation: i32,
    header_version: i16,
    body: &impl Encodable,
    version: i16,
) -> Result<Bytes, KafkaError> {
    let mut out = BytesMut::from(&[0u8; 4][..]);
    let encoded = ResponseHeader::default()
        .with_correlation_id(correlation)
        .encode(&mut out, header_version)
        .and_then(|()| body.encode(&mut out, version));
    encoded.map_err(|e| KafkaError::Encode(e.to_string()))?;
    let len = (out.len() - 4) as u32;
    out[..4].copy_from_slice(&len.to_be_bytes());
    Ok(out.freeze())
}

/// OPERATIONS.md's Kafka API table, made from `TABLE` (in key order).
pub fn markdown_table() -> String {
    let mut apis: Vec<_> = TABLE.iter().collect();
    apis.sort_by_key(|api| api.key() as i16);
    let mut table = String::from("| key | API | versions | how ringmq serves it |\n| --- | --- | --- | --- |\n");
    for api in apis {
        let (min, max) = api.versions();
        table += &format!("| {} | {:?} | {min}-{max} | {} |\n", api.key() as i16, api.key(), api.note());
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_md_lists_the_table() {
        crate::doc_tables::assert_lists("docs/OPERATIONS.md", &markdown_table());
    }

    #[test]
    fn every_api_is_listed_once() {
        for api in TABLE {
            assert_eq!(TABLE.iter().filter(|other| other.key() == api.key()).count(), 1, "{:?}", api.key());
        }
    }
}
