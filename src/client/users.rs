//! User management from the SDK: a user's SCRAM credentials are derived
//! here, from the password, so the broker stores and sees only salted keys.

use super::client::Client;
use super::error::ClientError;
use ringmq_protocol::scram::{Credential, Mechanism};
use ringmq_protocol::security::{AlterUser, UserList};
use ringmq_protocol::{ApiKey, Reader, Writer};

impl Client {
    /// Creates a user, or sets a user's password: one credential per
    /// mechanism, each derived with `iterations` rounds and its own salt.
    pub fn set_user(
        &self,
        user: &str,
        password: &str,
        mechanisms: &[Mechanism],
        iterations: u32,
    ) -> Result<(), ClientError> {
        let credentials = mechanisms
            .iter()
            .map(|&m| Credential::new(m, password, iterations).map(|c| (m, c)))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| ClientError::Invalid(e.0))?;
        self.alter_user(&AlterUser::Upsert { user: user.to_string(), credentials })
    }

    /// Deletes a user.
    pub fn delete_user(&self, user: &str) -> Result<(), ClientError> {
        self.alter_user(&AlterUser::Delete { user: user.to_string() })
    }

    /// Every user and the mechanisms it has credentials for.
    pub fn list_users(&self) -> Result<UserList, ClientError> {
        let reply = self.call_addr(&self.control_addr(), ApiKey::ListUsers, &[])?;
        Ok(UserList::decode(&mut Reader::new(&reply.body))?)
    }

    /// Sets (credentials the caller derived) or deletes a user.
    pub fn alter_user(&self, change: &AlterUser) -> Result<(), ClientError> {
        let mut w = Writer::default();
        change.encode(&mut w);
        self.call_addr(&self.control_addr(), ApiKey::AlterUser, &w.buf)?;
        Ok(())
    }
}
