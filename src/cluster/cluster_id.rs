//! The cluster's id in etcd, `/ringmq/cluster-id`: made by the first node to
//! start (put only where absent, so two starting at once agree), read into
//! every node's view of the cluster. Kafka clients read it from any node,
//! and `ringmq cluster status` from etcd.

use super::registry::blocking;
use super::store::{Compare, Kv, Op, Store, StoreError};
use super::ClusterError;
use crate::server::cluster_id::{is_cluster_id, new_cluster_id};

const KEY: &str = "/ringmq/cluster-id";

/// The cluster's id, made now if no node made it before.
pub(super) async fn ensure(store: &impl Store) -> Result<String, StoreError> {
    let made = new_cluster_id();
    if store.txn(vec![Compare::Absent(KEY.into())], vec![Op::put(KEY, made.clone())]).await?.is_some() {
        tracing::info!(cluster_id = %made, "made the cluster's id");
    }
    read(store)
        .await?
        .ok_or_else(|| StoreError::Unreadable { key: KEY.into(), reason: "removed as it was made".into() })
}

/// The cluster's id, if a node made it.
pub(super) async fn read(store: &impl Store) -> Result<Option<String>, StoreError> {
    store.get(KEY).await?.map(|kv| checked(&kv)).transpose()
}

/// The cluster's id as the etcd at `endpoints` holds it (`cluster status`);
/// None before a node made it.
pub fn read_cluster_id(endpoints: &[String]) -> Result<Option<String>, ClusterError> {
    blocking(endpoints, async |store| Ok(read(store).await?))
}

fn checked(kv: &Kv) -> Result<String, StoreError> {
    let id = kv.text()?;
    match is_cluster_id(id) {
        true => Ok(id.to_string()),
        false => Err(StoreError::Unreadable { key: KEY.into(), reason: format!("{id:?} is not a cluster id") }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::store::MemoryStore;

    fn on_a_runtime(test: impl std::future::Future<Output = ()>) {
        tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(test);
    }

    #[test]
    fn the_first_node_makes_the_id_and_the_others_read_it() {
        on_a_runtime(async {
            let store = MemoryStore::new();
            assert_eq!(read(&store).await.unwrap(), None);
            let first = ensure(&store).await.unwrap();
            assert!(is_cluster_id(&first), "{first}");
            assert_eq!(ensure(&store).await.unwrap(), first, "a second node keeps the first's id");
            assert_eq!(read(&store).await.unwrap(), Some(first));
        });
    }

    #[test]
    fn a_key_holding_something_else_is_unreadable() {
        on_a_runtime(async {
            let store = MemoryStore::new();
            store.put(KEY, b"not an id".to_vec(), None).await.unwrap();
            let error = ensure(&store).await.unwrap_err().to_string();
            assert!(error.contains(KEY) && error.contains("is not a cluster id"), "{error}");
        });
    }
}
