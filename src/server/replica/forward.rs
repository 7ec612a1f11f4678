//! `Forward` over the native protocol: a delivery into a queue that moved
//! to another broker group is a durable Produce to that group's leader's
//! shard (one connection per delivery: they are rare, and each is retried
//! by its caller until stored).

use super::link::Link;
use crate::protocol::messages::{decode_produced, Produce, QueueRef, ACKS_DURABLE};
use crate::protocol::{ApiKey, ErrorCode, Reader, Writer};
use crate::server::core::forward::Forward;
use crate::server::core::placement::Place;
use crate::server::core::{Core, Failure, Reason};
use futures_util::future::LocalBoxFuture;
use std::time::Duration;

/// A connect or a produce that takes longer than this fails (and is retried).
const IO_TIMEOUT: Duration = Duration::from_secs(10);

/// Produces through the client listener of the queue's leader.
pub struct Produces;

impl Produces {
    async fn produce(core: &Core, place: &Place, q: &QueueRef, batch: &[u8]) -> Result<(), Failure> {
        let unavailable = |why: String| Failure(Reason::NotLeader, why);
        let addr = {
            let view = core.placement().expect("cluster mode").view.borrow();
            view.global(place).and_then(|i| view.shard_addrs().get(i as usize).cloned()).unwrap_or_default()
        };
        let addr = addr
            .parse()
            .map_err(|_| unavailable(format!("broker group {:?} has no leader now", place.broker_group)))?;
        let config = core.config();
        let mut link = Link::connect(addr, config.tls.as_ref(), IO_TIMEOUT, config.frame_bytes_max)
            .await
            .map_err(|e| unavailable(e.to_string()))?;
        let mut w = Writer::default();
        Produce { queue: q.clone(), acks: ACKS_DURABLE, batches: vec![batch] }.encode(&mut w);
        let answer = link.call(ApiKey::Produce, &w.buf, IO_TIMEOUT).await.map_err(|e| unavailable(e.to_string()))?;
        let response = answer.response().map_err(|e| unavailable(e.to_string()))?;
        if response.error != ErrorCode::None {
            let m =
                format!("broker group {:?} refused: {:?}: {}", place.broker_group, response.error, response.message);
            return Err(unavailable(m));
        }
        decode_produced(&mut Reader::new(response.body)).map_err(|e| unavailable(e.to_string()))?;
        Ok(())
    }
}

impl Forward for Produces {
    fn append<'a>(
        &'a self,
        core: &'a Core,
        place: &'a Place,
        q: &'a QueueRef,
        batch: &'a [u8],
    ) -> LocalBoxFuture<'a, Result<(), Failure>> {
        Box::pin(Produces::produce(core, place, q, batch))
    }
}
