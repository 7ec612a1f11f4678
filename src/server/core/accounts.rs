//! The users (and their credentials) every shard authenticates against, the
//! ACLs it authorizes with and the client quotas it enforces: one snapshot
//! of each shared by the node's shards, replaced whole on a change (by
//! shard 0, which stores `DATA_DIR/users`, `acls` and `quotas`). Users are
//! read at each login; each shard keeps its own handle on the ACLs and the
//! quotas and looks at their shared version (one atomic load) per request
//! to know when to take the new ones. The quotas' token buckets are the
//! node's, so a user's rate holds across its connections to every shard.

use crate::security::acl::Acls;
use crate::security::quota::{Buckets, Quotas};
use crate::security::random_bytes;
use crate::security::users::Users;
use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

/// A value the node's shards share, replaced whole, with a version that grows with each change.
pub struct Shared<T> {
    value: RwLock<Arc<T>>,
    version: AtomicU64,
}

impl<T> Shared<T> {
    fn new(value: T) -> Shared<T> {
        Shared { value: RwLock::new(Arc::new(value)), version: AtomicU64::new(0) }
    }

    pub fn get(&self) -> Arc<T> {
        self.value.read().expect("accounts lock").clone()
    }

    /// Replaces the value (once stored by whoever owns it).
    pub fn replace(&self, value: T) {
        *self.value.write().expect("accounts lock") = Arc::new(value);
        self.version.fetch_add(1, Ordering::Release);
    }
}

/// A shard's handle on a shared value: taken again only after it changed.
pub struct Local<T>(RefCell<(u64, Arc<T>)>);

impl<T> Local<T> {
    pub fn new(shared: &Shared<T>) -> Local<T> {
        Local(RefCell::new((shared.version.load(Ordering::Acquire), shared.get())))
    }

    /// The value as of now.
    pub fn get(&self, shared: &Shared<T>) -> Arc<T> {
        let version = shared.version.load(Ordering::Acquire);
        let mut cached = self.0.borrow_mut();
        if cached.0 != version {
            *cached = (version, shared.get());
        }
        cached.1.clone()
    }
}

/// The node's users, ACLs and quotas.
pub struct Accounts {
    pub users: Shared<Users>,
    pub acls: Shared<Acls>,
    pub quotas: Shared<Quotas>,
    /// The quotas' token buckets.
    pub buckets: Buckets,
    /// Gives an unknown user a stable decoy salt, so a SCRAM exchange does
    /// not tell which users exist.
    decoy_key: [u8; 32],
}

impl Accounts {
    pub fn new(users: Users, acls: Acls, quotas: Quotas) -> Accounts {
        Accounts {
            users: Shared::new(users),
            acls: Shared::new(acls),
            quotas: Shared::new(quotas),
            buckets: Buckets::default(),
            decoy_key: random_bytes(),
        }
    }

    pub fn decoy_key(&self) -> &[u8] {
        &self.decoy_key
    }
}
