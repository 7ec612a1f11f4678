//! Calls between the shards of one broker over glommio's channel mesh. A
//! client request that reached a core that does not own its queue travels
//! as the client's own frame to the owner and its response frame comes back;
//! everything the broker itself asks of another shard is a typed call
//! (append a batch, change topics on shard 0, apply metadata) with a typed
//! answer. Every call is a message out and an answer back.

use super::failure::Failure;
use super::failure::Reason;
use super::metadata::Metadata;
use super::metrics::Family;
use super::service::Stored;
use super::topic_configs::ConfigChange;
use super::topics::NewTopic;
use crate::protocol::messages::QueueRef;
use crate::security::change::AccountsChange;
use glommio::channels::channel_mesh::{Receivers, Senders};
use ringmq_shards::kafka::Marker;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;

/// What one shard asks of another.
#[derive(Debug)]
pub enum Call {
    /// A client's request frame (length prefix included), for the wire to serve there.
    Frame(Vec<u8>),
    /// Make this metadata current.
    Metadata(Metadata),
    /// Append a batch to a topic's queue (owned there).
    Append { queue: QueueRef, batch: Vec<u8> },
    /// Create a topic (on shard 0, which owns metadata changes).
    CreateTopic(NewTopic),
    /// Delete a topic (on shard 0).
    DeleteTopic(String),
    /// Change a topic's configs (on shard 0).
    ConfigureTopic { name: String, changes: Vec<ConfigChange> },
    /// Give a topic more queues (on shard 0).
    AddQueues { name: String, queues: u32 },
    /// Change the users, ACLs or quotas (on shard 0).
    ChangeAccounts(AccountsChange),
    /// Report this shard's metrics.
    Metrics,
    /// Say whether this shard serves fully (readiness).
    Health,
    /// A traced group committed `offset` of a queue this shard owns.
    TraceCommit { group: String, member: String, queue: QueueRef, offset: u64 },
    /// End a Kafka transaction in a queue this shard owns: its marker.
    EndTxn { queue: QueueRef, marker: Marker },
    /// End a Kafka transaction's pending offsets of a group this shard coordinates.
    EndTxnOffsets { group: String, producer_id: i64, commit: bool },
    /// Whether the producer's open transaction holds a partition (asked of
    /// the transactional id's coordinator before its first batch there).
    VerifyTxn { id: String, producer_id: i64, epoch: i16, partition: (String, u32) },
}

/// The answer to a [`Call`].
#[derive(Debug)]
pub enum Answer {
    /// The response frame to a forwarded request; empty when it has none (acks none).
    Frame(Vec<u8>),
    /// The metadata was applied.
    Applied,
    /// Where the batch was stored.
    Appended(Result<Stored, Failure>),
    /// The topic change was stored and applied everywhere.
    Changed(Result<(), Failure>),
    /// The accounts change was stored (for a removal of ACLs, how many rules went).
    AccountsChanged(Result<u32, Failure>),
    /// A shard's metric families.
    Metrics(Vec<Family>),
    /// Why the shard does not serve fully, if it does not.
    Health(Option<String>),
    /// The transaction's end was written (and replicated).
    Ended(Result<(), Failure>),
    /// Whether the transaction holds the partition.
    Verified(Result<bool, Failure>),
}

#[derive(Debug)]
pub enum MeshMsg {
    Call { id: u64, call: Call },
    Answer { id: u64, answer: Answer },
}

type Waiter = Rc<RefCell<(Option<Answer>, Option<std::task::Waker>)>>;

/// Serves the calls other shards send (the shard's start-up provides it).
pub type Serve = Rc<dyn Fn(Call) -> Pin<Box<dyn Future<Output = Answer>>>>;

/// This shard's end of the mesh.
pub struct Mesh {
    senders: Senders<MeshMsg>,
    pending: RefCell<HashMap<u64, Waiter>>,
    next_id: Cell<u64>,
}

impl Mesh {
    /// Wraps the senders of a joined mesh.
    pub fn new(senders: Senders<MeshMsg>) -> Mesh {
        Mesh { senders, pending: RefCell::new(HashMap::new()), next_id: Cell::new(1) }
    }

    /// Number of shards.
    pub fn peers(&self) -> usize {
        self.senders.nr_consumers()
    }

    /// Forwards a request frame to `shard`; its response frame (empty for none).
    pub async fn forward(&self, shard: usize, frame: Vec<u8>) -> Result<Vec<u8>, Failure> {
        match self.call(shard, Call::Frame(frame)).await? {
            Answer::Frame(frame) => Ok(frame),
            other => Err(unexpected(&other)),
        }
    }

    /// Makes `metadata` current on `shard`.
    pub async fn apply_metadata(&self, shard: usize, metadata: Metadata) -> Result<(), Failure> {
        self.call_applied(shard, Call::Metadata(metadata)).await
    }

    /// Appends `batch` to `queue` on `shard`, its owner.
    pub async fn append(&self, shard: usize, queue: QueueRef, batch: Vec<u8>) -> Result<Stored, Failure> {
        match self.call(shard, Call::Append { queue, batch }).await? {
            Answer::Appended(appended) => appended,
            other => Err(unexpected(&other)),
        }
    }

