//! Runs several futures of one kind concurrently on the current task, so that
//! their I/O is submitted together.

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

/// Awaits all `futures`, returning their outputs in order.
pub async fn join_all<F: Future>(futures: Vec<F>) -> Vec<F::Output> {
    let mut futures: Vec<Pin<Box<F>>> = futures.into_iter().map(Box::pin).collect();
    let mut outputs: Vec<Option<F::Output>> = futures.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (fut, out) in futures.iter_mut().zip(outputs.iter_mut()) {
            if out.is_none() {
                match fut.as_mut().poll(cx) {
                    Poll::Ready(v) => *out = Some(v),
                    Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
    .await;
    outputs.into_iter().map(|o| o.expect("all ready")).collect()
}

/// Awaits the first of `futures` to finish and returns its index and output;
/// the others are dropped. Never finishes for an empty list.
pub async fn first_of<F: Future>(futures: Vec<F>) -> (usize, F::Output) {
    let mut futures: Vec<Pin<Box<F>>> = futures.into_iter().map(Box::pin).collect();
    std::future::poll_fn(|cx| {
        for (i, fut) in futures.iter_mut().enumerate() {
            if let Poll::Ready(v) = fut.as_mut().poll(cx) {
                return Poll::Ready((i, v));
            }
        }
        Poll::Pending
    })
    .await
}
