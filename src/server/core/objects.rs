//! The shards' way to tiered storage's bucket: its S3 client runs on a
//! tokio thread of the node's own (`node/object_thread.rs`), and a shard
//! hands it a call and awaits the answer, as it does with the control plane.

use crate::objects::{ObjectError, ObjectStore};
use std::future::Future;

/// The bucket, reached through the node's S3 thread; cheap to clone.
#[derive(Clone)]
pub struct ObjectLink {
    store: ObjectStore,
    runtime: tokio::runtime::Handle,
}

impl ObjectLink {
    pub fn new(store: ObjectStore, runtime: tokio::runtime::Handle) -> ObjectLink {
        ObjectLink { store, runtime }
    }

    /// Runs `call` with the store on the S3 thread and returns its answer.
    pub async fn call<T, F>(&self, call: impl FnOnce(ObjectStore) -> F) -> Result<T, ObjectError>
    where
        F: Future<Output = Result<T, ObjectError>> + Send + 'static,
        T: Send + 'static,
    {
        let answer = self.runtime.spawn(call(self.store.clone())).await;
        answer.unwrap_or_else(|e| {
            let last = format!("the node's S3 thread dropped the call: {e}");
            Err(ObjectError::Unavailable { what: "a call to the bucket".into(), attempts: 1, last })
        })
    }
}