    /// Asks `shard` (0) to make a topic change.
    pub async fn change_topics(&self, shard: usize, change: Call) -> Result<(), Failure> {
        assert!(
            matches!(
                change,
                Call::CreateTopic(_) | Call::DeleteTopic(_) | Call::ConfigureTopic { .. } | Call::AddQueues { .. }
            ),
            "{change:?} is not a topic change"
        );
        match self.call(shard, change).await? {
            Answer::Changed(changed) => changed,
            other => Err(unexpected(&other)),
        }
    }

    /// Asks `shard` (0) to change the users, ACLs or quotas.
    pub async fn change_accounts(&self, shard: usize, change: AccountsChange) -> Result<u32, Failure> {
        match self.call(shard, Call::ChangeAccounts(change)).await? {
            Answer::AccountsChanged(changed) => changed,
            other => Err(unexpected(&other)),
        }
    }

    /// The metric families `shard` reports now.
    pub async fn metrics(&self, shard: usize) -> Result<Vec<Family>, Failure> {
        match self.call(shard, Call::Metrics).await? {
            Answer::Metrics(families) => Ok(families),
            other => Err(unexpected(&other)),
        }
    }

    /// Makes `shard` apply `call` (answered `Applied`).
    pub async fn call_applied(&self, shard: usize, call: Call) -> Result<(), Failure> {
        match self.call(shard, call).await? {
            Answer::Applied => Ok(()),
            other => Err(unexpected(&other)),
        }
    }

    /// Makes `shard` end a Kafka transaction (`Call::EndTxn` or `EndTxnOffsets`).
    pub async fn end_txn(&self, shard: usize, call: Call) -> Result<(), Failure> {
        assert!(matches!(call, Call::EndTxn { .. } | Call::EndTxnOffsets { .. }), "{call:?} ends no transaction");
        match self.call(shard, call).await? {
            Answer::Ended(ended) => ended,
            other => Err(unexpected(&other)),
        }
    }

    /// Asks `shard` whether a producer's open transaction holds a partition (`Call::VerifyTxn`).
    pub async fn verify_txn(&self, shard: usize, call: Call) -> Result<bool, Failure> {
        assert!(matches!(call, Call::VerifyTxn { .. }), "{call:?} verifies no transaction");
        match self.call(shard, call).await? {
            Answer::Verified(held) => held,
            other => Err(unexpected(&other)),
        }
    }

    /// Why `shard` does not serve fully, if it does not.
    pub async fn health(&self, shard: usize) -> Result<Option<String>, Failure> {
        match self.call(shard, Call::Health).await? {
            Answer::Health(trouble) => Ok(trouble),
            other => Err(unexpected(&other)),
        }
    }

    async fn call(&self, shard: usize, call: Call) -> Result<Answer, Failure> {
        let id = self.next_id.replace(self.next_id.get() + 1);
        let waiter: Waiter = Rc::default();
        self.pending.borrow_mut().insert(id, waiter.clone());
        if self.senders.send_to(shard, MeshMsg::Call { id, call }).await.is_err() {
            self.pending.borrow_mut().remove(&id);
            return Err(Failure(Reason::ShuttingDown, format!("shard {shard} is gone")));
        }
        let answer = std::future::poll_fn(|cx| {
            let mut w = waiter.borrow_mut();
            match w.0.take() {
                Some(answer) => std::task::Poll::Ready(answer),
                None => {
                    w.1 = Some(cx.waker().clone());
                    std::task::Poll::Pending
                }
            }
        });
        Ok(answer.await)
    }

    /// Receives from every peer until the mesh closes: answers complete
    /// calls, calls are served by `serve` and answered.
    pub fn spawn_receivers(self: &Rc<Self>, mut receivers: Receivers<MeshMsg>, serve: Serve) -> Vec<glommio::Task<()>> {
        receivers
            .streams()
            .into_iter()
            .map(|(peer, stream)| {
                let (mesh, serve) = (self.clone(), serve.clone());
                glommio::spawn_local(async move {
                    while let Some(msg) = stream.recv().await {
                        mesh.clone().receive(peer, msg, serve.clone());
                    }
                })
            })
            .collect()
    }

    fn receive(self: Rc<Self>, peer: usize, msg: MeshMsg, serve: Serve) {
        match msg {
            MeshMsg::Answer { id, answer } => {
                if let Some(w) = self.pending.borrow_mut().remove(&id) {
                    let mut w = w.borrow_mut();
                    w.0 = Some(answer);
                    if let Some(waker) = w.1.take() {
                        waker.wake();
                    }
                }
            }
            MeshMsg::Call { id, call } => {
                glommio::spawn_local(async move {
                    let answer = serve(call).await;
                    let _ = self.senders.send_to(peer, MeshMsg::Answer { id, answer }).await;
                })
                .detach();
            }
        }
    }
}

fn unexpected(answer: &Answer) -> Failure {
    Failure(Reason::Internal, format!("unexpected answer from a peer shard: {answer:?}"))
}
