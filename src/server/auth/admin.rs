//! The lists of users, ACLs and quotas (changes are the core's:
//! `Core::change_accounts`).

use crate::protocol::security::UserList;
use crate::security::acl::{Acl, AclFilter};
use crate::security::quota::Entry;
use crate::server::core::Core;

/// Every user and the mechanisms it has credentials for.
pub fn users(core: &Core) -> UserList {
    let users = core.accounts().users.get();
    UserList(users.names().map(|name| (name.to_string(), users.mechanisms(name))).collect())
}

/// The rules the filter matches.
pub fn acls(core: &Core, filter: &AclFilter) -> Vec<Acl> {
    core.acls().rules().iter().filter(|r| filter.matches(r)).cloned().collect()
}

/// Every quota entry.
pub fn quotas(core: &Core) -> Vec<Entry> {
    core.quotas().entries().to_vec()
}
