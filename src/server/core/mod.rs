//! The core every feature stands on: one shard's context (storage,
//! metadata, mesh, clock, offsets), the typed service features and the wire
//! call (append, read, topics, offsets), the mesh between shards, the task
//! registry, configuration and the data directory's layout.
//!
//! Core imports nothing from the features or the wire (checked by
//! `.ci/layers`).

pub mod accounts;
pub mod clock;
pub mod cluster_id;
pub mod config;
pub mod context;
pub mod copied_out;
pub mod failure;
pub mod forward;
pub mod manifest;
pub mod mesh;
pub mod metadata;
pub mod metadata_log;
pub mod metrics;
pub mod objects;
pub mod offsets;
pub mod pace;
pub mod part_imports;
pub mod placement;
pub mod probe;
pub mod queue_starts;
pub mod remote_reads;
pub mod replication;
pub mod service;
pub mod stall;
pub mod tasks;
pub mod topic_configs;
pub mod topics;
pub mod trace;
pub mod traffic;
pub mod txn_marks;

pub use context::Core;
pub use failure::{Failure, Reason};
