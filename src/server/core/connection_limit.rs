//! Connections per client address, counted across the node's shards and
//! listeners (native and Kafka), so one address cannot take every
//! connection a node has (`max_connections_per_ip`; 0: no limit); and each
//! shard's open and accepted connections per listener, for its metrics.

use super::metrics::Samples;
use std::cell::RefCell;
use std::collections::HashMap;
use std::net::IpAddr;
use std::rc::Rc;
use std::sync::{Arc, Mutex};

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
    pub fn admit(self: &Arc<Self>, ip: IpAddr) -> Result<Admitted, String> {
        let mut open = self.open.lock().expect("connection counts lock");
        let count = open.entry(ip).or_insert(0);
        if self.max > 0 && *count >= self.max {
            return Err(format!("{ip} already has {} connections to this node (max_connections_per_ip)", self.max));
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
}

/// A connection counted open on its shard until dropped.
#[derive(Debug)]
pub struct Open {
    shard: Rc<ShardConnections>,
    listener: &'static str,
    _admitted: Option<Admitted>,
}

impl ShardConnections {
    /// Counts a connection to `listener` open (holding its per-address admission, if any).
    pub fn open(self: &Rc<Self>, listener: &'static str, admitted: Option<Admitted>) -> Open {
        let mut counts = self.counts.borrow_mut();
        let (open, accepted) = counts.entry(listener).or_default();
        *open += 1;
        *accepted += 1;
        Open { shard: self.clone(), listener, _admitted: admitted }
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
        let (open, _) = counts.get_mut(self.listener).expect("counted when opened");
        *open -= 1;
    }
}
