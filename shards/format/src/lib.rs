//! ringmq-format: the record batch and record formats, the same bytes on the
//! wire and on disk. The storage engine stores and checks them, the protocol
//! carries them, the client SDK builds and reads them; a client does not
//! build the storage engine. Kafka record batches are one kind of batch, so
//! their codecs (CRC-32C, the four compressions, undone) live here too.

pub mod batch;
pub mod compression;
pub mod error;
pub mod kafka;
pub mod record;

pub use error::{FormatError, Result};
pub use record::Record;
