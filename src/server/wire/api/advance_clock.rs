//! AdvanceClock: moves a manual clock (`--manual-clock`, tests) forward,
//! so delayed messages and timeouts come due without waiting.

use super::{Api, At, Need};
use crate::protocol::codec::{DecodeError, Reader};
use crate::protocol::{ApiKey, Writer};
use crate::security::acl::Operation::ClusterAction;
use crate::server::auth::authorizer::cluster;
use crate::server::core::Failure;
use crate::server::wire::Services;

pub struct AdvanceClock;

impl Api for AdvanceClock {
    const KEY: ApiKey = ApiKey::AdvanceClock;
    const BODIES: (&'static str, &'static str) = ("u64 ms", "(empty)");
    type Request<'a> = u64;

    fn decode(r: &mut Reader, _: u16) -> Result<u64, DecodeError> {
        r.u64()
    }

    fn authorize(_: &u64, need: &mut Need) -> Result<(), Failure> {
        need(ClusterAction, cluster())
    }

    async fn serve(s: &Services, ms: Self::Request<'_>, _: &At<'_>, _: &mut Writer) -> Result<(), Failure> {
        if !s.core.clock().advance(ms) {
            return Err(Failure::invalid("the broker's clock is not manual (--manual-clock)"));
        }
        Ok(())
    }
}
