//! EndTransaction: commits (delivers) or rolls back a half message, on the
//! queue's owner.

use super::{Api, At, Need, Route};
use crate::protocol::codec::{DecodeError, Reader};
use crate::protocol::messages::Transactional;
use crate::protocol::{ApiKey, Writer};
use crate::security::acl::Operation::Write;
use crate::server::auth::authorizer::{topic, transactional};
use crate::server::core::Failure;
use crate::server::wire::Services;

pub struct EndTransaction;

impl Api for EndTransaction {
    const KEY: ApiKey = ApiKey::EndTransaction;
    const BODIES: (&'static str, &'static str) = (
        "string topic, u32 queue, string group, bytes (empty), u64 half_offset, u8 commit",
        "u8 outcome (1 committed, 2 rolled back)",
    );
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

    async fn serve(s: &Services, t: Self::Request<'_>, _: &At<'_>, w: &mut Writer) -> Result<(), Failure> {
        w.u8(s.transactions.end_requested(t.half, t.commit).await?);
        Ok(())
    }
}
