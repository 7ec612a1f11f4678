//! The SDK's SASL login on a new connection, before its reader thread
//! starts: SaslHandshake with the mechanism, then SaslAuthenticate with each
//! token (SCRAM: two rounds, the server's signature checked; PLAIN: one).

use ringmq_protocol::frame::{self, Response};
use ringmq_protocol::sasl::{self, SaslMechanism};
use ringmq_protocol::scram::ScramClient;
use ringmq_protocol::{ApiKey, ErrorCode, Reader, Writer};
use std::io::{Read, Write};

/// A user's SASL login.
#[derive(Clone, PartialEq, Eq)]
pub struct SaslLogin {
    pub mechanism: SaslMechanism,
    pub user: String,
    pub password: String,
}

impl std::fmt::Debug for SaslLogin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SaslLogin").field("mechanism", &self.mechanism).field("user", &self.user).finish()
    }
}

impl SaslLogin {
    pub fn new(mechanism: SaslMechanism, user: impl Into<String>, password: impl Into<String>) -> SaslLogin {
        SaslLogin { mechanism, user: user.into(), password: password.into() }
    }
}

/// Why a login failed: refused by the broker (its code and message) or broken off.
pub enum LoginError {
    Refused(ErrorCode, String),
    Io(String),
}

/// Logs in over a fresh connection (its timeouts already set).
pub fn login(reader: &mut dyn Read, writer: &mut dyn Write, login: &SaslLogin) -> Result<(), LoginError> {
    let mut w = Writer::default();
    w.string(login.mechanism.name());
    call(reader, writer, ApiKey::SaslHandshake, 1, &w.buf)?;
    match login.mechanism {
        SaslMechanism::Plain => {
            step(reader, writer, 2, &sasl::plain_message(&login.user, &login.password))?;
            Ok(())
        }
        SaslMechanism::Scram(m) => {
            let mut client = ScramClient::new(m, &login.user, &login.password);
            let (server_first, _) = step(reader, writer, 2, &client.first())?;
            let last =
                client.last(&server_first).map_err(|e| LoginError::Refused(ErrorCode::AuthenticationFailed, e.0))?;
            let (server_last, done) = step(reader, writer, 3, &last)?;
            if !done {
                return Err(LoginError::Io("the broker wants more than SCRAM's two rounds".into()));
            }
            client.verify(&server_last).map_err(|e| LoginError::Refused(ErrorCode::AuthenticationFailed, e.0))
        }
    }
}

/// One SaslAuthenticate: the server's token and whether it was the last.
fn step(reader: &mut dyn Read, writer: &mut dyn Write, corr: u32, token: &[u8]) -> Result<(Vec<u8>, bool), LoginError> {
    let mut w = Writer::default();
    w.bytes(token);
    let body = call(reader, writer, ApiKey::SaslAuthenticate, corr, &w.buf)?;
    let mut r = Reader::new(&body);
    let parsed = r.bytes().map(<[u8]>::to_vec).and_then(|token| Ok((token, r.u8()? == 1)));
    parsed.map_err(|e| LoginError::Io(format!("a SaslAuthenticate response that does not parse: {e}")))
}

fn call(
    reader: &mut dyn Read,
    writer: &mut dyn Write,
    api: ApiKey,
    corr: u32,
    body: &[u8],
) -> Result<Vec<u8>, LoginError> {
    let io = |e: std::io::Error| LoginError::Io(e.to_string());
    writer.write_all(&frame::request(api as u16, 0, corr, body)).map_err(io)?;
    let mut len = [0u8; 4];
    reader.read_exact(&mut len).map_err(io)?;
    let len = u32::from_le_bytes(len) as usize;
    if !(10..=1 << 20).contains(&len) {
        return Err(LoginError::Io(format!("the broker sent a frame of {len} bytes")));
    }
    let mut payload = vec![0u8; len];
    reader.read_exact(&mut payload).map_err(io)?;
    let response = Response::parse(&payload).map_err(|e| LoginError::Io(e.to_string()))?;
    if response.error != ErrorCode::None {
        return Err(LoginError::Refused(response.error, response.message));
    }
    Ok(response.body.to_vec())
}
