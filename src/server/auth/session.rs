//! One connection's authentication: a SASL handshake names the mechanism,
//! then tokens go back and forth until it is done (SCRAM: two rounds;
//! PLAIN: one, only over TLS). A verified client certificate authenticates
//! the connection as its subject's common name from the start. A failed
//! exchange ends the session: the edge answers and closes the connection.

use crate::security::sasl::{self, PlainError, SaslMechanism};
use crate::security::scram::{Mechanism, ScramError, ScramServer};
use crate::server::auth::authorizer::Principal;
use crate::server::core::Reason;
use crate::server::core::{Core, Failure};
use std::net::SocketAddr;
use std::rc::Rc;

/// Where a connection's authentication stands.
enum State {
    /// No handshake yet (or one refused).
    Start,
    /// A handshake chose this mechanism; its first token is next.
    Chosen(SaslMechanism),
    /// SCRAM's first round is done; the client's final message is next.
    Scram(Box<ScramServer>),
    /// Authenticated, or failed: nothing more to exchange.
    Done,
}

/// A step of an exchange.
pub enum Step {
    /// Send this token; the client answers with the next.
    Continue(Vec<u8>),
    /// Send this (last) token: the connection is authenticated.
    Authenticated(Vec<u8>),
}

/// One connection's authentication.
pub struct Session {
    tls: bool,
    principal: Option<Rc<str>>,
    state: State,
    peer: Option<SocketAddr>,
    /// Who the connection's requests are checked as (made again when the
    /// login changes it).
    caller: Rc<Principal>,
}

impl Session {
    /// A new connection's session; `certificate_user` is the user a verified
    /// client certificate names.
    pub fn new(tls: bool, certificate_user: Option<String>, peer: Option<SocketAddr>) -> Session {
        let principal: Option<Rc<str>> = certificate_user.map(Rc::from);
        let caller = Rc::new(Principal::new(principal.clone(), peer));
        Session { tls, principal, state: State::Start, peer, caller }
    }

    /// Who the connection's requests are checked as, now.
    pub fn caller(&mut self) -> Rc<Principal> {
        if self.caller.user() != self.principal.as_deref() {
            self.caller = Rc::new(Principal::new(self.principal.clone(), self.peer));
        }
        self.caller.clone()
    }

    /// Whether the connection may send requests other than ApiVersions and SASL's.
    pub fn admitted(&self, core: &Core) -> bool {
        !core.config().auth.required || self.principal.is_some()
    }

    /// The names of the mechanisms this connection may use.
    pub fn offered(&self, core: &Core) -> Vec<&'static str> {
        let offered = core.config().auth.mechanisms.iter();
        offered.filter(|m| self.tls || **m != SaslMechanism::Plain).map(|m| m.name()).collect()
    }

    /// A handshake: the client names its mechanism.
    pub fn handshake(&mut self, core: &Core, name: &str) -> Result<SaslMechanism, Failure> {
        if matches!(self.state, State::Scram(_) | State::Done) || self.principal.is_some() {
            return Err(Failure(Reason::InvalidRequest, "this connection is already authenticated".into()));
        }
        let unsupported = |why: String| Failure(Reason::UnsupportedSaslMechanism, why);
        let Some(mechanism) = SaslMechanism::from_name(name).filter(|m| core.config().auth.mechanisms.contains(m))
        else {
            return Err(unsupported(format!(
                "SASL mechanism {name:?} is not enabled; this broker offers {:?}",
                self.offered(core)
            )));
        };
        if mechanism == SaslMechanism::Plain && !self.tls {
            let m = "PLAIN sends the password itself: this broker takes it only over TLS; connect with TLS or use SCRAM-SHA-256/512";
            return Err(unsupported(m.into()));
        }
        self.state = State::Chosen(mechanism);
        Ok(mechanism)
    }

    /// The client's next token. A failure ends the session; the edge answers
    /// it and closes the connection.
    pub async fn authenticate(&mut self, core: &Core, token: &[u8]) -> Result<Step, Failure> {
        let result = match std::mem::replace(&mut self.state, State::Done) {
            // Out of order: refused, and the session stays where it was (a
            // handshake may still follow on a connection that did not log in).
            previous @ (State::Start | State::Done) => {
                self.state = previous;
                return Err(Failure(Reason::InvalidRequest, "SaslAuthenticate without a SaslHandshake first".into()));
            }
            State::Chosen(SaslMechanism::Scram(m)) => self.scram_first(core, m, token),
            State::Chosen(SaslMechanism::Plain) => self.plain(core, token).await,
            State::Scram(server) => {
                let user = server.user().to_string();
                server
                    .finish(token)
                    .map(|(user, last)| (Step::Authenticated(last), Some(user)))
                    .map_err(|e| (user, LoginError::from(e)))
            }
        };
        match result {
            Ok((step, user)) => {
                if let Some(user) = user {
                    self.principal = Some(Rc::from(user.as_str()));
                }
                Ok(step)
            }
            Err((user, why)) => {
                tracing::warn!(shard = core.id(), %user, %why, "a client failed to authenticate");
                Err(Failure(Reason::AuthenticationFailed, "authentication failed: invalid user or password".into()))
            }
        }
    }

    fn scram_first(&mut self, core: &Core, m: Mechanism, token: &[u8]) -> Exchanged {
        let users = core.accounts().users.get();
        let lookup = |user: &str| users.credential(user, m).cloned();
        match ScramServer::start(m, token, lookup, core.accounts().decoy_key()) {
            Ok((server, first)) => {
                self.state = State::Scram(Box::new(server));
                Ok((Step::Continue(first), None))
            }
            Err(e) => Err((String::new(), e.into())),
        }
    }

    /// PLAIN against the user's SCRAM credential: the derivation runs on the
    /// blocking pool (thousands of HMACs would hold the shard).
    async fn plain(&mut self, core: &Core, token: &[u8]) -> Exchanged {
        let (user, password) = sasl::parse_plain(token).map_err(|why| (String::new(), why.into()))?;
        match check_password(core, &user, password).await {
            Ok(()) => Ok((Step::Authenticated(Vec::new()), Some(user))),
            Err(why) => Err((user, why)),
        }
    }
}

/// Checks a password against the user's stored SCRAM credential (PLAIN, and
/// the admin listener's HTTP Basic); the derivation runs on the blocking pool.
pub async fn check_password(core: &Core, user: &str, password: String) -> Result<(), LoginError> {
    let (m, credential, known) = core.accounts().users.get().password_check(user, core.accounts().decoy_key());
    let matches = glommio::executor().spawn_blocking(move || credential.matches(m, &password)).await;
    match (matches, known) {
        (true, true) => Ok(()),
        (_, false) => Err(LoginError::UnknownUser),
        (false, true) => Err(LoginError::WrongPassword),
    }
}

/// A step and the user it authenticated, or the user and why it failed.
type Exchanged = Result<(Step, Option<String>), (String, LoginError)>;

/// Why a login failed (logged; the client is told only that it failed).
#[derive(Debug, thiserror::Error)]
pub enum LoginError {
    #[error("unknown user")]
    UnknownUser,
    #[error("wrong password")]
    WrongPassword,
    #[error(transparent)]
    Plain(#[from] PlainError),
    #[error(transparent)]
    Scram(#[from] ScramError),
}
