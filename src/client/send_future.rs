//! The outcome of an async send, delivered once by the producer's ack
//! thread: a `futures-channel` oneshot, blocked on with `futures-lite`.

use super::error::ClientError;
use super::producer::SendResult;
use futures_channel::oneshot;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// What an async send ends with.
pub type SendOutcome = Result<SendResult, ClientError>;

/// The result of an async send: `wait()` blocks, `.await` suspends.
pub struct SendFuture(oneshot::Receiver<SendOutcome>);

/// Where the producer delivers a send's outcome, and the future that gets it.
pub(crate) fn send_future() -> (oneshot::Sender<SendOutcome>, SendFuture) {
    let (sender, receiver) = oneshot::channel();
    (sender, SendFuture(receiver))
}

impl SendFuture {
    /// Blocks until the outcome arrives.
    pub fn wait(self) -> SendOutcome {
        futures_lite::future::block_on(self)
    }
}

impl Future for SendFuture {
    type Output = SendOutcome;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<SendOutcome> {
        // The sender is dropped without an outcome only if the producer's
        // thread ended first.
        Pin::new(&mut self.0).poll(cx).map(|outcome| outcome.unwrap_or(Err(ClientError::ProducerStopped)))
    }
}
