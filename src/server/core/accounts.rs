//! The users (and their credentials) every shard authenticates against and
//! the ACLs it authorizes with: one snapshot of each shared by the node's
//! shards, replaced whole on a change (by shard 0, which stores
//! `DATA_DIR/users` and `DATA_DIR/acls`). Users are read at each login; each
//! shard keeps its own handle on the ACLs and looks at the shared version
//! (one atomic load) per request to know when to take the new ones.

use crate::security::acl::Acls;
use crate::security::scram::random_bytes;
use crate::security::users::Users;
use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

/// The node's users and ACLs.
pub struct Accounts {
    users: RwLock<Arc<Users>>,
    acls: RwLock<Arc<Acls>>,
    /// Bumped after every change of the ACLs.
    acls_version: AtomicU64,
    /// Gives an unknown user a stable decoy salt, so a SCRAM exchange does
    /// not tell which users exist.
    decoy_key: [u8; 32],
}

impl Accounts {
    pub fn new(users: Users, acls: Acls) -> Accounts {
        Accounts {
            users: RwLock::new(Arc::new(users)),
            acls: RwLock::new(Arc::new(acls)),
            acls_version: AtomicU64::new(0),
            decoy_key: random_bytes(),
        }
    }

    /// The current users.
    pub fn users(&self) -> Arc<Users> {
        self.users.read().expect("accounts lock").clone()
    }

    /// Replaces the users (once stored by whoever owns them).
    pub fn replace_users(&self, users: Users) {
        *self.users.write().expect("accounts lock") = Arc::new(users);
    }

    /// The current ACLs (a shard reads them through its `AclCache`).
    pub fn acls(&self) -> Arc<Acls> {
        self.acls.read().expect("accounts lock").clone()
    }

    /// Replaces the ACLs (once stored by whoever owns them).
    pub fn replace_acls(&self, acls: Acls) {
        *self.acls.write().expect("accounts lock") = Arc::new(acls);
        self.acls_version.fetch_add(1, Ordering::Release);
    }

    pub fn decoy_key(&self) -> &[u8] {
        &self.decoy_key
    }
}

/// A shard's handle on the ACLs: taken again only after they changed.
pub struct AclCache(RefCell<(u64, Arc<Acls>)>);

impl AclCache {
    pub fn new(accounts: &Accounts) -> AclCache {
        AclCache(RefCell::new((accounts.acls_version.load(Ordering::Acquire), accounts.acls())))
    }

    /// The ACLs as of now.
    pub fn get(&self, accounts: &Accounts) -> Arc<Acls> {
        let version = accounts.acls_version.load(Ordering::Acquire);
        let mut cached = self.0.borrow_mut();
        if cached.0 != version {
            *cached = (version, accounts.acls());
        }
        cached.1.clone()
    }
}
