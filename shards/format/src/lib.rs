//! ringmq-format: the record batch and record formats, the same bytes on the
//! wire and on disk. The storage engine stores and checks them, the protocol
//! carries them, the client SDK builds and reads them; this crate needs
//! nothing but std, so a client does not build the storage engine.

pub mod batch;
pub mod error;
pub mod record;

pub use error::{FormatError, Result};
pub use record::Record;
