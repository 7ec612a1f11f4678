//! The native protocol's edge: connections read frames, `dispatch.rs` turns
//! each into a typed request, routes it (to the queue's owner, the group's
//! coordinator), calls the core service or the feature that serves it, and
//! encodes the answer. Nothing below the wire sees a frame.

mod authorize;
pub mod connection;
pub mod dispatch;
mod sasl;

use crate::server::core::mesh::{Answer, Call, Serve};
use crate::server::core::Core;
use crate::server::delay::timer::Timer;
use crate::server::groups::Groups;
use crate::server::tx::Transactions;
use std::rc::Rc;

/// What one shard's wire serves from: its core and each feature's state.
pub struct Services {
    pub core: Rc<Core>,
    pub groups: Rc<Groups>,
    pub timer: Rc<Timer>,
    pub transactions: Rc<Transactions>,
}

/// Serves the calls of other shards: a forwarded client frame through the
/// wire, everything else through the core.
pub fn serve_calls(services: &Rc<Services>) -> Serve {
    let services = services.clone();
    Rc::new(move |call| {
        let services = services.clone();
        Box::pin(async move {
            match call {
                Call::Frame(frame) => Answer::Frame(
                    dispatch::handle(&services, frame, &dispatch::Caller::Shard).await.unwrap_or_default(),
                ),
                other => services.core.serve_call(other).await,
            }
        })
    })
}
