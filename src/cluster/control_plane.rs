//! The control-plane thread: connects to etcd, registers this node under a
//! lease, renews the lease every third of its time to live, registers again
//! under a new lease if the old one is lost (etcd restarted, or the node was
//! cut off longer than the lease), and revokes it at a clean stop so the
//! node is gone at once rather than when the lease runs out.

use super::registry::{self, Node, NodeKey};
use super::{ClusterConfig, ETCD_TIMEOUT};
use etcd_client::{LeaseKeepAliveStream, LeaseKeeper, PutOptions};
use std::sync::mpsc;
use std::time::Duration;
use tokio::sync::oneshot;

/// Why the control plane could not start.
#[derive(Debug, thiserror::Error)]
pub enum ControlPlaneError {
    #[error("cannot register with etcd at {endpoints:?}: {reason}; is etcd running there (see --cluster)?")]
    Etcd { endpoints: Vec<String>, reason: String },
    #[error("cannot start the control-plane thread: {0}")]
    Thread(String),
}

/// This node's link to the cluster's etcd, on a thread of its own.
pub struct ControlPlane {
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ControlPlane {
    /// Registers this node and keeps its registration alive; returns once it
    /// is registered (or why it could not be).
    pub fn start(config: ClusterConfig) -> Result<ControlPlane, ControlPlaneError> {
        let (ready_tx, ready_rx) = mpsc::channel();
        let (stop_tx, stop_rx) = oneshot::channel();
        let endpoints = config.endpoints.clone();
        let thread = std::thread::Builder::new()
            .name("ringmq-control".into())
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build();
                match runtime {
                    Ok(runtime) => runtime.block_on(run(config, ready_tx, stop_rx)),
                    Err(e) => {
                        let _ = ready_tx.send(Err(format!("starting its runtime: {e}")));
                    }
                }
            })
            .map_err(|e| ControlPlaneError::Thread(e.to_string()))?;
        let failed = |reason: String| ControlPlaneError::Etcd { endpoints: endpoints.clone(), reason };
        match ready_rx.recv_timeout(2 * ETCD_TIMEOUT) {
            Ok(Ok(())) => Ok(ControlPlane { stop: Some(stop_tx), thread: Some(thread) }),
            Ok(Err(reason)) => Err(failed(reason)),
            Err(_) => Err(failed(format!("no answer within {:?}", 2 * ETCD_TIMEOUT))),
        }
    }

    /// Revokes the registration and stops the thread.
    pub fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A registration: the client, the lease it lives under, and that lease's
/// keep-alive stream (opened once, renewed through for as long as it lasts).
struct Registered {
    client: etcd_client::Client,
    lease: i64,
    keeper: LeaseKeeper,
    answers: LeaseKeepAliveStream,
}

async fn register(config: &ClusterConfig) -> Result<Registered, String> {
    let mut client = registry::connect(&config.endpoints).await?;
    let ttl = config.lease_ttl.as_secs().max(1) as i64;
    let lease = client.lease_grant(ttl, None).await.map_err(|e| e.to_string())?.id();
    let node = Node::of(config, lease);
    let key = NodeKey::of(config).etcd_key();
    client.put(key, node.to_json(), Some(PutOptions::new().with_lease(lease))).await.map_err(|e| e.to_string())?;
    let (keeper, answers) = client.lease_keep_alive(lease).await.map_err(|e| e.to_string())?;
    tracing::info!(group = %config.group, node = %config.node, lease, "registered with etcd");
    Ok(Registered { client, lease, keeper, answers })
}

async fn run(config: ClusterConfig, ready: mpsc::Sender<Result<(), String>>, mut stop: oneshot::Receiver<()>) {
    let mut registered = match register(&config).await {
        Ok(r) => r,
        Err(reason) => {
            let _ = ready.send(Err(reason));
            return;
        }
    };
    let _ = ready.send(Ok(()));
    let renew_every = (config.lease_ttl / 3).max(Duration::from_millis(100));
    loop {
        tokio::select! {
            _ = &mut stop => break,
            _ = tokio::time::sleep(renew_every) => {}
        }
        if let Err(error) = renew(&mut registered).await {
            tracing::warn!(%error, lease = registered.lease, "the etcd lease was not renewed; registering again");
            match register(&config).await {
                Ok(r) => registered = r,
                Err(error) => tracing::error!(%error, "registering with etcd again failed; retrying"),
            }
        }
    }
    let Registered { mut client, lease, .. } = registered;
    match tokio::time::timeout(ETCD_TIMEOUT, client.lease_revoke(lease)).await {
        Ok(Ok(_)) => tracing::info!(lease, "left the cluster: lease revoked"),
        _ => tracing::warn!(lease, "could not revoke the etcd lease; it runs out by itself"),
    }
}

/// Renews the lease once; an error if etcd did not confirm it alive.
async fn renew(r: &mut Registered) -> Result<(), String> {
    let renewal = async {
        r.keeper.keep_alive().await.map_err(|e| e.to_string())?;
        match r.answers.message().await.map_err(|e| e.to_string())? {
            Some(answer) if answer.ttl() > 0 => Ok(()),
            _ => Err("the lease expired".to_string()),
        }
    };
    tokio::time::timeout(ETCD_TIMEOUT, renewal).await.map_err(|_| "no answer from etcd".to_string())?
}
