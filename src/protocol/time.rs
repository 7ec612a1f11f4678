//! Time as the wire carries it: durations as u32 milliseconds and the Unix
//! time in milliseconds.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Milliseconds of `d` for a u32 wire field (saturating).
pub fn millis_u32(d: Duration) -> u32 {
    d.as_millis().min(u128::from(u32::MAX)) as u32
}

/// Milliseconds since the Unix epoch by this host's clock.
pub fn unix_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}
