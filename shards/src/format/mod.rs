//! The record batch and record formats: the same bytes on the wire and on disk.

pub mod batch;
pub mod record;
