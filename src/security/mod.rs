//! The broker's security: its TLS configuration (`tls.rs`; a client's is
//! the SDK's), its users, ACLs and quotas with their files and checks, and
//! how they change. SASL, SCRAM and the ACL and quota types are the
//! protocol's (`ringmq_protocol`), re-exported here.

pub mod acl;
pub mod change;
mod error;
pub mod json_file;
pub mod quota;
pub mod tls;
pub mod users;

pub use error::AccountsError;
pub use ringmq_protocol::scram::random_bytes;
pub use ringmq_protocol::{sasl, scram};
