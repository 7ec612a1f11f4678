//! Connections per client address, counted across the node's shards and
//! listeners (native and Kafka), so one address cannot take every
//! connection a node has (`max_connections_per_ip`; 0: no limit).

use std::collections::HashMap;
use std::net::IpAddr;
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
