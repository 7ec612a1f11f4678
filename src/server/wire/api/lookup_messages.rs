//! LookupMessages: messages by id or by key, from this shard's lookup
//! index, each confirmed against its record.

use super::{Api, At, Need};
use crate::protocol::codec::{DecodeError, Reader};
use crate::protocol::messages::LookupQuery;
use crate::protocol::{ApiKey, Writer};
use crate::security::acl::Operation::Read;
use crate::server::auth::authorizer::topic;
use crate::server::core::Failure;
use crate::server::data::lookup;
use crate::server::wire::Services;

pub struct LookupMessages;

impl Api for LookupMessages {
    const KEY: ApiKey = ApiKey::LookupMessages;
    const BODIES: (&'static str, &'static str) = (
        "u8 kind (0 id, 1 key); id: bytes message_id (16); key: string topic, bytes key",
        "u32 removed, [string topic, u32 queue, bytes batch]",
    );
    type Request<'a> = LookupQuery;

    fn decode(r: &mut Reader, _: u16) -> Result<LookupQuery, DecodeError> {
        LookupQuery::decode(r)
    }

    /// By key: the topic must be readable; by id: the answer is filtered.
    fn authorize(query: &LookupQuery, need: &mut Need) -> Result<(), Failure> {
        match query {
            LookupQuery::Key { topic: t, .. } => need(Read, topic(t)),
            LookupQuery::Id(_) => Ok(()),
        }
    }

    async fn serve(s: &Services, query: Self::Request<'_>, at: &At<'_>, w: &mut Writer) -> Result<(), Failure> {
        let core = &s.core;
        let mut looked_up = lookup::lookup(core, &query).await?;
        looked_up.found.retain(|(topic, ..)| at.caller.reads(core, topic));
        looked_up.encode(w);
        Ok(())
    }
}
