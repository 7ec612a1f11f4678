//! The users (and their credentials) every shard authenticates against, the
//! ACLs it authorizes with and the client quotas it enforces: one snapshot
//! of each shared by the node's shards, replaced whole on a change (by
//! shard 0, which stores `DATA_DIR/users`, `acls` and `quotas`). Users are
//! read at each login; each shard keeps its own handle on the ACLs and the
//! quotas and looks at their shared version (one atomic load) per request
//! to know when to take the new ones. The quotas' token buckets are the
//! node's, so a user's rate holds across its connections to every shard.

use super::Failure;
use crate::security::acl::Acls;
use crate::security::change::{AccountsChange, Changed};
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

    /// Replaces the store a change made; for a removal of ACLs, how many rules went.
    pub fn replace(&self, changed: Changed) -> u32 {
        match changed {
            Changed::Users(users) => self.users.replace(users),
            Changed::Acls(acls, removed) => {
                self.acls.replace(acls);
                return removed;
            }
            Changed::Quotas(quotas) => self.quotas.replace(quotas),
        }
        0
    }

    /// Replaces whichever of them differ from these (the cluster's, as etcd holds them).
    pub fn follow(&self, users: Users, acls: Acls, quotas: Quotas) {
        if *self.users.get() != users {
            self.users.replace(users);
        }
        if *self.acls.get() != acls {
            self.acls.replace(acls);
        }
        if *self.quotas.get() != quotas {
            self.quotas.replace(quotas);
        }
    }
}

/// A change the control plane is asked to make in etcd, and where its answer goes.
pub struct AccountsAsk {
    pub change: AccountsChange,
    pub reply: tokio::sync::oneshot::Sender<Result<u32, Failure>>,
}

/// Cluster mode: the node's accounts (kept as etcd holds them by the
/// control plane) and the way to change them.
#[derive(Clone)]
pub struct AccountsLink {
    pub shared: Arc<Accounts>,
    pub ask: Arc<dyn Fn(AccountsAsk) + Send + Sync>,
}

impl std::fmt::Debug for AccountsLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AccountsLink").finish_non_exhaustive()
    }
}

impl AccountsLink {
    /// Makes a change in etcd; answered once etcd holds it.
    pub async fn change(&self, change: AccountsChange) -> Result<u32, Failure> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        (self.ask)(AccountsAsk { change, reply });
        answer.await.unwrap_or_else(|_| Err(Failure::cluster_unavailable("the control plane stopped")))
    }
}

impl super::Core {
    /// Changes the users, ACLs or quotas; stored before it is answered. On
    /// a single node on shard 0 (asked over the mesh from another): checked,
    /// stored durably in `DATA_DIR` (`users`, `acls`, `quotas`), then the
    /// shared snapshot replaced. In a cluster it goes to the control plane,
    /// which makes it in etcd; every node's control plane then takes it
    /// from its watch. For a removal of ACLs, how many rules went.
    pub async fn change_accounts(&self, change: AccountsChange) -> Result<u32, Failure> {
        if let Some(link) = self.accounts_link() {
            return link.change(change).await;
        }
        if self.id() != 0 {
            return self.mesh().change_accounts(0, change).await;
        }
        let accounts = self.accounts();
        let changed = change.apply(&accounts.users.get(), &accounts.acls.get(), &accounts.quotas.get())?;
        let dir = self.config().data_dir.clone();
        let stored = changed.clone();
        let what = match change.store() {
            crate::security::change::Store::Users => "users",
            crate::security::change::Store::Acls => "ACLs",
            crate::security::change::Store::Quotas => "quotas",
        };
        glommio::executor()
            .spawn_blocking(move || match &stored {
                Changed::Users(users) => users.store(&dir),
                Changed::Acls(acls, _) => acls.store(&dir),
                Changed::Quotas(quotas) => quotas.store(&dir),
            })
            .await
            .map_err(|e| Failure(super::Reason::StorageFailed, format!("storing the {what}: {e}")))?;
        Ok(accounts.replace(changed))
    }
}
