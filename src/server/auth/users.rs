//! User management, served on shard 0 (the edges forward it there): a new
//! user or new credentials (SCRAM credentials the client derived; the
//! password never reaches the broker), a deletion, the list. Each change is
//! stored durably in `DATA_DIR/users` before the shared snapshot changes.

use crate::protocol::security::{AlterUser, UserList};
use crate::server::core::{Core, Failure};

/// Applies a change; stored before it is answered.
pub async fn alter(core: &Core, change: AlterUser) -> Result<(), Failure> {
    let users = core.accounts().users.get();
    let next = match change {
        AlterUser::Upsert { user, credentials } => users.with_user(&user, credentials),
        AlterUser::Delete { user } => users.without_user(&user),
    }
    .map_err(Failure::invalid)?;
    let stored = next.clone();
    super::store_in_data_dir(core, "users", move |dir| stored.store(dir)).await?;
    core.accounts().users.replace(next);
    Ok(())
}

/// Every user and the mechanisms it has credentials for.
pub fn list(core: &Core) -> UserList {
    let users = core.accounts().users.get();
    UserList(users.names().map(|name| (name.to_string(), users.mechanisms(name))).collect())
}
