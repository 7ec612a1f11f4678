//! Metadata: every shard's address and each named topic's queues with
//! their owners (all topics the caller may describe when none is named).

use super::{Api, At, Need};
use crate::protocol::codec::{DecodeError, Reader};
use crate::protocol::messages::{decode_names, MetadataResponse, ShardAddr, TopicInfo};
use crate::protocol::{ApiKey, Writer};
use crate::security::acl::Operation::Describe;
use crate::server::auth::authorizer::topic;
use crate::server::core::metadata::ClientView;
use crate::server::core::Failure;
use crate::server::wire::codes::flush_code;
use crate::server::wire::Services;

pub struct Metadata;

impl Api for Metadata {
    const KEY: ApiKey = ApiKey::Metadata;
    const BODIES: (&'static str, &'static str) = (
        "[string topic] (empty: all topics)",
        "[u32 shard, string address] shards; [string name, u8 flush, [u32 owning_shard] by queue] topics",
    );
    type Request<'a> = Vec<String>;

    fn decode(r: &mut Reader, _: u16) -> Result<Vec<String>, DecodeError> {
        decode_names(r)
    }

    /// Listed topics are filtered; named ones must be describable.
    fn authorize(names: &Vec<String>, need: &mut Need) -> Result<(), Failure> {
        names.iter().try_for_each(|n| need(Describe, topic(n)))
    }

    async fn serve(s: &Services, names: Self::Request<'_>, at: &At<'_>, w: &mut Writer) -> Result<(), Failure> {
        let core = &s.core;
        let metadata = core.metadata();
        if let Some(unknown) = names.iter().find(|n| !metadata.topics.contains_key(*n)) {
            return Err(Failure::unknown_topic(unknown));
        }
        let mut described = core.describe(&names);
        described.topics.retain(|t| at.caller.sees(core, &t.name));
        response(described).encode(w);
        Ok(())
    }
}

/// The wire's form of what clients see.
fn response(view: ClientView) -> MetadataResponse {
    let shards =
        view.shard_addrs.into_iter().enumerate().map(|(i, addr)| ShardAddr { shard: i as u32, addr }).collect();
    let topics = view
        .topics
        .into_iter()
        .map(|t| TopicInfo { name: t.name, flush: flush_code(t.flush), queue_shards: t.queue_shards })
        .collect();
    MetadataResponse { shards, topics }
}
