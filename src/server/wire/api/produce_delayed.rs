//! ProduceDelayed: a batch delivered to its queue at a delay level or a
//! given time, kept by the queue owner's timer until due.

use super::{Api, At, Need, Route};
use crate::protocol::codec::{DecodeError, Reader};
use crate::protocol::messages as msg;
use crate::protocol::{ApiKey, Writer};
use crate::security::acl::Operation::Write;
use crate::server::auth::authorizer::topic;
use crate::server::core::Failure;
use crate::server::wire::Services;

pub struct ProduceDelayed;

impl Api for ProduceDelayed {
    const KEY: ApiKey = ApiKey::ProduceDelayed;
    const BODIES: (&'static str, &'static str) = (
        "string topic, u32 queue, u32 delay_level, u64 deliver_at_ms, bytes record_batch",
        "u64 due_ms, u32 record_count",
    );
    const WRITES: bool = true;
    type Request<'a> = msg::ProduceDelayed<'a>;

    fn decode<'a>(r: &mut Reader<'a>, _: u16) -> Result<msg::ProduceDelayed<'a>, DecodeError> {
        msg::ProduceDelayed::decode(r)
    }

    fn authorize(p: &msg::ProduceDelayed, need: &mut Need) -> Result<(), Failure> {
        need(Write, topic(&p.queue.topic))
    }

    fn route<'r>(p: &'r msg::ProduceDelayed) -> Route<'r> {
        Route::Queue(&p.queue)
    }

    fn produced_bytes(p: &msg::ProduceDelayed) -> u64 {
        p.batch.len() as u64
    }

    async fn serve(s: &Services, p: Self::Request<'_>, _: &At<'_>, w: &mut Writer) -> Result<(), Failure> {
        let (due_ms, count) = s.timer.produce_delayed(&p).await?;
        w.u64(due_ms).u32(count);
        Ok(())
    }
}
