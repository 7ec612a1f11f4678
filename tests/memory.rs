//! Memory under load: many connections of large requests are read within
//! the request budgets. A binary of its own, so that its 600 MiB of durable
//! writes do not run beside the other tests' brokers (their topic deletions
//! waited past their 20 s client timeout behind it: issue 33).

mod common;

use common::{batch, Broker, Raw};
use ringmq::protocol::messages::{Produce, QueueRef, ACKS_DURABLE};
use ringmq::protocol::{ApiKey, ErrorCode, Writer};
use std::time::Duration;

fn produce_body(topic: &str, queue: u32, batch: &[u8]) -> Vec<u8> {
    let mut w = Writer::default();
    Produce { queue: QueueRef { topic: topic.into(), queue }, acks: ACKS_DURABLE, batches: vec![batch] }.encode(&mut w);
    w.buf
}

/// Many connections each sending large produces as fast as they can: the
/// broker reads only what its request budgets hold (a connection's and a
/// shard's), so its memory grows by no more than its named bounds (the
/// request budgets, the cache, the storage's bytes awaiting durability, the
/// connections' read buffers) and a margin, and every request is answered.
#[test]
fn many_connections_of_large_produces_are_read_within_the_request_budgets() {
    const CONNECTIONS: usize = 300;
    const REQUESTS: usize = 2;
    const SHARD_BUDGET_BYTES: u64 = 16 << 20;
    let dir = tempfile::tempdir().unwrap();
    let budget = SHARD_BUDGET_BYTES.to_string();
    let limits = ["--request-bytes-per-shard-max", &budget, "--request-bytes-per-connection-max", "8388608"];
    let broker = Broker::start(dir.path(), &limits);
    broker.client().create_topic("big", 2, 0).unwrap();
    let owners: Vec<String> = (0..2).map(|q| broker.client().owner("big", q).unwrap()).collect();
    let before_kib = broker.memory_kib("VmHWM");
    let value = vec![7u8; 1000 << 10];
    let request = |q: u32| produce_body("big", q, &batch(&value));
    let bodies = [request(0), request(1)];
    let answered: usize = std::thread::scope(|scope| {
        let senders: Vec<_> = (0..CONNECTIONS)
            .map(|c| {
                let (owner, body) = (&owners[c % 2], &bodies[c % 2]);
                scope.spawn(move || {
                    let mut stream = std::net::TcpStream::connect(owner).unwrap();
                    stream.set_read_timeout(Some(Duration::from_secs(300))).unwrap();
                    for corr in 1..=REQUESTS as u32 {
                        let frame = ringmq::protocol::frame::request(ApiKey::Produce as u16, 0, corr, body);
                        std::io::Write::write_all(&mut stream, &frame).unwrap();
                    }
                    let mut raw = Raw::from_stream(stream);
                    (0..REQUESTS).filter(|_| raw.read_response().is_some_and(|r| r.1 == ErrorCode::None)).count()
                })
            })
            .collect();
        senders.into_iter().map(|s| s.join().unwrap()).sum()
    });
    assert_eq!(answered, CONNECTIONS * REQUESTS, "every produce is answered and stored");
    let grown_mib = broker.memory_kib("VmHWM").saturating_sub(before_kib) >> 10;
    // Per shard (2): the request budget, the cache (--cache-mib 16, touched as
    // it fills) and the appended bytes not yet durable (the engine's
    // pending_bytes_max); the connections' 64 KiB read buffers; 64 MiB of margin.
    let pending_mib = (ringmq::shards::ShardConfig::new(dir.path()).pending_bytes_max >> 20) as u64;
    let per_shard_mib = (SHARD_BUDGET_BYTES >> 20) + 16 + pending_mib;
    let bound_mib = 2 * per_shard_mib + ((CONNECTIONS as u64 * 64) >> 10) + 64;
    assert!(grown_mib <= bound_mib, "peak RSS grew {grown_mib} MiB under the load; its bounds allow {bound_mib}");
}
