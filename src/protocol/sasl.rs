//! The SASL mechanisms the broker offers: SCRAM-SHA-256, SCRAM-SHA-512 and
//! PLAIN (only over TLS: it carries the password itself), and PLAIN's one
//! message (RFC 4616).

use super::scram::Mechanism;

/// A SASL mechanism.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SaslMechanism {
    Scram(Mechanism),
    Plain,
}

impl SaslMechanism {
    pub const ALL: [SaslMechanism; 3] = [
        SaslMechanism::Scram(Mechanism::ScramSha256),
        SaslMechanism::Scram(Mechanism::ScramSha512),
        SaslMechanism::Plain,
    ];

    pub fn name(self) -> &'static str {
        match self {
            SaslMechanism::Scram(m) => m.name(),
            SaslMechanism::Plain => "PLAIN",
        }
    }

    pub fn from_name(name: &str) -> Option<SaslMechanism> {
        SaslMechanism::ALL.into_iter().find(|m| m.name() == name)
    }
}

/// PLAIN's message: no authorization identity, the user, the password.
pub fn plain_message(user: &str, password: &str) -> Vec<u8> {
    format!("\0{user}\0{password}").into_bytes()
}

/// The user and password of a PLAIN message; an authorization identity must
/// A PLAIN message that is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlainError {
    #[error("a PLAIN message that is not UTF-8")]
    NotUtf8,
    #[error("a PLAIN message is authzid NUL user NUL password")]
    Layout,
    #[error("a PLAIN message without a user, or acting for another user")]
    NoUser,
}

/// be empty or the user itself.
pub fn parse_plain(message: &[u8]) -> Result<(String, String), PlainError> {
    let text = std::str::from_utf8(message).map_err(|_| PlainError::NotUtf8)?;
    let mut parts = text.split('\0');
    let (Some(authzid), Some(user), Some(password), None) = (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(PlainError::Layout);
    };
    if user.is_empty() || (!authzid.is_empty() && authzid != user) {
        return Err(PlainError::NoUser);
    }
    Ok((user.to_string(), password.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_messages_round_trip_and_odd_ones_are_refused() {
        assert_eq!(parse_plain(&plain_message("alice", "pw")).unwrap(), ("alice".into(), "pw".into()));
        assert!(parse_plain(b"alice\0alice\0pw").is_ok());
        assert!(parse_plain(b"root\0alice\0pw").is_err());
        assert!(parse_plain(b"\0alice").is_err());
        assert!(parse_plain(b"\0\0pw").is_err());
    }
}
