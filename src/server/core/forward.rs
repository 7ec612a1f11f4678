//! Deliveries into a queue that moved to another broker group. A delayed
//! message, a RocketMQ transaction's commit and the like are stored by the
//! timer or the transaction log of the group that owned the queue when the
//! client sent them; once the queue moved, that group appends them to the
//! queue's new owner over the network (`Forward`, made by the node's
//! replica layer) instead of retrying here forever.

use super::context::Core;
use super::failure::Failure;
use super::placement::Place;
use crate::protocol::messages::QueueRef;
use futures_util::future::LocalBoxFuture;
use std::rc::Rc;

/// Appends to a queue another broker group leads.
pub trait Forward {
    /// Appends `batch` durably to `q`, on the leader of `place` (as `core`'s node sees the cluster).
    fn append<'a>(
        &'a self,
        core: &'a Core,
        place: &'a Place,
        q: &'a QueueRef,
        batch: &'a [u8],
    ) -> LocalBoxFuture<'a, Result<(), Failure>>;
}

impl Core {
    /// Sets how this shard reaches other broker groups (a cluster leader's shard).
    pub fn set_forward(&self, forward: Rc<dyn Forward>) {
        *self.forward.borrow_mut() = Some(forward);
    }

    /// Appends `batch` to `q` wherever it lives: here, or through `Forward`
    /// to the group it moved to.
    pub(super) async fn append_anywhere(&self, q: &QueueRef, batch: &[u8]) -> Result<(), Failure> {
        let elsewhere = match self.home(q)? {
            super::metadata::Home::Group(place) => Some(place),
            _ => None,
        };
        let forward = self.forward.borrow().clone();
        match (elsewhere, forward) {
            (Some(place), Some(forward)) => forward.append(self, &place, q, batch).await,
            _ => self.append(q, batch).await.map(drop),
        }
    }
}
