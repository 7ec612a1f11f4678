//! ACL management, served on shard 0 (the edges forward it there): rules
//! added, removed by filter, listed. Each change is stored durably in
//! `DATA_DIR/acls` before the shared snapshot changes.

use crate::security::acl::{Acl, AclFilter, Acls};
use crate::server::core::{Core, Failure};

/// Adds rules; stored before it is answered.
pub async fn create(core: &Core, rules: Vec<Acl>) -> Result<(), Failure> {
    let next = core.accounts().acls.get().with(rules).map_err(Failure::invalid)?;
    store(core, next).await
}

/// Removes the rules the filter matches; how many.
pub async fn delete(core: &Core, filter: &AclFilter) -> Result<usize, Failure> {
    let (next, removed) = core.accounts().acls.get().without(filter);
    if removed > 0 {
        store(core, next).await?;
    }
    Ok(removed)
}

/// The rules the filter matches.
pub fn list(core: &Core, filter: &AclFilter) -> Vec<Acl> {
    core.acls().rules().iter().filter(|r| filter.matches(r)).cloned().collect()
}

async fn store(core: &Core, acls: Acls) -> Result<(), Failure> {
    let stored = acls.clone();
    super::store_in_data_dir(core, "ACLs", move |dir| stored.store(dir)).await?;
    core.accounts().acls.replace(acls);
    Ok(())
}
