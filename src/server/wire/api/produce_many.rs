//! ProduceMany: one batch to each of many queues of this shard, each with
//! its own outcome; acks none gets no answer at all.

use super::{check_acks, Api, At, Need};
use crate::protocol::codec::{DecodeError, Reader};
use crate::protocol::messages::{self as msg, ACKS_NONE};
use crate::protocol::{ApiKey, Writer};
use crate::security::acl::Operation::Write;
use crate::server::auth::authorizer::topic;
use crate::server::core::{Core, Failure};
use crate::server::data::produce;
use crate::server::wire::codes;
use crate::server::wire::traffic::produced;
use crate::server::wire::Services;

pub struct ProduceMany;

impl Api for ProduceMany {
    const KEY: ApiKey = ApiKey::ProduceMany;
    const BODIES: (&'static str, &'static str) = (
        "u8 acks, [string topic, u32 queue, bytes record_batch]",
        "[u16 error, string message, u64 base_offset, u32 record_count] per entry",
    );
    type Request<'a> = msg::ProduceMany<'a>;

    fn decode<'a>(r: &mut Reader<'a>, _: u16) -> Result<msg::ProduceMany<'a>, DecodeError> {
        msg::ProduceMany::decode(r)
    }

    fn check(p: &msg::ProduceMany, _: &Core) -> Result<(), Failure> {
        check_acks(p.acks)
    }

    fn authorize(p: &msg::ProduceMany, need: &mut Need) -> Result<(), Failure> {
        p.entries.iter().try_for_each(|(q, _)| need(Write, topic(&q.topic)))
    }

    fn produced_bytes(p: &msg::ProduceMany) -> u64 {
        p.entries.iter().map(|(_, b)| b.len() as u64).sum()
    }

    fn silent(p: &msg::ProduceMany) -> bool {
        p.acks == ACKS_NONE
    }

    async fn serve(s: &Services, p: Self::Request<'_>, at: &At<'_>, w: &mut Writer) -> Result<(), Failure> {
        let core = &s.core;
        let outcomes = produce::produce_many(core, &p.entries).await;
        for ((queue, batch), outcome) in p.entries.iter().zip(&outcomes) {
            let stored = outcome.as_ref().ok().map(std::slice::from_ref);
            produced(core, at.caller, "ProduceMany", queue, std::slice::from_ref(batch), stored);
        }
        let outcomes: Vec<msg::EntryOutcome> = outcomes.into_iter().map(|o| o.map_err(codes::failed)).collect();
        msg::encode_produced_many(&outcomes, w);
        Ok(())
    }
}
