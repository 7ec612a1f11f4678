//! Tiered storage's object format: what a sealed segment's tiered queues
//! become in a bucket (`object.rs`). The broker uploads and reads objects;
//! the engine only makes and checks their bytes.

mod object;

pub use object::{verify_slice, ObjectBuilder, ObjectIndex, Slice, PART_BYTES, TRAILER_BYTES};
