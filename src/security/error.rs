//! Why a change of the users, ACLs or quotas, or the loading of their
//! files, is refused: what the CLI and the broker's admin answers tell the user.

use super::acl::RULES_MAX;
use super::quota::ENTRIES_MAX;
use super::users::NAME_BYTES_MAX;
use crate::protocol::acl::AclError;
use crate::protocol::scram::ScramError;
use std::path::PathBuf;

/// A refused accounts change, or a file that cannot be loaded.
#[derive(Debug, thiserror::Error)]
pub enum AccountsError {
    #[error("reading {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{path}: {source}")]
    Unreadable { path: PathBuf, source: serde_json::Error },
    #[error("user name {0:?}: 1 to {NAME_BYTES_MAX} bytes, no control characters")]
    UserName(String),
    #[error("user {0:?}: no credential given")]
    NoCredential(String),
    #[error("user {user:?}, {mechanism}: {source}")]
    Credential { user: String, mechanism: &'static str, source: ScramError },
    #[error("there is no user {0:?}")]
    NoSuchUser(String),
    #[error("{0} rules; a broker keeps at most {RULES_MAX}")]
    TooManyRules(usize),
    #[error(transparent)]
    Acl(#[from] AclError),
    #[error("a quota of 0 would stop the client for good; remove the quota or give at least 1")]
    ZeroQuota,
    #[error("{0} quota entries; a broker keeps at most {ENTRIES_MAX}")]
    TooManyQuotas(usize),
}
