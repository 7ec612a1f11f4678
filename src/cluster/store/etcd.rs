//! The coordination store in etcd, through `etcd-client` (tonic over
//! tokio: its calls run on the control plane's own thread, never a shard's).

use super::{Compare, Kv, Lease, Listing, Op, Store, StoreError, Watch};
use etcd_client::{Client, CompareOp, GetOptions, LeaseKeepAliveStream, LeaseKeeper, PutOptions, TxnOp, WatchOptions};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// An etcd cluster's client; clones share its connection.
#[derive(Clone)]
pub struct EtcdStore {
    client: Client,
    /// Each lease's keep-alive stream, opened at its first renewal and
    /// renewed through for as long as it lasts.
    keepers: Arc<tokio::sync::Mutex<HashMap<Lease, (LeaseKeeper, LeaseKeepAliveStream)>>>,
}

fn unavailable(e: etcd_client::Error) -> StoreError {
    StoreError::Unavailable(e.to_string())
}

fn kv_of(kv: &etcd_client::KeyValue) -> Result<Kv, StoreError> {
    let key = kv.key_str().map_err(|e| StoreError::Unavailable(format!("a key that is not UTF-8: {e}")))?;
    Ok(Kv {
        key: key.to_string(),
        value: kv.value().to_vec(),
        mod_revision: kv.mod_revision(),
        create_revision: kv.create_revision(),
    })
}

fn leased(lease: Option<Lease>) -> Option<PutOptions> {
    lease.map(|l| PutOptions::new().with_lease(l))
}

impl EtcdStore {
    /// A client of the etcd at `endpoints`, connected within `limit`.
    pub async fn connect(endpoints: &[String], limit: Duration) -> Result<EtcdStore, StoreError> {
        let client = tokio::time::timeout(limit, Client::connect(endpoints, None))
            .await
            .map_err(|_| StoreError::Unavailable(format!("no connection within {limit:?}")))?
            .map_err(unavailable)?;
        Ok(EtcdStore { client, keepers: Arc::default() })
    }

    fn client(&self) -> Client {
        self.client.clone()
    }
}

impl Store for EtcdStore {
    async fn get(&self, key: &str) -> Result<Option<Kv>, StoreError> {
        let found = self.client().get(key, None).await.map_err(unavailable)?;
        found.kvs().first().map(kv_of).transpose()
    }

    async fn list(&self, prefix: &str) -> Result<Listing, StoreError> {
        let found = self.client().get(prefix, Some(GetOptions::new().with_prefix())).await.map_err(unavailable)?;
        let kvs = found.kvs().iter().map(kv_of).collect::<Result<_, _>>()?;
        Ok(Listing { kvs, revision: found.header().map_or(0, |h| h.revision()) })
    }

    async fn put(&self, key: &str, value: Vec<u8>, lease: Option<Lease>) -> Result<(), StoreError> {
        self.client().put(key, value, leased(lease)).await.map_err(unavailable)?;
        Ok(())
    }

    async fn txn(&self, when: Vec<Compare>, then: Vec<Op>) -> Result<Option<i64>, StoreError> {
        let when = when.into_iter().map(|c| match c {
            Compare::Absent(key) => etcd_client::Compare::create_revision(key, CompareOp::Equal, 0),
            Compare::Present(key) => etcd_client::Compare::create_revision(key, CompareOp::Greater, 0),
            Compare::ModRevision(key, r) => etcd_client::Compare::mod_revision(key, CompareOp::Equal, r),
            Compare::Value(key, value) => etcd_client::Compare::value(key, CompareOp::Equal, value),
        });
        let then = then.into_iter().map(|op| match op {
            Op::Put { key, value, lease } => TxnOp::put(key, value, leased(lease)),
            Op::Delete(key) => TxnOp::delete(key, None),
        });
        let txn = etcd_client::Txn::new().when(when.collect::<Vec<_>>()).and_then(then.collect::<Vec<_>>());
        let done = self.client().txn(txn).await.map_err(unavailable)?;
        Ok(done.succeeded().then(|| done.header().map_or(0, |h| h.revision())))
    }

    async fn grant(&self, ttl: Duration) -> Result<(Lease, Duration), StoreError> {
        // etcd counts whole seconds.
        let asked = ttl.as_secs().max(1) as i64;
        let granted = self.client().lease_grant(asked, None).await.map_err(unavailable)?;
        Ok((granted.id(), Duration::from_secs(granted.ttl().max(1) as u64)))
    }

    async fn keep_alive(&self, lease: Lease) -> Result<Duration, StoreError> {
        let mut keepers = self.keepers.lock().await;
        let (keeper, answers) = match keepers.entry(lease) {
            std::collections::hash_map::Entry::Occupied(open) => open.into_mut(),
            std::collections::hash_map::Entry::Vacant(none) => {
                none.insert(self.client().lease_keep_alive(lease).await.map_err(unavailable)?)
            }
        };
        let renewed = async {
            keeper.keep_alive().await.map_err(unavailable)?;
            answers.message().await.map_err(unavailable)
        };
        match renewed.await {
            Ok(Some(answer)) if answer.ttl() > 0 => Ok(Duration::from_secs(answer.ttl() as u64)),
            Ok(_) => {
                keepers.remove(&lease);
                Err(StoreError::LeaseGone(lease))
            }
            Err(e) => {
                // The stream broke: the next renewal opens another.
                keepers.remove(&lease);
                Err(e)
            }
        }
    }

    async fn revoke(&self, lease: Lease) -> Result<(), StoreError> {
        self.keepers.lock().await.remove(&lease);
        self.client().lease_revoke(lease).await.map_err(unavailable)?;
        Ok(())
    }

    async fn watch(&self, prefix: &str) -> Result<Watch, StoreError> {
        let options = Some(WatchOptions::new().with_prefix());
        let mut events = self.client().watch(prefix, options).await.map_err(unavailable)?;
        let (to, from) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Ok(Some(event)) = events.message().await {
                let keys = event.events().iter().filter_map(|e| e.kv()).filter_map(|kv| kv.key_str().ok());
                if to.send(keys.map(str::to_string).collect()).is_err() {
                    return;
                }
            }
            tracing::warn!("the etcd watch ended");
        });
        Ok(Watch(from))
    }
}
