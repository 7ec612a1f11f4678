//! The broker's wall clock for due times (retries, delayed messages): Unix
//! milliseconds, which survive a restart. With `manual` set (tests), time
//! moves only when the AdvanceClock API says so, so no test sleeps through a
//! real back-off delay.

use crate::duration::unix_ms;
use std::sync::atomic::{AtomicU64, Ordering};

/// Shared by every shard; read on the scheduling path only.
#[derive(Debug, Default)]
pub struct Clock {
    manual: Option<AtomicU64>,
}

impl Clock {
    /// The system clock.
    pub fn system() -> Clock {
        Clock { manual: None }
    }

    /// A clock that starts at the system time and moves only when advanced.
    pub fn manual() -> Clock {
        Clock { manual: Some(AtomicU64::new(unix_ms())) }
    }

    /// Unix milliseconds now.
    pub fn now_ms(&self) -> u64 {
        self.manual.as_ref().map_or_else(unix_ms, |m| m.load(Ordering::Relaxed))
    }

    /// Moves a manual clock forward; false for the system clock.
    pub fn advance(&self, ms: u64) -> bool {
        self.manual.as_ref().map(|m| m.fetch_add(ms, Ordering::Relaxed)).is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_clock_moves_only_when_advanced() {
        let c = Clock::manual();
        let t = c.now_ms();
        std::thread::sleep(std::time::Duration::from_millis(5));
        assert_eq!(c.now_ms(), t);
        assert!(c.advance(10_000));
        assert_eq!(c.now_ms(), t + 10_000);
        assert!(!Clock::system().advance(1));
    }
}
