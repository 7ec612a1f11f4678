//! The node's S3 thread: a tokio runtime of its own for tiered storage's
//! bucket (hyper and its connection pool live there, off the shards'
//! cores' executors), stopped when the server is.

use crate::objects::{ObjectStore, ObjectStoreConfig};
use crate::server::core::objects::ObjectLink;

/// The thread; it ends when this is dropped.
pub struct ObjectThread {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ObjectThread {
    /// Starts the thread for the bucket `config` names, and the shards' link
    /// to it, through which up to `uploads_in_flight` uploads run at once.
    pub fn start(config: ObjectStoreConfig, uploads_in_flight: usize) -> Result<(ObjectThread, ObjectLink), String> {
        let store = ObjectStore::new(config).map_err(|e| e.to_string())?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .thread_name("ringmq-s3")
            .build()
            .map_err(|e| format!("starting the S3 thread's runtime: {e}"))?;
        let handle = runtime.handle().clone();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("ringmq-s3".into())
            .spawn(move || {
                let _ = runtime.block_on(stopped);
            })
            .map_err(|e| format!("starting the S3 thread: {e}"))?;
        Ok((ObjectThread { stop: Some(stop), thread: Some(thread) }, ObjectLink::new(store, handle, uploads_in_flight)))
    }
}

impl Drop for ObjectThread {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
