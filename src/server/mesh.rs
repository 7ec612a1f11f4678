//! Cross-shard calls over glommio's channel mesh: a request that reaches a
//! core that does not own its queue is forwarded, as its raw frame, to the
//! owning core and answered from there; shard 0 pushes metadata snapshots the
//! same way. Every call is a message out and a reply back.

use glommio::channels::channel_mesh::{Receivers, Senders};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;

/// What travels between shards.
#[derive(Debug)]
pub enum MeshMsg {
    /// A client's request frame (length prefix included) to serve locally.
    Request { id: u64, frame: Vec<u8> },
    /// A metadata snapshot to apply.
    Metadata { id: u64, snapshot: Vec<u8> },
    /// The reply to `id`: a response frame, or empty for "applied".
    Reply { id: u64, frame: Vec<u8> },
}

type Waiter = Rc<RefCell<(Option<Vec<u8>>, Option<std::task::Waker>)>>;

/// This shard's end of the mesh.
pub struct Mesh {
    senders: Senders<MeshMsg>,
    pending: RefCell<HashMap<u64, Waiter>>,
    next_id: Cell<u64>,
}

/// Serves what other shards send: requests and metadata snapshots.
pub trait MeshService: 'static {
    /// Serves a forwarded request frame; returns the response frame (empty for none).
    fn serve(self: Rc<Self>, frame: Vec<u8>) -> Pin<Box<dyn Future<Output = Vec<u8>>>>;
    /// Applies a metadata snapshot.
    fn apply(self: Rc<Self>, snapshot: Vec<u8>) -> Pin<Box<dyn Future<Output = ()>>>;
}

impl Mesh {
    /// Wraps the senders of a joined mesh.
    pub fn new(senders: Senders<MeshMsg>) -> Rc<Mesh> {
        Rc::new(Mesh { senders, pending: RefCell::new(HashMap::new()), next_id: Cell::new(1) })
    }

    /// Number of shards.
    pub fn peers(&self) -> usize {
        self.senders.nr_consumers()
    }

    /// Forwards a request frame to `shard` and returns its response frame.
    pub async fn forward(&self, shard: usize, frame: Vec<u8>) -> Result<Vec<u8>, &'static str> {
        let id = self.next_id.replace(self.next_id.get() + 1);
        self.call(shard, id, MeshMsg::Request { id, frame }).await
    }

    /// Sends a metadata snapshot to `shard` and waits until it is applied.
    pub async fn push_metadata(&self, shard: usize, snapshot: Vec<u8>) -> Result<(), &'static str> {
        let id = self.next_id.replace(self.next_id.get() + 1);
        self.call(shard, id, MeshMsg::Metadata { id, snapshot }).await.map(|_| ())
    }

    async fn call(&self, shard: usize, id: u64, msg: MeshMsg) -> Result<Vec<u8>, &'static str> {
        let waiter: Waiter = Rc::default();
        self.pending.borrow_mut().insert(id, waiter.clone());
        if self.senders.send_to(shard, msg).await.is_err() {
            self.pending.borrow_mut().remove(&id);
            return Err("the peer shard is gone");
        }
        std::future::poll_fn(|cx| {
            let mut w = waiter.borrow_mut();
            match w.0.take() {
                Some(frame) => std::task::Poll::Ready(Ok(frame)),
                None => {
                    w.1 = Some(cx.waker().clone());
                    std::task::Poll::Pending
                }
            }
        })
        .await
    }

    /// Receives from every peer until the mesh closes: replies complete calls,
    /// requests and snapshots are served by `service` and answered.
    pub fn spawn_receivers(
        self: &Rc<Self>,
        mut receivers: Receivers<MeshMsg>,
        service: Rc<impl MeshService>,
    ) -> Vec<glommio::Task<()>> {
        receivers
            .streams()
            .into_iter()
            .map(|(peer, stream)| {
                let (mesh, service) = (self.clone(), service.clone());
                glommio::spawn_local(async move {
                    while let Some(msg) = stream.recv().await {
                        mesh.clone().receive(peer, msg, service.clone());
                    }
                })
            })
            .collect()
    }

    fn receive(self: Rc<Self>, peer: usize, msg: MeshMsg, service: Rc<impl MeshService>) {
        match msg {
            MeshMsg::Reply { id, frame } => {
                if let Some(w) = self.pending.borrow_mut().remove(&id) {
                    let mut w = w.borrow_mut();
                    w.0 = Some(frame);
                    if let Some(waker) = w.1.take() {
                        waker.wake();
                    }
                }
            }
            MeshMsg::Request { id, frame } => {
                glommio::spawn_local(async move {
                    let frame = service.serve(frame).await;
                    let _ = self.senders.send_to(peer, MeshMsg::Reply { id, frame }).await;
                })
                .detach();
            }
            MeshMsg::Metadata { id, snapshot } => {
                glommio::spawn_local(async move {
                    service.apply(snapshot).await;
                    let _ = self.senders.send_to(peer, MeshMsg::Reply { id, frame: Vec::new() }).await;
                })
                .detach();
            }
        }
    }
}
