//! The users a broker authenticates: per user, one SCRAM credential per
//! mechanism (salt, iterations, derived keys; never the password). Stored
//! as JSON in `DATA_DIR/users`, replaced whole and durably on each change.

use super::scram::{Credential, Mechanism};
use super::AccountsError;
use std::collections::BTreeMap;
use std::path::Path;

/// The file under the data directory.
pub const FILE: &str = "users";
/// Longest user name.
pub const NAME_BYTES_MAX: usize = 255;

/// Every user and their credentials.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Users {
    users: BTreeMap<String, BTreeMap<Mechanism, Credential>>,
}

impl Users {
    /// Loads `DATA_DIR/users`, or none if there is none.
    pub fn load(data_dir: &Path) -> Result<Users, AccountsError> {
        super::json_file::load(data_dir, FILE)
    }

    /// Stores them durably (a blocking call).
    pub fn store(&self, data_dir: &Path) -> std::io::Result<()> {
        super::json_file::store(self, data_dir, FILE)
    }

    pub fn credential(&self, user: &str, mechanism: Mechanism) -> Option<&Credential> {
        self.users.get(user)?.get(&mechanism)
    }

    /// The credential a PLAIN password of `user` is checked against, and
    /// whether the user exists: the user's own (its first mechanism), or for
    /// an unknown user a decoy that costs as much to check and matches no
    /// password. Checking always derives, so a refusal takes as long either
    /// way.
    pub fn password_check(&self, user: &str, decoy_key: &[u8]) -> (Mechanism, Credential, bool) {
        let own = Mechanism::ALL.into_iter().find_map(|m| Some((m, self.credential(user, m)?.clone())));
        match own {
            Some((m, credential)) => (m, credential, true),
            None => {
                let m = Mechanism::ALL[0];
                (m, Credential::decoy(m, user, decoy_key), false)
            }
        }
    }

    pub fn contains(&self, user: &str) -> bool {
        self.users.contains_key(user)
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.users.keys().map(String::as_str)
    }

    /// The user's mechanisms.
    pub fn mechanisms(&self, user: &str) -> Vec<Mechanism> {
        self.users.get(user).map(|c| c.keys().copied().collect()).unwrap_or_default()
    }

    /// With `user`'s credentials set to these (a new user, or new passwords);
    /// every credential is checked first.
    pub fn with_user(&self, user: &str, credentials: Vec<(Mechanism, Credential)>) -> Result<Users, AccountsError> {
        check_name(user)?;
        if credentials.is_empty() {
            return Err(AccountsError::NoCredential(user.to_string()));
        }
        for (mechanism, credential) in &credentials {
            credential.check(*mechanism).map_err(|source| AccountsError::Credential {
                user: user.to_string(),
                mechanism: mechanism.name(),
                source,
            })?;
        }
        let mut next = self.clone();
        next.users.insert(user.to_string(), credentials.into_iter().collect());
        Ok(next)
    }

    /// Without `user`; an error if there is no such user.
    pub fn without_user(&self, user: &str) -> Result<Users, AccountsError> {
        let mut next = self.clone();
        next.users.remove(user).ok_or_else(|| AccountsError::NoSuchUser(user.to_string()))?;
        Ok(next)
    }
}

/// A user name: 1..=255 bytes of printable characters.
pub fn check_name(user: &str) -> Result<(), AccountsError> {
    if user.is_empty() || user.len() > NAME_BYTES_MAX || user.chars().any(|c| c.is_control()) {
        return Err(AccountsError::UserName(user.to_string()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::security::scram::ITERATIONS_MIN;

    #[test]
    fn users_round_trip_through_their_file_and_keep_no_password() {
        let dir = tempfile::tempdir().unwrap();
        let m = Mechanism::ScramSha256;
        let users = Users::default()
            .with_user("alice", vec![(m, Credential::new(m, "hunter2", ITERATIONS_MIN).unwrap())])
            .unwrap();
        users.store(dir.path()).unwrap();
        let text = std::fs::read_to_string(dir.path().join(FILE)).unwrap();
        assert!(!text.contains("hunter2"), "{text}");
        let loaded = Users::load(dir.path()).unwrap();
        assert_eq!(loaded, users);
        assert!(loaded.credential("alice", m).unwrap().matches(m, "hunter2"));
        assert!(loaded.without_user("bob").is_err());
        assert!(!loaded.without_user("alice").unwrap().contains("alice"));
        assert!(users.with_user("", vec![]).is_err());
    }

    /// PLAIN checks an unknown user's password as it checks a known one's:
    /// a derivation of the same iterations, against keys no password matches.
    #[test]
    fn an_unknown_users_password_is_checked_against_a_decoy_as_costly_as_a_real_credential() {
        let m = Mechanism::ScramSha256;
        let users = Users::default()
            .with_user("alice", vec![(m, Credential::new(m, "hunter2", ITERATIONS_MIN).unwrap())])
            .unwrap();
        let (mechanism, alice, known) = users.password_check("alice", b"decoy key");
        assert!(known && alice.matches(mechanism, "hunter2") && !alice.matches(mechanism, "wrong"));
        let (mechanism, decoy, known) = users.password_check("mallory", b"decoy key");
        assert!(!known);
        assert_eq!(decoy.iterations, alice.iterations, "the same derivation work as alice's check");
        decoy.check(mechanism).expect("a decoy is shaped as a stored credential");
        for guess in ["", "hunter2", "mallory", "decoy key"] {
            assert!(!decoy.matches(mechanism, guess), "{guess:?} opens nothing");
        }
        assert_eq!(users.password_check("mallory", b"decoy key").1, decoy, "stable per user");
        assert_ne!(users.password_check("trudy", b"decoy key").1.salt, decoy.salt);
    }
}
