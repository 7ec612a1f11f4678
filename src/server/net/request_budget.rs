//! The bytes of client requests a shard holds at once, bounded per
//! connection and per shard (`request_bytes_per_connection_max`,
//! `request_bytes_per_shard_max`), on both client listeners. A frame's bytes
//! are reserved from both budgets after its length is read and before its
//! buffer is allocated, and given back once its response is written. At a
//! bound the connection is not read further (back-pressure through TCP to
//! the client), so many large requests cannot take memory without limit.

use glommio::sync::{Semaphore, StaticPermit};
use std::rc::Rc;

/// A shard's request budget, shared by its client connections.
pub struct RequestBudget {
    shard: Rc<Semaphore>,
    per_connection: usize,
}

/// One connection's share of its shard's budget.
pub struct ConnectionBudget {
    shard: Rc<Semaphore>,
    connection: Rc<Semaphore>,
}

/// Bytes held for one request, given back when dropped.
pub struct Reserved {
    _connection: StaticPermit,
    _shard: StaticPermit,
}

impl RequestBudget {
    /// `per_connection` must fit in `per_shard`, and a frame of the largest
    /// size in `per_connection` (the configuration checks both at start).
    pub fn new(per_shard: usize, per_connection: usize) -> RequestBudget {
        assert!(per_connection <= per_shard, "a connection's budget fits in its shard's");
        RequestBudget { shard: Rc::new(Semaphore::new(per_shard as u64)), per_connection }
    }

    /// The budget of a new connection.
    pub fn connection(&self) -> ConnectionBudget {
        ConnectionBudget { shard: self.shard.clone(), connection: Rc::new(Semaphore::new(self.per_connection as u64)) }
    }
}

impl ConnectionBudget {
    /// Waits until `bytes` fit in the connection's and the shard's budgets
    /// (in that order, so one connection waits for its own requests before it
    /// queues on the shard's), then holds them.
    pub async fn reserve(&self, bytes: usize) -> Reserved {
        let bytes = bytes as u64;
        let connection = self.connection.clone().acquire_static_permit(bytes).await;
        let shard = self.shard.clone().acquire_static_permit(bytes).await;
        // The semaphores are never closed: they live as long as their holders.
        Reserved {
            _connection: connection.expect("a connection's request budget is never closed"),
            _shard: shard.expect("a shard's request budget is never closed"),
        }
    }
}
