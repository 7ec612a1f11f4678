//! A client's TLS configuration from PEM files (the CA it trusts, an
//! optional certificate of its own), and the PEM loading and crypto provider
//! the broker's own configuration uses too. rustls with the ring provider.

use super::{ClientFiles, TlsError, SYSTEM_CA_BUNDLE};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::RootCertStore;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A client's TLS configuration, loaded once.
#[derive(Clone)]
pub struct ClientTls(Arc<rustls::ClientConfig>);

impl std::fmt::Debug for ClientTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClientTls")
    }
}

impl ClientTls {
    /// Loads the files; an error names the file and what is wrong with it.
    pub fn load(files: &ClientFiles) -> Result<ClientTls, TlsError> {
        let ca = match &files.ca {
            Some(ca) => ca.clone(),
            None => std::env::var_os("SSL_CERT_FILE").map_or_else(|| PathBuf::from(SYSTEM_CA_BUNDLE), PathBuf::from),
        };
        let identity = match (&files.cert, &files.key) {
            (Some(cert), Some(key)) => Some((certificates(cert)?, private_key(key)?)),
            (None, None) => None,
            _ => return Err(TlsError("a client certificate needs its key, and a key its certificate".into())),
        };
        Ok(ClientTls(client_config(&ca, identity)?))
    }

    /// The rustls configuration a handshake uses.
    pub fn config(&self) -> Arc<rustls::ClientConfig> {
        self.0.clone()
    }
}

/// The name a certificate must carry for `addr` (host:port): its IP address
/// or DNS name.
pub fn server_name(addr: &str) -> Result<ServerName<'static>, TlsError> {
    let host = match addr.rsplit_once(':') {
        Some((host, port)) if port.parse::<u16>().is_ok() => host,
        _ => addr,
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    ServerName::try_from(host.to_string()).map_err(|e| TlsError(format!("{host:?} is not a host name or address: {e}")))
}

/// The crypto provider of every handshake: ring (maintained, audited
/// primitives; its C and assembly need only a C compiler to build).
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A certificate chain and its key, presented to the other end.
pub type Identity = (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>);

/// A client configuration trusting the CAs in `ca`, presenting `identity` if given.
pub fn client_config(ca: &Path, identity: Option<Identity>) -> Result<Arc<rustls::ClientConfig>, TlsError> {
    let builder = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError(format!("TLS versions: {e}")))?
        .with_root_certificates(roots(ca)?);
    let config = match identity {
        Some((certs, key)) => {
            builder.with_client_auth_cert(certs, key).map_err(|e| TlsError(format!("the client certificate: {e}")))?
        }
        None => builder.with_no_client_auth(),
    };
    Ok(Arc::new(config))
}

/// The PEM certificates in `path` (at least one).
pub fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| TlsError(format!("reading certificates from {}: {e}", path.display())))?;
    if certs.is_empty() {
        return Err(TlsError(format!("{} holds no PEM certificate", path.display())));
    }
    Ok(certs)
}

/// The PEM private key in `path`.
pub fn private_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    PrivateKeyDer::from_pem_file(path)
        .map_err(|e| TlsError(format!("reading a private key from {}: {e}", path.display())))
}

/// The usable CA certificates in `ca` (at least one).
pub fn roots(ca: &Path) -> Result<RootCertStore, TlsError> {
    let mut roots = RootCertStore::empty();
    let (added, _ignored) = roots.add_parsable_certificates(certificates(ca)?);
    if added == 0 {
        return Err(TlsError(format!("{} holds no usable CA certificate", ca.display())));
    }
    Ok(roots)
}
