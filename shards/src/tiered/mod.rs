//! Tiered storage's object format: what a sealed segment's tiered queues
//! become in a bucket (`object.rs`). The broker uploads and reads objects;
//! the engine only makes (`export.rs`, from a sealed segment) and checks
//! their bytes.

mod export;
mod object;

pub use export::{ExportStep, SegmentExport};
pub use object::{
    verify_slice, Closing, FooterPlace, ObjectBuilder, ObjectIndex, ObjectPart, Slice, PART_BYTES, TRAILER_BYTES,
};
