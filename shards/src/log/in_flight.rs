//! Rounds the flusher took and has not published yet, readable by
//! replication: a leader ships a round to its followers while its own
//! durable write of it runs, so a replicated ack waits for the slower of
//! the two writes instead of one after the other. A round's bytes are final
//! once it is taken (its buffer is shared, never written again).

use crate::batch::Generation;
use crate::log::round::Round;
use crate::position::LogPos;
use glommio::io::DmaBuffer;
use std::collections::VecDeque;
use std::rc::Rc;

/// One taken round's new bytes.
struct Taken {
    /// First byte the round adds...
    start: LogPos,
    /// ...after its last byte in `buf`...
    data_end: LogPos,
    /// ...and the log position after it (past `data_end` for a padding round).
    end: LogPos,
    /// `buf[0]` sits at log position `aligned_start`.
    aligned_start: LogPos,
    buf: Rc<DmaBuffer>,
    /// The generation its segment's batches are sealed with.
    generation: Generation,
}

/// The taken rounds, in log order.
#[derive(Default)]
pub(crate) struct InFlight {
    rounds: VecDeque<Taken>,
}

impl InFlight {
    /// `round` was taken: it follows the last one taken.
    pub fn taken(&mut self, round: &Round) {
        if let Some(last) = self.rounds.back() {
            assert_eq!(last.end, round.start, "round {} is taken in log order", round.id);
        }
        self.rounds.push_back(Taken {
            start: round.start,
            data_end: round.data_end,
            end: round.end,
            aligned_start: round.aligned_start,
            buf: round.buf.clone(),
            generation: round.segment.generation,
        });
    }

    /// The oldest taken round, which starts at `start`, was written: readers
    /// find its bytes in the log from now on.
    pub fn written(&mut self, start: LogPos) {
        let oldest = self.rounds.pop_front().expect("a round is written after it is taken");
        assert_eq!(oldest.start, start, "rounds are written in the order they were taken");
    }

    /// After a failed write: nothing taken will be written.
    pub fn clear(&mut self) {
        self.rounds.clear();
    }

    /// The bytes from `at` to the end of the taken round holding it, and the
    /// generation they are sealed with; None when no taken round holds `at`.
    pub fn bytes_from(&self, at: LogPos) -> Option<(&[u8], Generation)> {
        let round = self.rounds.iter().find(|r| r.start <= at && at < r.end)?;
        let from = (at - round.aligned_start) as usize;
        let to = (round.data_end - round.aligned_start) as usize;
        Some((&round.buf.as_bytes()[from.min(to)..to], round.generation))
    }
}
