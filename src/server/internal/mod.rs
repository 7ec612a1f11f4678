//! What the broker keeps in its own storage queues, below the core and every
//! feature: the registry of reserved queue ids and helpers over them, the
//! stamp a record carries while it waits for delivery, delivered-offset
//! marks, the retention floor, snapshots of a keyed queue, and one stored batch
//! read back. Imports only
//! the storage engine.

pub mod marks;
pub mod queues;
pub mod retention_floor;
pub mod snapshots;
pub mod stamp;
pub mod stored_batch;
