//! A change of the users, ACLs or quotas, as an admin request asks it, and
//! how it applies to the current ones: the same on a single node (shard 0
//! changes `DATA_DIR`'s files) and in a cluster (a compare-and-swap in etcd).

use super::acl::{Acl, AclFilter, Acls};
use super::quota::{Entry, Quotas};
use super::users::Users;
use super::AccountsError;
use crate::protocol::security::AlterUser;

/// What an admin asks to change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AccountsChange {
    User(AlterUser),
    AddAcls(Vec<Acl>),
    RemoveAcls(AclFilter),
    Quota(Entry),
}

/// The one store a change replaces, with its new value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Changed {
    Users(Users),
    /// The ACLs, and how many rules a removal took away.
    Acls(Acls, u32),
    Quotas(Quotas),
}

/// Which store a change is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Store {
    Users,
    Acls,
    Quotas,
}

impl AccountsChange {
    pub fn store(&self) -> Store {
        match self {
            AccountsChange::User(_) => Store::Users,
            AccountsChange::AddAcls(_) | AccountsChange::RemoveAcls(_) => Store::Acls,
            AccountsChange::Quota(_) => Store::Quotas,
        }
    }

    /// The store this change makes of the current ones; an error a user can act on.
    pub fn apply(&self, users: &Users, acls: &Acls, quotas: &Quotas) -> Result<Changed, AccountsError> {
        match self {
            AccountsChange::User(AlterUser::Upsert { user, credentials }) => {
                users.with_user(user, credentials.clone()).map(Changed::Users)
            }
            AccountsChange::User(AlterUser::Delete { user }) => users.without_user(user).map(Changed::Users),
            AccountsChange::AddAcls(rules) => acls.with(rules.clone()).map(|a| Changed::Acls(a, 0)),
            AccountsChange::RemoveAcls(filter) => {
                let (next, removed) = acls.without(filter);
                Ok(Changed::Acls(next, removed as u32))
            }
            AccountsChange::Quota(entry) => quotas.with(entry.entity.clone(), entry.limits).map(Changed::Quotas),
        }
    }
}
