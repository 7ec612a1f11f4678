//! Messages delivered later: the 18 delay levels (`levels.rs`), the timer
//! for any due time (`timer.rs` over `timing_wheel.rs`), and consumer
//! retries with back-off and a dead-letter topic (`retry.rs`), which ride
//! on the levels; their metrics (`probe.rs`).

pub mod levels;
pub mod probe;
pub mod retry;
pub mod timer;
pub mod timing_wheel;
