//! ringmq-protocol: the native binary protocol, length-prefixed frames over
//! long-lived TCP connections, pipelined by correlation id
//! (docs/PROTOCOL.md), with what its messages carry: record batches
//! (`ringmq-format`), ACL rules, quota entries and SASL/SCRAM logins. Shared
//! by the broker and the client SDK; std and small pure-Rust crates only.
//! The `serde` feature makes the ACL, quota and credential types
//! (de)serializable, for the broker's files.

pub mod acl;
pub mod api;
pub mod codec;
pub mod frame;
pub mod groups;
pub mod messages;
pub mod quota;
pub mod sasl;
pub mod scram;
pub mod security;
pub mod time;

pub use api::{coordinator_of, ApiKey, ErrorCode};
pub use codec::{DecodeError, Reader, Writer};
