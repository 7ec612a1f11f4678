//! TLS settings from PEM files: the broker's (certificate, key, the CA that
//! signs its peers' certificates, whether clients must present one),
//! reloadable while connections stay up, and a client's (the CA it trusts,
//! an optional certificate of its own). Every handshake uses rustls with the
//! pure-Rust RustCrypto provider.

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::server::WebPkiClientVerifier;
use rustls::RootCertStore;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

/// Where a client looks for trusted CAs when it is given none: Debian's
/// bundle of the system's roots (`SSL_CERT_FILE` names another).
pub const SYSTEM_CA_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

/// A TLS setting that cannot be used, with the file and the reason.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct TlsError(String);

/// Whether the broker asks clients for a certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ClientAuth {
    /// Clients present none.
    #[default]
    None,
    /// A client may present one (verified against the CA when it does).
    Optional,
    /// A client without a certificate the CA signed is refused.
    Required,
}

/// The broker's TLS files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
    /// The CA that signs peers' certificates: clients' (mTLS) and other nodes'.
    pub ca: Option<PathBuf>,
    pub client_auth: ClientAuth,
}

/// The broker's TLS, shared by every shard: `current()` at each accept, so a
/// `reload()` (SIGHUP) applies to the next handshake and connections already
/// up keep theirs.
#[derive(Clone)]
pub struct ServerTls {
    files: ServerFiles,
    config: Arc<RwLock<Arc<rustls::ServerConfig>>>,
    /// For the broker's own connections to other nodes (replication).
    client: Arc<RwLock<Arc<rustls::ClientConfig>>>,
}

impl std::fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerTls").field("files", &self.files).finish()
    }
}

impl ServerTls {
    /// Loads the files; an error names the file and what is wrong with it.
    pub fn load(files: ServerFiles) -> Result<ServerTls, TlsError> {
        let (server, client) = server_configs(&files)?;
        Ok(ServerTls { files, config: Arc::new(RwLock::new(server)), client: Arc::new(RwLock::new(client)) })
    }

    /// The configuration new connections are accepted with.
    pub fn current(&self) -> Arc<rustls::ServerConfig> {
        self.config.read().expect("tls config lock").clone()
    }

    /// The configuration the broker connects to other nodes with.
    pub fn client(&self) -> Arc<rustls::ClientConfig> {
        self.client.read().expect("tls config lock").clone()
    }

    /// Reads the files again; on an error the configuration in use stays.
    pub fn reload(&self) -> Result<(), TlsError> {
        let (server, client) = server_configs(&self.files)?;
        *self.config.write().expect("tls config lock") = server;
        *self.client.write().expect("tls config lock") = client;
        Ok(())
    }
}

/// A client's TLS files.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientFiles {
    /// The CA that signs the broker's certificate (None: the system's roots).
    pub ca: Option<PathBuf>,
    /// A certificate and key to present (mTLS).
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
}

/// A client's TLS configuration, loaded once.
#[derive(Clone)]
pub struct ClientTls(Arc<rustls::ClientConfig>);

impl std::fmt::Debug for ClientTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClientTls")
    }
}

impl ClientTls {
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

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls_rustcrypto::provider())
}

fn server_configs(files: &ServerFiles) -> Result<(Arc<rustls::ServerConfig>, Arc<rustls::ClientConfig>), TlsError> {
    let (certs, key) = (certificates(&files.cert)?, private_key(&files.key)?);
    let builder = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError(format!("TLS versions: {e}")))?;
    let verifier = match (files.client_auth, &files.ca) {
        (ClientAuth::None, _) => WebPkiClientVerifier::no_client_auth(),
        (_, None) => return Err(TlsError("verifying client certificates needs --tls-ca".into())),
        (auth, Some(ca)) => {
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots(ca)?), provider());
            let verifier = if auth == ClientAuth::Optional { verifier.allow_unauthenticated() } else { verifier };
            verifier.build().map_err(|e| TlsError(format!("{}: {e}", ca.display())))?
        }
    };
    let server = builder
        .with_client_cert_verifier(verifier)
        .with_single_cert(certs.clone(), key.clone_key())
        .map_err(|e| TlsError(format!("{} with {}: {e}", files.cert.display(), files.key.display())))?;
    let ca = files.ca.clone().unwrap_or_else(|| PathBuf::from(SYSTEM_CA_BUNDLE));
    let client = client_config(&ca, Some((certs, key)))?;
    Ok((Arc::new(server), client))
}

type Identity = (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>);

fn client_config(ca: &Path, identity: Option<Identity>) -> Result<Arc<rustls::ClientConfig>, TlsError> {
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

fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| TlsError(format!("reading certificates from {}: {e}", path.display())))?;
    if certs.is_empty() {
        return Err(TlsError(format!("{} holds no PEM certificate", path.display())));
    }
    Ok(certs)
}

fn private_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    PrivateKeyDer::from_pem_file(path)
        .map_err(|e| TlsError(format!("reading a private key from {}: {e}", path.display())))
}

fn roots(ca: &Path) -> Result<RootCertStore, TlsError> {
    let mut roots = RootCertStore::empty();
    let (added, _ignored) = roots.add_parsable_certificates(certificates(ca)?);
    if added == 0 {
        return Err(TlsError(format!("{} holds no usable CA certificate", ca.display())));
    }
    Ok(roots)
}

/// The common name (CN) of a certificate's subject: the user a verified
/// client certificate stands for.
pub fn certificate_user(der: &[u8]) -> Option<String> {
    use x509_cert::der::{oid::ObjectIdentifier, Decode};
    const COMMON_NAME: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.4.3");
    let certificate = x509_cert::Certificate::from_der(der).ok()?;
    let subject = &certificate.tbs_certificate.subject;
    subject.0.iter().rev().flat_map(|rdn| rdn.0.iter()).find(|atv| atv.oid == COMMON_NAME).and_then(|atv| {
        let name = std::str::from_utf8(atv.value.value()).ok()?;
        Some(name.to_string()).filter(|n| !n.is_empty())
    })
}
