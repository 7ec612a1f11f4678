//! Client connections, what every listener of a shard shares: listening
//! sockets (`socket.rs`), admission by client address and by shard
//! (`admission.rs`), the connection's stream in the clear or under TLS
//! (`stream.rs`, the replication link's too), the bytes of requests held
//! (`request_budget.rs`), the requests read and not answered at a stop
//! (`in_flight.rs`), and the connection loop both client protocols run,
//! parameterised by their framing and response order (`connection.rs`).
//! Below the edges (native, Kafka, admin) and above the core.

pub mod admission;
pub mod connection;
pub mod in_flight;
pub mod request_budget;
pub mod socket;
pub mod stream;

use crate::server::core::metrics::{Probe, Samples};
use crate::server::core::Core;
use admission::{Open, PerAddress, Refused, ShardConnections};
use glommio::net::TcpStream;
use request_budget::RequestBudget;
use std::net::IpAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

/// One shard's connection state, shared by its listeners.
pub struct Net {
    shard: usize,
    connections_max: usize,
    /// The node's connections by client address.
    per_address: Arc<PerAddress>,
    /// This shard's connections per listener.
    connections: Rc<ShardConnections>,
    /// Bytes of client requests the shard's connections may hold.
    request_budget: RequestBudget,
}

impl Net {
    /// The shard's connection state; its metrics join the core's.
    pub fn new(core: &Core, per_address: Arc<PerAddress>) -> Rc<Net> {
        let config = core.config();
        let net = Rc::new(Net {
            shard: core.id(),
            connections_max: config.connections_max,
            per_address,
            connections: Rc::default(),
            request_budget: RequestBudget::new(
                config.request_bytes_per_shard_max,
                config.request_bytes_per_connection_max,
            ),
        });
        let probe: Rc<dyn Probe> = net.clone();
        core.probes().register(&probe);
        net
    }

    /// Admits a new connection from `ip` to `listener`: within the node's
    /// per-address limit (`connections_per_ip_max`) on every listener, and
    /// for the client listeners (native, Kafka) within the shard's
    /// `connections_max` too (the admin listener stays reachable when
    /// clients fill the shard); why not otherwise.
    pub fn admit(&self, ip: IpAddr, listener: Listener) -> Result<Open, Refused> {
        let admitted = self.per_address.admit(ip)?;
        match listener {
            Listener::Client(name) => self.connections.admit(self.shard, name, admitted, self.connections_max),
            Listener::Admin => Ok(self.connections.open("admin", admitted)),
        }
    }

    /// `admit` for an accepted connection, by its peer's address.
    pub fn admit_peer(&self, tcp: &TcpStream, listener: Listener) -> Result<Open, Refused> {
        let peer = tcp.peer_addr().map_err(Refused::NoAddress)?;
        self.admit(peer.ip(), listener)
    }

    /// The bytes of client requests this shard's connections may hold.
    pub fn request_budget(&self) -> &RequestBudget {
        &self.request_budget
    }

    /// Waits until every client connection has closed, for at most `limit`;
    /// false if some are still open.
    pub async fn all_closed(&self, limit: Duration) -> bool {
        self.connections.all_closed(limit).await
    }
}

/// Which listener a connection came to.
#[derive(Debug, Clone, Copy)]
pub enum Listener {
    /// A client listener: native or Kafka.
    Client(&'static str),
    /// The admin HTTP listener.
    Admin,
}

impl Probe for Net {
    fn collect(&self, out: &mut Samples) {
        self.connections.collect(out);
    }
}
