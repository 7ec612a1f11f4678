//! Failure probes: tests tell the shard to fail its next writes, syncs or reads,
//! or to hold its log writes back (a slow disk), so that error paths and
//! what happens while a write is at the disk are exercised rather than hoped for.

use crate::signal::Signal;
use std::cell::Cell;

/// Counters of injected failures still to deliver.
#[derive(Debug, Default)]
pub struct FailureProbes {
    writes: Cell<u32>,
    syncs: Cell<u32>,
    reads: Cell<u32>,
    held: Cell<bool>,
    released: Signal,
}

impl FailureProbes {
    /// Fails the next `n` log writes.
    pub fn fail_writes(&self, n: u32) {
        self.writes.set(n);
    }

    /// Fails the next `n` fdatasyncs.
    pub fn fail_syncs(&self, n: u32) {
        self.syncs.set(n);
    }

    /// Fails the next `n` reads from disk.
    pub fn fail_reads(&self, n: u32) {
        self.reads.set(n);
    }

    /// Holds every log write that starts from now on before it reaches the
    /// disk, until called with false.
    pub fn hold_writes(&self, held: bool) {
        self.held.set(held);
        if !held {
            self.released.notify();
        }
    }

    /// Waits while log writes are held.
    pub(crate) async fn while_held(&self) {
        while self.held.get() {
            self.released.wait().await;
        }
    }

    pub(crate) fn write(&self) -> std::io::Result<()> {
        take(&self.writes, "write")
    }

    pub(crate) fn sync(&self) -> std::io::Result<()> {
        take(&self.syncs, "fdatasync")
    }

    pub(crate) fn read(&self) -> std::io::Result<()> {
        take(&self.reads, "read")
    }
}

fn take(counter: &Cell<u32>, what: &str) -> std::io::Result<()> {
    match counter.get() {
        0 => Ok(()),
        n => {
            counter.set(n - 1);
            Err(std::io::Error::other(format!("injected {what} failure")))
        }
    }
}
