//! The follower's end: a leader's shipped batches placed byte for byte at
//! the follower's end, which must be where they sat in the leader's log, and
//! made durable by the follower's own group commit.

use crate::batch::BatchHeader;
use crate::error::{Result, StorageError};
use crate::log::Blocked;
use crate::position::{LogPos, Offset, QueueId};
use crate::probe::stats::add;
use crate::replica::range::shipped_batches;
use crate::shard::{Inner, State};

impl Inner {
    /// Places the shipped batches that sat at log position `from` in the
    /// leader's log, then returns the durable end once they are durable.
    /// Refused whole, before anything is placed, when a batch is damaged.
    pub(crate) async fn mirror(&self, from: LogPos, bytes: &[u8]) -> Result<LogPos> {
        let batches = shipped_batches(bytes)
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|detail| self.diverged(from, format!("a shipped batch fails its check: {detail}")))?;
        {
            let st = self.state.borrow();
            if !st.log.is_mirror() {
                return Err(StorageError::WrongRole("this shard leads: it takes appends, not a leader's batches"));
            }
            if st.log.end() != from {
                return Err(self.diverged(from, format!("the follower's log ends at {}", st.log.end())));
            }
        }
        let mut at = from;
        for (header, batch) in batches {
            self.ensure_queue(QueueId(header.queue), header.is_padding()).await?;
            // Its index and lookup entries come from its records, in clear.
            let plain = crate::crypt::in_clear(self.config.keyring.as_deref(), batch, at.0)?;
            self.place_mirrored(at, &header, batch, &plain).await?;
            at += u64::from(header.length);
        }
        self.flush_needed.notify();
        self.synced_to(at).await
    }

    /// Creates a queue the leader appended to that this follower does not
    /// have yet (storage ids are never reused, so the leader made it).
    async fn ensure_queue(&self, queue: QueueId, padding: bool) -> Result<()> {
        if padding || self.state.borrow().queues.contains_key(&queue) {
            return Ok(());
        }
        self.create_queues(&[(queue, None)]).await
    }

    /// Places one shipped batch at `at`, the log's end, waiting while its
    /// round is full or the next segment is not ready.
    async fn place_mirrored(&self, at: LogPos, header: &BatchHeader, batch: &[u8], plain: &[u8]) -> Result<()> {
        loop {
            let wait = {
                let mut st = self.state.borrow_mut();
                if self.is_closed() {
                    return Err(StorageError::Closed);
                }
                if let Some(reason) = st.failed() {
                    return Err(StorageError::Failed(reason.to_string()));
                }
                debug_assert_eq!(st.log.end(), at, "batches are placed in order");
                match self.try_place(&mut st, at, header, batch, plain)? {
                    Ok(()) => return Ok(()),
                    Err(Blocked::Backpressure) => add(&self.counters.backpressure_waits, 1),
                    Err(Blocked::Segment) => {
                        add(&self.counters.segment_waits, 1);
                        self.spare_needed.notify();
                    }
                }
                self.flush_needed.notify();
                self.space_freed.wait()
            };
            wait.await;
        }
    }

    fn try_place(
        &self,
        st: &mut State,
        at: LogPos,
        header: &BatchHeader,
        batch: &[u8],
        plain: &[u8],
    ) -> Result<std::result::Result<(), Blocked>> {
        let segment_end = st.log.active_end();
        let end = at + u64::from(header.length);
        if end > segment_end {
            return Err(self.diverged(at, format!("the batch runs past the segment's end at {segment_end}")));
        }
        if header.is_padding() {
            let placed = st.log.mirror_padding(header.length);
            if placed.is_ok() && st.log.spare_wanted().is_some() {
                self.spare_needed.notify();
            }
            return Ok(placed);
        }
        let q = st.queues.get_mut(&QueueId(header.queue)).expect("ensured before");
        let Some(filled) = q.line_up(Offset(header.base_offset)) else {
            let detail =
                format!("queue {} is at offset {}, the batch starts at {}", header.queue, q.next(), header.base_offset);
            return Err(self.diverged(at, detail));
        };
        st.index_entries_added(filled);
        let State { queues, log, lookup, .. } = st;
        let q = queues.get_mut(&QueueId(header.queue)).expect("ensured before");
        let placed = match log.mirror(q, lookup, batch, plain) {
            Ok(placed) => placed,
            Err(blocked) => return Ok(Err(blocked)),
        };
        let wanted = q.file(q.file_wanted(self.config.index_file_entries)).is_none();
        st.index_entries_added(placed.appended.record_count as usize);
        if wanted {
            self.index_files_needed.notify();
        }
        let c = &self.counters;
        add(&c.appends, 1);
        add(&c.records, u64::from(placed.appended.record_count));
        add(&c.append_bytes, batch.len() as u64);
        Ok(Ok(()))
    }

    fn diverged(&self, position: LogPos, detail: String) -> StorageError {
        StorageError::Diverged { position: position.0, detail }
    }
}
