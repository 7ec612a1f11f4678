//! TLS for the SDK's connections, with the cargo feature `tls` (rustls and
//! its ring provider): a client's files and configuration
//! (`config.rs`) and the session shared by a connection's reader and writer
//! (`session.rs`). Without the feature a `ClientTls` cannot be made (`off.rs`:
//! loading one says which feature to turn on), so a plain client builds no
//! cryptography but SCRAM's hashes.

use std::path::PathBuf;

#[cfg(feature = "tls")]
mod config;
#[cfg(not(feature = "tls"))]
mod off;
#[cfg(feature = "tls")]
mod session;

#[cfg(feature = "tls")]
pub use config::{certificates, client_config, private_key, provider, roots, server_name, ClientTls, Identity};
#[cfg(not(feature = "tls"))]
pub use off::{handshake, ClientTls, TlsReader, TlsWriter};
#[cfg(feature = "tls")]
pub use session::{handshake, TlsReader, TlsWriter};

/// Where a client looks for trusted CAs when it is given none: Debian's
/// bundle of the system's roots (`SSL_CERT_FILE` names another).
pub const SYSTEM_CA_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

/// A TLS setting that cannot be used, with the file and the reason.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct TlsError(pub String);

/// A client's TLS files.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientFiles {
    /// The CA that signs the broker's certificate (None: the system's roots).
    pub ca: Option<PathBuf>,
    /// A certificate and key to present (mTLS).
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
}
