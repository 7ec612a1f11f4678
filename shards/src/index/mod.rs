//! The per-queue index, its file preallocator, and the checkpoint that
//! writes it out.

pub(crate) mod checkpoint;
pub(crate) mod preallocator;
pub(crate) mod queue_index;

pub use queue_index::IndexEntry;
pub(crate) use queue_index::QueueIndex;
