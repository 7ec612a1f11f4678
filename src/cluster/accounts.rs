//! The cluster's users, ACLs and quotas in etcd, one key each, the same
//! JSON as a single node's files:
//!
//! - `/ringmq/security/users`, `/ringmq/security/acls`, `/ringmq/security/quotas`.
//!
//! A change reads the three, applies itself to its store and writes it back
//! by compare-and-swap on the key's revision (read again and retried when
//! another change came between). Every node's control plane watches the
//! prefix and replaces its shards' snapshots, so all nodes agree.

use super::registry::blocking;
use super::store::{Compare, Op, Store, StoreError};
use super::ClusterError;
use crate::security::acl::Acls;
use crate::security::change::{AccountsChange, Changed, Store as Kept};
use crate::security::quota::Quotas;
use crate::security::users::Users;
use crate::server::{Failure, Reason};

pub(super) const ACCOUNTS_PREFIX: &str = "/ringmq/security/";
const USERS_KEY: &str = "/ringmq/security/users";
const ACLS_KEY: &str = "/ringmq/security/acls";
const QUOTAS_KEY: &str = "/ringmq/security/quotas";
/// Most times a change is read and tried again after losing a race.
const ATTEMPTS_MAX: usize = 16;

/// True if a change of `key` changes the users, ACLs or quotas.
pub(super) fn moves_accounts(key: &str) -> bool {
    key.starts_with(ACCOUNTS_PREFIX)
}

/// The three stores as etcd holds them, with each key's revision (0: none yet).
struct Held {
    users: (Users, i64),
    acls: (Acls, i64),
    quotas: (Quotas, i64),
}

async fn read_held(store: &impl Store) -> Result<Held, StoreError> {
    let mut held = Held { users: Default::default(), acls: Default::default(), quotas: Default::default() };
    for kv in store.list(ACCOUNTS_PREFIX).await?.kvs {
        match kv.key.as_str() {
            USERS_KEY => held.users = (kv.json()?, kv.mod_revision),
            ACLS_KEY => held.acls = (kv.json()?, kv.mod_revision),
            QUOTAS_KEY => held.quotas = (kv.json()?, kv.mod_revision),
            _ => {}
        }
    }
    Ok(held)
}

/// The users, ACLs and quotas as the store holds them now.
pub(super) async fn read(store: &impl Store) -> Result<(Users, Acls, Quotas), StoreError> {
    let held = read_held(store).await?;
    Ok((held.users.0, held.acls.0, held.quotas.0))
}

/// Makes a change in the store; for a removal of ACLs, how many rules went.
pub(super) async fn change(store: &impl Store, change: &AccountsChange) -> Result<u32, Failure> {
    let unavailable = |e: StoreError| Failure::cluster_unavailable(e);
    for _ in 0..ATTEMPTS_MAX {
        let held = read_held(store).await.map_err(unavailable)?;
        let changed = change.apply(&held.users.0, &held.acls.0, &held.quotas.0)?;
        let (key, revision) = match change.store() {
            Kept::Users => (USERS_KEY, held.users.1),
            Kept::Acls => (ACLS_KEY, held.acls.1),
            Kept::Quotas => (QUOTAS_KEY, held.quotas.1),
        };
        let (json, removed) = match &changed {
            Changed::Users(users) => (serde_json::to_vec(users), 0),
            Changed::Acls(acls, removed) => (serde_json::to_vec(acls), *removed),
            Changed::Quotas(quotas) => (serde_json::to_vec(quotas), 0),
        };
        let json = json.map_err(|e| Failure(Reason::Internal, e.to_string()))?;
        let when = vec![Compare::ModRevision(key.to_string(), revision)];
        if store.txn(when, vec![Op::put(key, json)]).await.map_err(unavailable)?.is_some() {
            return Ok(removed);
        }
    }
    Err(Failure::cluster_unavailable(format!("{ATTEMPTS_MAX} other changes came between; try again")))
}

/// Makes a change straight in etcd (the CLI, e.g. the first user of a cluster).
pub fn change_accounts(endpoints: &[String], asked: &AccountsChange) -> Result<u32, ClusterError> {
    blocking(endpoints, async |store| change(store, asked).await.map_err(|f| ClusterError::Refused(f.1)))
}

/// The cluster's users as etcd holds them (the CLI).
pub fn cluster_users(endpoints: &[String]) -> Result<Users, ClusterError> {
    blocking(endpoints, async |store| Ok(read(store).await?.0))
}
