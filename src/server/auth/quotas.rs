//! Client quotas on the shard that serves the request: each request, and
//! the bytes it produces, is taken from the token buckets of the quota the
//! connection falls under before it is served, and a client in debt waits
//! it off first (so a throttled producer stores at its rate); the bytes a
//! fetch returns are taken after it is read, and its response waits. The
//! wait is the response's throttle time. Nothing is refused and no
//! connection is closed for a quota. Connections under no quota pay one
//! branch (an empty quota list) or one lookup.

use crate::security::acl::ANONYMOUS;
use crate::security::quota::Meter;
use crate::server::core::Core;
use std::time::Duration;

/// Before a request is served: one request and `produced` bytes taken from
/// the connection's quota; waits off any debt; how long it waited.
pub async fn before(core: &Core, user: Option<&str>, client_id: &str, produced: u64) -> Duration {
    let wait = charge(core, user, client_id, |limits| {
        [(Meter::Requests, limits.requests_per_sec, 1), (Meter::ProduceBytes, limits.produce_bytes_per_sec, produced)]
    });
    hold(wait).await
}

/// After a fetch read `fetched` bytes: taken from the connection's quota;
/// waits off any debt before the response goes; how long it waited.
pub async fn after_fetch(core: &Core, user: Option<&str>, client_id: &str, fetched: u64) -> Duration {
    let wait = charge(core, user, client_id, |limits| [(Meter::FetchBytes, limits.fetch_bytes_per_sec, fetched)]);
    hold(wait).await
}

/// The longest wait the meters `takes` names ask for.
fn charge<const N: usize>(
    core: &Core,
    user: Option<&str>,
    client_id: &str,
    takes: impl FnOnce(&crate::security::quota::Limits) -> [(Meter, Option<u64>, u64); N],
) -> Duration {
    let quotas = core.quotas();
    if quotas.is_empty() {
        return Duration::ZERO;
    }
    let user = user.unwrap_or(ANONYMOUS.trim_start_matches("User:"));
    let Some(applied) = quotas.applied(user, client_id) else { return Duration::ZERO };
    takes(&applied.limits)
        .into_iter()
        .filter_map(|(meter, rate, amount)| Some(core.accounts().buckets.take(&applied.bucket, meter, rate?, amount)))
        .max()
        .unwrap_or_default()
}

async fn hold(wait: Duration) -> Duration {
    if !wait.is_zero() {
        glommio::timer::sleep(wait).await;
    }
    wait
}
