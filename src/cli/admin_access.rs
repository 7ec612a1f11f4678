//! How a command reaches a broker's admin listener (`serve --admin-listen`):
//! TLS and a user's login, the flags `ringmq top` and `ringmq doctor
//! --admin` share.

use clap::Args;
use ringmq::client::admin_get;
use ringmq::security::tls::{ClientFiles, ClientTls};
use serde_json::Value;
use std::path::PathBuf;
use std::time::Duration;

/// How long one request to the admin listener may take.
const ADMIN_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Args)]
pub struct AdminAccess {
    /// Connect with TLS (when the broker serves it)
    #[arg(long)]
    tls: bool,
    /// The CA (PEM) that signs the broker's certificate (implies --tls)
    #[arg(long)]
    tls_ca: Option<PathBuf>,
    /// Log in as this user (a broker with --auth-required); the password is the first line of --password-file, or $RINGMQ_PASSWORD
    #[arg(long)]
    user: Option<String>,
    #[arg(long, requires = "user")]
    password_file: Option<PathBuf>,
}

/// A broker's admin listener, with what it takes to be let in.
pub struct AdminListener {
    addr: String,
    tls: Option<ClientTls>,
    login: Option<(String, String)>,
}

impl AdminAccess {
    /// The admin listener at `addr`, reached as these flags say.
    pub fn listener(&self, addr: &str) -> Result<AdminListener, String> {
        let tls = if self.tls || self.tls_ca.is_some() {
            let files = ClientFiles { ca: self.tls_ca.clone(), cert: None, key: None };
            Some(ClientTls::load(&files).map_err(|e| format!("TLS: {e}"))?)
        } else {
            None
        };
        let login = match &self.user {
            Some(user) => Some((user.clone(), crate::read_password(self.password_file.as_deref())?)),
            None => None,
        };
        Ok(AdminListener { addr: addr.to_string(), tls, login })
    }
}

impl AdminListener {
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// GET `path`, a JSON answer.
    pub fn get(&self, path: &str) -> Result<Value, String> {
        let login = self.login.as_ref().map(|(user, password)| (user.as_str(), password.as_str()));
        admin_get(&self.addr, path, self.tls.as_ref(), login, ADMIN_TIMEOUT)
            .map_err(|e| format!("{e} (is the broker serving --admin-listen {}?)", self.addr))
    }
}
