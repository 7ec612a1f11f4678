//! SendBack: a consumer hands a message back for a later retry (to the
//! group's retry topic at a delay level) or, past its retries, to the
//! group's dead-letter topic; served on the queue's owner.

use super::{Api, At, Need, Route};
use crate::protocol::codec::{DecodeError, Reader};
use crate::protocol::messages as msg;
use crate::protocol::{ApiKey, Writer};
use crate::security::acl::Operation::Read;
use crate::server::auth::authorizer::{group, topic};
use crate::server::core::Failure;
use crate::server::delay::retry;
use crate::server::wire::Services;

pub struct SendBack;

impl Api for SendBack {
    const KEY: ApiKey = ApiKey::SendBack;
    const BODIES: (&'static str, &'static str) = (
        "string group, string topic, u32 queue, u64 offset, u32 max_retries, u32 delay_level, u8 dead_letter",
        "u8 dead_lettered, u32 reconsume_times, u64 due_ms",
    );
    const WRITES: bool = true;
    type Request<'a> = msg::SendBack;

    fn decode(r: &mut Reader, _: u16) -> Result<msg::SendBack, DecodeError> {
        msg::SendBack::decode(r)
    }

    fn authorize(b: &msg::SendBack, need: &mut Need) -> Result<(), Failure> {
        need(Read, group(&b.group))?;
        need(Read, topic(&b.queue.topic))
    }

    fn route(b: &msg::SendBack) -> Route<'_> {
        Route::Queue(&b.queue)
    }

    async fn serve(s: &Services, b: Self::Request<'_>, at: &At<'_>, w: &mut Writer) -> Result<(), Failure> {
        retry::send_back(&s.core, &b, at.slot()?, s.timer.send_backs()).await?.encode(w);
        Ok(())
    }
}
