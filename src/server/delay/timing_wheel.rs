//! A hierarchical timing wheel (as in Linux timers and Kafka's purgatory):
//! 4 levels of 256 slots; level 0 slots are one tick wide, each level's
//! slots 256 times wider than the one below. A timer sits in the level whose
//! span holds its delay and moves down at most three times (when its slot of
//! a higher level comes round), so inserting and firing cost O(1) whatever
//! the number pending. A timer fires at the first advance whose time is at
//! or past its due time: never early, and never later than the caller's
//! next advance.

const SLOTS: u64 = 256;
const LEVELS: usize = 4;

/// Pending timers: (due ms, payload).
pub struct TimingWheel<T> {
    tick_ms: u64,
    /// The last tick processed.
    now_tick: u64,
    levels: Vec<Vec<Vec<(u64, T)>>>,
    /// Timers in each level (an empty level 0 is skipped a rotation at a time).
    level_len: [usize; LEVELS],
    /// Beyond the top level's span (more than ~497 days at 10 ms ticks).
    far: Vec<(u64, T)>,
    len: usize,
}

impl<T> TimingWheel<T> {
    /// An empty wheel whose clock reads `now_ms`.
    pub fn new(tick_ms: u64, now_ms: u64) -> Self {
        let levels = (0..LEVELS).map(|_| (0..SLOTS).map(|_| Vec::new()).collect()).collect();
        TimingWheel {
            tick_ms: tick_ms.max(1),
            now_tick: now_ms / tick_ms.max(1),
            levels,
            level_len: [0; LEVELS],
            far: Vec::new(),
            len: 0,
        }
    }

    /// Timers pending.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Adds a timer; one already due fires at the next `advance`.
    pub fn insert(&mut self, due_ms: u64, item: T) {
        self.len += 1;
        self.place(due_ms, item);
    }

    /// Files a timer under its tick (the current one if that has passed).
    fn place(&mut self, due_ms: u64, item: T) {
        let due_tick = (due_ms / self.tick_ms).max(self.now_tick);
        let delta = due_tick - self.now_tick;
        for level in 0..LEVELS {
            if delta < SLOTS.pow(level as u32 + 1) {
                let slot = (due_tick >> (8 * level)) % SLOTS;
                self.levels[level][slot as usize].push((due_ms, item));
                self.level_len[level] += 1;
                return;
            }
        }
        self.far.push((due_ms, item));
    }

    /// Moves the clock to `now_ms` and returns the timers that fell due, in
    /// tick order.
    pub fn advance(&mut self, now_ms: u64) -> Vec<(u64, T)> {
        let target = now_ms / self.tick_ms;
        let mut due = Vec::new();
        loop {
            // The current tick's slot: what is due by now fires, the rest of
            // this tick waits for the next call.
            let slot = (self.now_tick % SLOTS) as usize;
            if !self.levels[0][slot].is_empty() {
                let (mut fire, keep): (Vec<_>, Vec<_>) =
                    std::mem::take(&mut self.levels[0][slot]).into_iter().partition(|(d, _)| *d <= now_ms);
                self.levels[0][slot] = keep;
                self.level_len[0] -= fire.len();
                fire.sort_by_key(|(d, _)| *d);
                due.extend(fire);
            }
            if self.now_tick >= target || self.len == due.len() {
                break;
            }
            if self.level_len[0] == 0 {
                // Nothing in level 0: jump to the next cascade (or the target).
                let next_cascade = (self.now_tick / SLOTS + 1) * SLOTS;
                if next_cascade > target {
                    break;
                }
                self.now_tick = next_cascade;
            } else {
                self.now_tick += 1;
            }
            self.cascade();
        }
        self.now_tick = self.now_tick.max(target);
        self.len -= due.len();
        due
    }

    /// When a level's slot comes round, its timers move down a level.
    fn cascade(&mut self) {
        for level in 1..LEVELS {
            if !self.now_tick.is_multiple_of(SLOTS.pow(level as u32)) {
                return;
            }
            let slot = ((self.now_tick >> (8 * level)) % SLOTS) as usize;
            let moving = std::mem::take(&mut self.levels[level][slot]);
            self.level_len[level] -= moving.len();
            for (due_ms, item) in moving {
                self.place(due_ms, item);
            }
        }
        if self.now_tick.is_multiple_of(SLOTS.pow(LEVELS as u32)) {
            for (due_ms, item) in std::mem::take(&mut self.far) {
                self.place(due_ms, item);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn timers_fire_in_due_order_and_never_early() {
        let mut w = TimingWheel::new(10, 1_000);
        for (due, id) in [(1_095, 'c'), (1_001, 'a'), (1_010, 'b'), (500, 'p'), (1_000 + 3_600_000, 'h')] {
            w.insert(due, id);
        }
        assert_eq!(w.len(), 5);
        let fired: Vec<char> = w.advance(1_000).into_iter().map(|(_, c)| c).collect();
        assert_eq!(fired, vec!['p'], "only what was already due; 1,001 is not due at 1,000");
        let fired: Vec<char> = w.advance(1_001).into_iter().map(|(_, c)| c).collect();
        assert_eq!(fired, vec!['a'], "due within the current tick: fires at its time");
        let fired: Vec<char> = w.advance(1_100).into_iter().map(|(_, c)| c).collect();
        assert_eq!(fired, vec!['b', 'c']);
        assert!(w.advance(1_000 + 3_599_999).is_empty());
        assert_eq!(w.advance(1_000 + 3_600_000), vec![(1_000 + 3_600_000, 'h')]);
        assert_eq!(w.len(), 0);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn every_timer_fires_once_at_its_first_tick_at_or_after_due(
            dues in proptest::collection::vec(0u64..40_000_000, 1..200),
            steps in proptest::collection::vec(1u64..3_000_000, 1..40),
        ) {
            let start = 5_000_000;
            let mut w = TimingWheel::new(10, start);
            for (i, d) in dues.iter().enumerate() {
                w.insert(start + d, i);
            }
            let mut now = start;
            let mut fired = vec![None; dues.len()];
            for step in steps.iter().chain(std::iter::once(&50_000_000)) {
                let before = now;
                now += step;
                for (due, i) in w.advance(now) {
                    prop_assert!(fired[i].is_none(), "fired twice");
                    prop_assert!(due <= now, "fired before due");
                    prop_assert!(due > before || before == start, "not fired at the first advance past due");
                    fired[i] = Some(now);
                }
            }
            prop_assert!(fired.iter().all(Option::is_some));
            prop_assert_eq!(w.len(), 0);
        }
    }
}
