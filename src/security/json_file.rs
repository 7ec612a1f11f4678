//! The data directory's small JSON files (users, ACLs, quotas): loaded
//! whole (none yet: the empty value), replaced whole and durably.

use super::AccountsError;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::path::Path;

/// Loads `data_dir/name`, or the empty value if there is no such file.
pub fn load<T: DeserializeOwned + Default>(data_dir: &Path, name: &str) -> Result<T, AccountsError> {
    let path = data_dir.join(name);
    match std::fs::read(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|source| AccountsError::Unreadable { path, source }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(T::default()),
        Err(source) => Err(AccountsError::Read { path, source }),
    }
}

/// Stores `value` as `data_dir/name` durably (a blocking call).
pub fn store<T: Serialize>(value: &T, data_dir: &Path, name: &str) -> std::io::Result<()> {
    let json = serde_json::to_vec_pretty(value).expect("a plain value serializes");
    ringmq_shards::replace_durably(data_dir, name, &json)
}
