//! The broker's TLS settings from PEM files (certificate, key, the CA that
//! signs its peers' certificates, whether clients must present one),
//! reloadable while connections stay up. A client's settings, the PEM
//! loading and the crypto provider (rustls with ring) are the SDK's
//! (`ringmq_client::tls`), re-exported here.

use ringmq_client::tls::{certificates, client_config, private_key, provider, roots};
pub use ringmq_client::tls::{server_name, ClientFiles, ClientTls, TlsError, SYSTEM_CA_BUNDLE};
use rustls::server::WebPkiClientVerifier;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};

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
