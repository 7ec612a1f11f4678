//! The shards' way to tiered storage's bucket: its S3 client runs on a
//! tokio thread of the node's own (`node/object_thread.rs`), and a shard
//! hands it a call and awaits the answer, as it does with the control plane.

use crate::objects::{ObjectError, ObjectStore, Part};
use std::future::Future;
use std::sync::Arc;
use tokio::sync::{mpsc, Semaphore};

/// The bucket, reached through the node's S3 thread; cheap to clone.
#[derive(Clone)]
pub struct ObjectLink {
    store: ObjectStore,
    runtime: tokio::runtime::Handle,
    /// Uploads of the node's shards in flight at once (`tiered_uploads_in_flight`).
    uploads: Arc<Semaphore>,
}

impl ObjectLink {
    pub fn new(store: ObjectStore, runtime: tokio::runtime::Handle, uploads_in_flight: usize) -> ObjectLink {
        ObjectLink { store, runtime, uploads: Arc::new(Semaphore::new(uploads_in_flight.max(1))) }
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

    /// Stores `key` from the parts sent on `parts` (`ObjectStore::put_parts`),
    /// once one of the node's upload permits is free; the object's length.
    pub async fn upload(&self, key: String, parts: mpsc::Receiver<Part>) -> Result<u64, ObjectError> {
        let permits = self.uploads.clone();
        self.call(move |store| async move {
            let _permit = permits.acquire_owned().await.expect("the upload permits are never closed");
            store.put_parts(&key, parts).await
        })
        .await
    }
}
