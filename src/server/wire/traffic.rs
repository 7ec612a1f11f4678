//! Produces and fetches counted where they are served (by API and topic),
//! and the messages they stored or delivered traced.

use crate::protocol::messages as msg;
use crate::server::core::traffic::{Direction, Tally};
use crate::server::core::Core;
use crate::server::data::fetch::QueueRead;
use crate::server::wire::caller::Caller;

/// Counts a produce of `batches` to a queue, and traces what it stored;
/// `stored`: each batch's base offset and record count, if stored.
pub fn produced(
    core: &Core,
    caller: &Caller,
    api: &'static str,
    q: &msg::QueueRef,
    batches: &[&[u8]],
    stored: Option<&[(u64, u32)]>,
) {
    let bytes = batches.iter().map(|b| b.len() as u64).sum();
    let messages = stored.map_or(0, |s| s.iter().map(|(_, n)| u64::from(*n)).sum());
    core.count_traffic(Direction::Produce, api, &q.topic, Tally { messages, bytes, failed: stored.is_none() });
    if let (true, Some(stored)) = (core.trace().is_on(), stored) {
        let client = caller.client();
        for (batch, (base, _)) in batches.iter().zip(stored) {
            core.trace_stored(q, *base, batch, &client);
        }
    }
}

/// Counts a fetch of one queue and traces what it delivered to `consumer`
/// (group, member); `read`: what it read, if it did.
pub fn fetched(
    core: &Core,
    api: &'static str,
    f: &msg::Fetch,
    read: Option<&QueueRead>,
    consumer: Option<&(String, String)>,
) {
    let served = match read.map(QueueRead::fetched) {
        Some(r) => {
            let (group, member) = consumer.map_or(("", ""), |(g, m)| (g.as_str(), m.as_str()));
            core.trace_delivered(&f.queue, r.batches, f.offset, group, member);
            Tally { messages: r.next_offset.saturating_sub(f.offset), bytes: r.batches.len() as u64, failed: false }
        }
        None => Tally { failed: true, ..Tally::default() },
    };
    core.count_traffic(Direction::Fetch, api, &f.queue.topic, served);
}
