//! Security shared by the broker, the SDK and the CLI: TLS configuration
//! (certificates, keys and trust from PEM files, with a pure-Rust crypto
//! provider), SASL and SCRAM, users, ACLs and quotas.

pub mod acl;
pub mod change;
pub mod json_file;
pub mod quota;
pub mod sasl;
pub mod scram;
pub mod tls;
pub mod users;

/// `N` bytes from the operating system's random source.
pub fn random_bytes<const N: usize>() -> [u8; N] {
    let mut bytes = [0u8; N];
    getrandom::getrandom(&mut bytes).expect("the operating system's random source");
    bytes
}
