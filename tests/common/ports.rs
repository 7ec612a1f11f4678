//! Ports a test chooses before it starts a process that listens on them
//! (a broker's consecutive per-shard ports, etcd's client and peer ports).
//!
//! They come from below the kernel's ephemeral range: a port the kernel
//! handed out for a probe and took back can be handed out again at once to
//! any process that binds port 0 or connects out (every client of every
//! test), so the process started on it would find it taken. The kernel
//! never hands out a port below that range on its own.

use std::net::TcpListener;
use std::sync::atomic::{AtomicU32, Ordering};

/// The lowest port this module hands out (below it: well-known services).
const LOWEST: u16 = 10_000;

/// Where the kernel's ephemeral range starts (`ip_local_port_range`).
fn ephemeral_start() -> u16 {
    let range = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").unwrap_or_default();
    range.split_whitespace().next().and_then(|p| p.parse().ok()).unwrap_or(32_768)
}

/// `count` consecutive ports of `ip` that nothing listens on now.
pub fn free_ports(ip: &str, count: u16) -> u16 {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let span = u32::from(ephemeral_start().saturating_sub(LOWEST + count)).max(1);
    // Each test process starts at its own place in the span, so two test
    // binaries running at once rarely probe the same ports.
    let start = std::process::id().wrapping_mul(7919);
    for _ in 0..span {
        let offset = start.wrapping_add(NEXT.fetch_add(u32::from(count), Ordering::Relaxed)) % span;
        let first = LOWEST + offset as u16;
        if (first..first + count).all(|port| TcpListener::bind((ip, port)).is_ok()) {
            return first;
        }
    }
    panic!("no {count} consecutive free ports on {ip} below the ephemeral range");
}
