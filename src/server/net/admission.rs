//! Connections per client address, counted across the node's shards and
//! listeners (native and Kafka), so one address cannot take every
//! connection a node has (`connections_per_ip_max`; 0: no limit); each
//! shard's client connections over both client listeners, held to
//! `connections_max`; and its open and accepted connections per listener,
//! for its metrics. Every listener admits through `Net::admit`.

use crate::server::core::metrics::Samples;
use ringmq_shards::Signal;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::net::IpAddr;
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Why a connection is refused.
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    #[error("{ip} already has {max} connections to this node (--connections-per-ip-max)")]
    PerAddress { ip: IpAddr, max: usize },
    #[error("shard {shard} already serves {max} client connections over its listeners (--connections-max)")]
    Shard { shard: usize, max: usize },
    #[error("the client's address: {0}")]
    NoAddress(glommio::GlommioError<()>),
}

/// The node's open connections by client address.
#[derive(Debug, Default)]
pub struct PerAddress {
    max: usize,
    open: Mutex<HashMap<IpAddr, usize>>,
}

/// One admitted connection; its count is given back when dropped.
#[derive(Debug)]
pub struct Admitted {
    limits: Arc<PerAddress>,
    ip: IpAddr,
}

impl PerAddress {
    pub fn new(max: usize) -> PerAddress {
        PerAddress { max, open: Mutex::default() }
    }

    /// Counts a new connection from `ip`, unless that address is at its limit.
    pub fn admit(self: &Arc<Self>, ip: IpAddr) -> Result<Admitted, Refused> {
        let mut open = self.open.lock().expect("connection counts lock");
        let count = open.entry(ip).or_insert(0);
        if self.max > 0 && *count >= self.max {
            return Err(Refused::PerAddress { ip, max: self.max });
        }
        *count += 1;
        Ok(Admitted { limits: self.clone(), ip })
    }
}

impl Drop for Admitted {
    fn drop(&mut self) {
        let mut open = self.limits.open.lock().expect("connection counts lock");
        if let Some(count) = open.get_mut(&self.ip) {
            *count -= 1;
            if *count == 0 {
                open.remove(&self.ip);
            }
        }
    }
}

/// One shard's connections per listener (`native`, `kafka`, `admin`): open now, and accepted since start.
#[derive(Debug, Default)]
pub struct ShardConnections {
    counts: RefCell<HashMap<&'static str, (u64, u64)>>,
    /// Client connections open over every client listener (`connections_max`).
    clients: Cell<usize>,
    /// A client connection closed.
    closed: Signal,
}

/// A connection counted open on its shard until dropped.
#[derive(Debug)]
pub struct Open {
    shard: Rc<ShardConnections>,
    listener: &'static str,
    /// Its admission by client address.
    _admitted: Admitted,
    /// Counted among the shard's client connections (`connections_max`).
    client: bool,
}

impl ShardConnections {
    /// Counts a client connection to `listener` open, holding its
    /// per-address admission, unless the shard already serves `max` client
    /// connections over all its client listeners.
    pub fn admit(
        self: &Rc<Self>,
        shard: usize,
        listener: &'static str,
        admitted: Admitted,
        max: usize,
    ) -> Result<Open, Refused> {
        if self.clients.get() >= max {
            return Err(Refused::Shard { shard, max });
        }
        self.clients.set(self.clients.get() + 1);
        Ok(self.count_open(listener, admitted, true))
    }

    /// Counts a connection that is not a client's (the admin listener's)
    /// open, holding its per-address admission.
    pub fn open(self: &Rc<Self>, listener: &'static str, admitted: Admitted) -> Open {
        self.count_open(listener, admitted, false)
    }

    fn count_open(self: &Rc<Self>, listener: &'static str, admitted: Admitted, client: bool) -> Open {
        let mut counts = self.counts.borrow_mut();
        let (open, accepted) = counts.entry(listener).or_default();
        *open += 1;
        *accepted += 1;
        Open { shard: self.clone(), listener, _admitted: admitted, client }
    }

    /// Waits until every client connection has closed, for at most
    /// `limit`; false if some are still open (a stopping shard waits so,
    /// while its connections answer what they read).
    pub async fn all_closed(&self, limit: Duration) -> bool {
        let deadline = std::time::Instant::now() + limit;
        while self.clients.get() > 0 {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return false;
            }
            self.closed.wait_for(left).await;
        }
        true
    }

    pub fn collect(&self, out: &mut Samples) {
        let open_help = "Client connections open on the shard, per listener.";
        let accepted_help = "Client connections accepted by the shard since it started, per listener.";
        for (listener, (open, accepted)) in self.counts.borrow().iter() {
            out.gauge("ringmq_connections", open_help, &[("listener", listener)], *open as f64);
            out.counter("ringmq_connections_accepted", accepted_help, &[("listener", listener)], *accepted);
        }
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        let mut counts = self.shard.counts.borrow_mut();
        if let Some((open, _)) = counts.get_mut(self.listener) {
            *open -= 1;
        }
        if self.client {
            let clients = self.shard.clients.get();
            assert!(clients > 0, "a client connection closed that was never counted");
            self.shard.clients.set(clients - 1);
            self.shard.closed.notify();
        }
    }
}
