//! The native binary protocol: length-prefixed frames over long-lived TCP
//! connections, pipelined by correlation id (docs/PROTOCOL.md).

pub mod api;
pub mod codec;
pub mod frame;
pub mod groups;
pub mod messages;
pub mod request;
pub mod security;

pub use api::{coordinator_of, ApiKey, ErrorCode};
pub use codec::{DecodeError, Reader, Writer};
