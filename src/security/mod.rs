//! Security shared by the broker, the SDK and the CLI: TLS configuration
//! (certificates, keys and trust from PEM files, with a pure-Rust crypto
//! provider).

pub mod acl;
pub mod quota;
pub mod sasl;
pub mod scram;
pub mod tls;
pub mod users;
