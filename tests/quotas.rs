//! Client quotas and connection limits: a user held to a produce rate stays
//! within 10% of it over 10 s, and says how long it was held back, while
//! another user on the same broker goes at its own pace; a flood of
//! connections from one address stops at its limit and other addresses
//! still connect.

mod common;

use common::{batch, Broker};
use ringmq::client::{Message, Producer, ProducerConfig};
use ringmq::protocol::messages::{Produce, QueueRef, ACKS_DURABLE};
use ringmq::protocol::{ApiKey, ErrorCode, Writer};
use ringmq::security::quota::{Entity, Entry, Limits};
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddrV4, TcpStream};
use std::time::{Duration, Instant};

const MIB: u64 = 1 << 20;

/// Sends 64 KiB messages for `run`; the bytes acknowledged per second.
fn produce_for(client: std::sync::Arc<ringmq::client::Client>, run: Duration) -> f64 {
    let producer = Producer::new(client, ProducerConfig::default());
    let value = vec![7u8; 64 << 10];
    let (start, mut bytes) = (Instant::now(), 0u64);
    while start.elapsed() < run {
        producer.send("events", &Message::new(value.clone())).expect("a produce");
        bytes += value.len() as u64;
    }
    bytes as f64 / start.elapsed().as_secs_f64()
}

#[test]
fn a_user_held_to_a_produce_rate_stays_within_10_percent_of_it_while_another_keeps_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    for name in ["alice", "bob"] {
        common::create_user(&data, name, &format!("{name}-pw"));
    }
    // Both super users: authorization is not what this measures.
    let broker = Broker::start(&data, &["--auth-required", "--super-users", "alice,bob"]);
    let (alice, bob) = (broker.client_as("alice", "alice-pw"), broker.client_as("bob", "bob-pw"));
    alice.create_topic("events", 4, 0).unwrap();
    let limits = Limits { produce_bytes_per_sec: Some(MIB), ..Limits::default() };
    alice.set_quota(&Entry { entity: Entity { user: Some("alice".into()), client_id: None }, limits }).unwrap();
    assert_eq!(alice.list_quotas().unwrap().len(), 1);

    let run = Duration::from_secs(10);
    let bobs = std::thread::spawn(move || produce_for(bob, run));
    let alices = produce_for(alice.clone(), run);
    let bobs = bobs.join().unwrap();
    let ratio = alices / MIB as f64;
    println!("alice {:.2} MiB/s (quota 1), bob {:.2} MiB/s (none)", alices / MIB as f64, bobs / MIB as f64);
    assert!((0.9..=1.1).contains(&ratio), "alice's produce rate is {ratio:.3} of her quota");
    assert!(bobs > 3.0 * MIB as f64, "bob is not held to alice's quota: {:.2} MiB/s", bobs / MIB as f64);

    // A produce past the quota says how long it was held.
    let mut w = Writer::default();
    let big = batch(&[1u8; 256 << 10]);
    let queue = QueueRef { topic: "events".into(), queue: 0 };
    Produce { queue, acks: ACKS_DURABLE, batches: vec![&big] }.encode(&mut w);
    alice.call_queue("events", 0, ApiKey::Produce, &w.buf).unwrap();
    let held = alice.call_queue("events", 0, ApiKey::Produce, &w.buf).unwrap();
    assert!(held.throttle_ms > 100, "the response says it was held back: {} ms", held.throttle_ms);
}

/// A TCP connection to `to` from the loopback address `from`.
fn connect_from(from: Ipv4Addr, to: &str) -> TcpStream {
    use rustix::net::{bind, connect, socket, AddressFamily, SocketType};
    let fd = socket(AddressFamily::INET, SocketType::STREAM, None).unwrap();
    bind(&fd, &SocketAddrV4::new(from, 0)).unwrap();
    connect(&fd, &to.parse::<std::net::SocketAddr>().unwrap()).unwrap();
    let stream = TcpStream::from(fd);
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    stream
}

/// Whether the broker serves this connection (an ApiVersions answered), or
/// refused it for too many connections.
fn served(stream: &mut TcpStream) -> bool {
    stream.write_all(&ringmq::protocol::frame::request(ApiKey::ApiVersions as u16, 0, 1, &[])).unwrap();
    let mut len = [0u8; 4];
    stream.read_exact(&mut len).unwrap();
    let mut payload = vec![0u8; u32::from_le_bytes(len) as usize];
    stream.read_exact(&mut payload).unwrap();
    let r = ringmq::protocol::frame::Response::parse(&payload).unwrap();
    match r.error {
        ErrorCode::None => true,
        ErrorCode::TooManyConnections => {
            assert!(r.message.contains("--connections-per-ip-max"), "{}", r.message);
            false
        }
        other => panic!("unexpected {other:?}: {}", r.message),
    }
}

/// The admin listener's answer to a GET of `/healthz` on `stream`: (status, body).
fn admin_health(mut stream: TcpStream) -> (u16, String) {
    stream.write_all(b"GET /healthz HTTP/1.1\r\nHost: ringmq\r\n\r\n").unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let status = response.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, response.split_once("\r\n\r\n").map_or("", |(_, b)| b).to_string())
}

#[test]
fn a_flood_of_connections_from_one_address_stops_at_its_limit_and_others_still_connect() {
    let dir = tempfile::tempdir().unwrap();
    let admin = format!("127.0.0.1:{}", common::free_port_pair("127.0.0.1"));
    let broker = Broker::start(dir.path(), &["--connections-per-ip-max", "4", "--admin-listen", &admin]);
    let one = Ipv4Addr::new(127, 0, 0, 1);
    let mut flood: Vec<TcpStream> = (0..4).map(|i| connect_from(one, &broker.addrs[i % 2])).collect();
    assert!(flood.iter_mut().all(served), "the first 4 are served, on both shards");
    let mut over = connect_from(one, broker.addr());
    assert!(!served(&mut over), "the 5th from 127.0.0.1 is refused");
    let (status, body) = admin_health(connect_from(one, &admin));
    assert_eq!(status, 503, "the admin listener admits as the client listeners do: {body}");
    assert!(body.contains("--connections-per-ip-max"), "{body}");
    let (status, body) = admin_health(connect_from(Ipv4Addr::new(127, 0, 0, 2), &admin));
    assert_eq!((status, body.as_str()), (200, "ok\n"), "127.0.0.2 reaches the admin listener");
    let mut other = connect_from(Ipv4Addr::new(127, 0, 0, 2), broker.addr());
    assert!(served(&mut other), "127.0.0.2 still connects");
    drop(flood.pop());
    // The broker notices the close when it reads the connection's end.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let mut again = connect_from(one, broker.addr());
        if served(&mut again) {
            break;
        }
        assert!(Instant::now() < deadline, "a closed connection's place is never given back");
        std::thread::sleep(Duration::from_millis(100));
    }
}
