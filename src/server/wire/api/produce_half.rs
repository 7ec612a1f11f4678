//! ProduceHalf: a transaction's half message, held by the queue owner
//! until the producer commits or rolls it back (or a check-back decides).

use super::{Api, At, Need, Route};
use crate::protocol::codec::{DecodeError, Reader};
use crate::protocol::messages::Transactional;
use crate::protocol::{ApiKey, Writer};
use crate::security::acl::Operation::Write;
use crate::server::auth::authorizer::{topic, transactional};
use crate::server::core::Failure;
use crate::server::wire::Services;

pub struct ProduceHalf;

impl Api for ProduceHalf {
    const KEY: ApiKey = ApiKey::ProduceHalf;
    const BODIES: (&'static str, &'static str) =
        ("string topic, u32 queue, string group, bytes record_batch (one record), u64 0, u8 0", "u64 half_offset");
    const WRITES: bool = true;
    type Request<'a> = Transactional<'a>;

    fn decode<'a>(r: &mut Reader<'a>, _: u16) -> Result<Transactional<'a>, DecodeError> {
        Transactional::decode(r)
    }

    fn authorize(t: &Transactional, need: &mut Need) -> Result<(), Failure> {
        need(Write, transactional(&t.group))?;
        need(Write, topic(&t.queue.topic))
    }

    fn route<'r>(t: &'r Transactional) -> Route<'r> {
        Route::Queue(&t.queue)
    }

    fn produced_bytes(t: &Transactional) -> u64 {
        t.batch.len() as u64
    }

    async fn serve(s: &Services, t: Self::Request<'_>, _: &At<'_>, w: &mut Writer) -> Result<(), Failure> {
        w.u64(s.transactions.produce_half(&t).await?);
        Ok(())
    }
}
