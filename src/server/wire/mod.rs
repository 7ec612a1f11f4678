//! The native protocol's edge: connections read frames, `dispatch.rs` finds
//! each request's API in the table (`api/`, one file per API) and that API
//! decodes, checks, routes (to the queue's owner, the group's coordinator)
//! and serves it through the core service or the feature that owns it.
//! Nothing below the wire sees a frame.

pub mod api;
pub mod caller;
pub mod codes;
pub mod connection;
pub mod dispatch;
mod sasl;
mod traffic;

use crate::server::core::mesh::{Answer, Call, Serve};
use crate::server::core::{Core, Failure, Reason};
use crate::server::delay::timer::Timer;
use crate::server::groups::Groups;
use crate::server::tx::coordinator::Coordinator;
use crate::server::tx::Transactions;
use caller::Caller;
use std::rc::Rc;

/// What one shard's wire serves from: its core and each feature's state.
pub struct Services {
    pub core: Rc<Core>,
    pub groups: Rc<Groups>,
    pub timer: Rc<Timer>,
    pub transactions: Rc<Transactions>,
}

/// Serves the calls of other shards: a forwarded client frame through the
/// wire, a Kafka transaction's check through this shard's transaction
/// coordinator (None: Kafka is not served), everything else through the core.
pub fn serve_calls(services: &Rc<Services>, coordinator: Option<Rc<Coordinator>>) -> Serve {
    let services = services.clone();
    Rc::new(move |call| {
        let (services, coordinator) = (services.clone(), coordinator.clone());
        Box::pin(async move {
            match call {
                Call::Frame(frame) => {
                    Answer::Frame(dispatch::handle(&services, frame, &Caller::Shard).await.unwrap_or_default())
                }
                Call::VerifyTxn { id, producer_id, epoch, partition } => Answer::Verified(match coordinator {
                    Some(c) => c.holds(&id, producer_id, epoch, &partition),
                    None => Err(Failure(Reason::NotLeader, "this shard serves no Kafka transactions".into())),
                }),
                other => services.core.serve_call(other).await,
            }
        })
    })
}
