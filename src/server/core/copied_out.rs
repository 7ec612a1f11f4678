//! Queues of this shard being copied to another broker group (a move's
//! source): the compactor leaves them as they are, so that the compacted
//! part a copy started from stays the one it reads to its end. A copy
//! reads every few hundred milliseconds until its move switches; a queue
//! not read for `COPY_HOLD` is compacted again (a cancelled move).

use ringmq_shards::QueueId;
use std::cell::RefCell;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// How long after its last copy read a queue stays uncompacted.
const COPY_HOLD: Duration = Duration::from_secs(60);

/// When each queue was last read by a copy.
#[derive(Default)]
pub struct CopiedOut {
    read_at: RefCell<HashMap<QueueId, Instant>>,
}

impl CopiedOut {
    /// A copy reads `queue` now.
    pub fn note(&self, queue: QueueId) {
        let now = Instant::now();
        let mut read_at = self.read_at.borrow_mut();
        read_at.retain(|_, at| now.duration_since(*at) <= COPY_HOLD);
        read_at.insert(queue, now);
    }

    /// True while a copy read `queue` within `COPY_HOLD`.
    pub fn recently(&self, queue: QueueId) -> bool {
        self.read_at.borrow().get(&queue).is_some_and(|at| at.elapsed() <= COPY_HOLD)
    }
}
