//! The users (and their credentials) every shard authenticates against:
//! one snapshot shared by the node's shards, replaced whole on a change
//! (by shard 0, which stores `DATA_DIR/users`). Read at each
//! authentication, never on the data path.

use crate::security::scram::random_bytes;
use crate::security::users::Users;
use std::sync::{Arc, RwLock};

/// The node's users.
pub struct Accounts {
    users: RwLock<Arc<Users>>,
    /// Gives an unknown user a stable decoy salt, so a SCRAM exchange does
    /// not tell which users exist.
    decoy_key: [u8; 32],
}

impl Accounts {
    pub fn new(users: Users) -> Accounts {
        Accounts { users: RwLock::new(Arc::new(users)), decoy_key: random_bytes() }
    }

    /// The current users.
    pub fn users(&self) -> Arc<Users> {
        self.users.read().expect("accounts lock").clone()
    }

    /// Replaces the users (once stored by whoever owns them).
    pub fn replace_users(&self, users: Users) {
        *self.users.write().expect("accounts lock") = Arc::new(users);
    }

    pub fn decoy_key(&self) -> &[u8] {
        &self.decoy_key
    }
}
