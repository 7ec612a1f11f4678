//! Changes of the users, ACLs and quotas, and their lists. On a single
//! node a change is served on shard 0 (the edges forward it there): checked,
//! stored durably in `DATA_DIR` (`users`, `acls`, `quotas`), then the shared
//! snapshot replaced. In a cluster it goes to the control plane, which makes
//! it in etcd; every node's control plane then takes it from its watch.

use crate::protocol::security::UserList;
use crate::security::acl::{Acl, AclFilter};
use crate::security::change::{AccountsChange, Changed};
use crate::security::quota::Entry;
use crate::server::core::Reason;
use crate::server::core::{Core, Failure};

/// Makes a change; stored before it is answered. For a removal of ACLs,
/// how many rules went.
pub async fn change(core: &Core, change: AccountsChange) -> Result<u32, Failure> {
    if let Some(link) = core.accounts_link() {
        return link.change(change).await;
    }
    assert_eq!(core.id(), 0, "users, ACLs and quotas are changed on shard 0");
    let accounts = core.accounts();
    let changed = change.apply(&accounts.users.get(), &accounts.acls.get(), &accounts.quotas.get())?;
    let dir = core.config().data_dir.clone();
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
        .map_err(|e| Failure(Reason::StorageFailed, format!("storing the {what}: {e}")))?;
    Ok(accounts.replace(changed))
}

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
