//! Produce: record batches to one queue, on the shard that owns it, every
//! batch checked before any is stored; acks none gets no answer at all.

use super::{check_acks, Api, At, Need, Route};
use crate::protocol::codec::{DecodeError, Reader};
use crate::protocol::messages::{self as msg, ACKS_NONE};
use crate::protocol::{ApiKey, Writer};
use crate::security::acl::Operation::Write;
use crate::server::auth::authorizer::topic;
use crate::server::core::{Core, Failure};
use crate::server::data::produce;
use crate::server::wire::caller::Caller;
use crate::server::wire::traffic::produced;
use crate::server::wire::Services;

pub struct Produce;

impl Api for Produce {
    const KEY: ApiKey = ApiKey::Produce;
    const BODIES: (&'static str, &'static str) = (
        "string topic, u32 queue, u8 acks (0 none, 1 durable), [bytes record_batch]",
        "[u64 base_offset, u32 record_count] per batch",
    );
    type Request<'a> = msg::Produce<'a>;

    fn decode<'a>(r: &mut Reader<'a>, _: u16) -> Result<msg::Produce<'a>, DecodeError> {
        msg::Produce::decode(r)
    }

    fn check(p: &msg::Produce, _: &Core) -> Result<(), Failure> {
        check_acks(p.acks)
    }

    fn authorize(p: &msg::Produce, need: &mut Need) -> Result<(), Failure> {
        need(Write, topic(&p.queue.topic))
    }

    fn route<'r>(p: &'r msg::Produce) -> Route<'r> {
        Route::Queue(&p.queue)
    }

    fn produced_bytes(p: &msg::Produce) -> u64 {
        p.batches.iter().map(|b| b.len() as u64).sum()
    }

    fn silent(p: &msg::Produce) -> bool {
        p.acks == ACKS_NONE
    }

    fn refused(core: &Core, p: &msg::Produce, caller: &Caller) {
        produced(core, caller, "Produce", &p.queue, &p.batches, None);
    }

    async fn serve(s: &Services, p: Self::Request<'_>, at: &At<'_>, w: &mut Writer) -> Result<(), Failure> {
        let core = &s.core;
        let stored = produce::produce(core, at.slot()?, &p.batches).await;
        produced(core, at.caller, "Produce", &p.queue, &p.batches, stored.as_deref().ok());
        msg::encode_produced(&stored?, w);
        Ok(())
    }
}
