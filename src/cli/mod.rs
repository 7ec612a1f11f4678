//! Subcommands of the `ringmq` binary that live in files of their own.

pub mod acls;
pub mod admin_access;
pub mod doctor;
pub mod groups;
pub mod quotas;
pub mod renamed;
pub mod settings;
pub mod tiered;
pub mod top;
pub mod topics;
pub mod trace;
pub mod users;

/// A `NAME=VALUE` argument (a header, a topic config).
pub fn name_value(s: &str) -> Result<(String, String), String> {
    s.split_once('=').map(|(k, v)| (k.to_string(), v.to_string())).ok_or_else(|| format!("{s:?} is not NAME=VALUE"))
}
