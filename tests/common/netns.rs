//! Network namespaces for partition tests (root only): a bridge in this
//! namespace, with an address for clients (.1) and one for etcd (.2), and a
//! namespace per node (.11, .12, ...) joined to it by a veth pair.
//! A partition is a set of blackhole routes in a node's namespace: its
//! packets to the addresses named are dropped without a word, as a cut cable
//! would. Everything is removed when dropped.

use std::process::Command;

pub struct Lan {
    bridge: String,
    namespaces: Vec<String>,
    subnet: String,
}

/// Runs `ip args`, which must succeed.
fn ip(args: &[&str]) {
    let out = super::tools::command("ip").args(args).output().expect("run ip");
    assert!(out.status.success(), "ip {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim());
}

impl Lan {
    /// A LAN of `nodes` namespaces, named after this process so that runs never share one.
    pub fn new(nodes: usize) -> Lan {
        let tag = std::process::id() % 10_000;
        let subnet = format!("10.77.{}", 20 + tag % 200);
        let lan = Lan {
            bridge: format!("rmqbr{tag}"),
            namespaces: (0..nodes).map(|i| format!("ringmq-{tag}-{i}")).collect(),
            subnet,
        };
        ip(&["link", "add", &lan.bridge, "type", "bridge"]);
        ip(&["addr", "add", &format!("{}/24", lan.client_ip()), "dev", &lan.bridge]);
        ip(&["addr", "add", &format!("{}/24", lan.etcd_ip()), "dev", &lan.bridge]);
        ip(&["link", "set", &lan.bridge, "up"]);
        for (i, ns) in lan.namespaces.iter().enumerate() {
            let veth = format!("rmqv{tag}n{i}");
            ip(&["netns", "add", ns]);
            ip(&["link", "add", &veth, "type", "veth", "peer", "name", "eth0", "netns", ns]);
            ip(&["link", "set", &veth, "master", &lan.bridge, "up"]);
            ip(&["-n", ns, "addr", "add", &format!("{}/24", lan.node_ip(i)), "dev", "eth0"]);
            ip(&["-n", ns, "link", "set", "eth0", "up"]);
            ip(&["-n", ns, "link", "set", "lo", "up"]);
        }
        lan
    }

    /// This namespace's address on the LAN: clients connect from it.
    pub fn client_ip(&self) -> String {
        format!("{}.1", self.subnet)
    }

    /// The address etcd serves on.
    pub fn etcd_ip(&self) -> String {
        format!("{}.2", self.subnet)
    }

    pub fn node_ip(&self, i: usize) -> String {
        format!("{}.{}", self.subnet, 11 + i)
    }

    pub fn namespace(&self, i: usize) -> &str {
        &self.namespaces[i]
    }

    /// Node `i` can no longer send to `addrs` (so no connection to or from them works).
    pub fn cut(&self, i: usize, addrs: &[String]) {
        for a in addrs {
            ip(&["-n", &self.namespaces[i], "route", "add", "blackhole", &format!("{a}/32")]);
        }
    }

    /// Undoes `cut`.
    pub fn heal(&self, i: usize, addrs: &[String]) {
        for a in addrs {
            ip(&["-n", &self.namespaces[i], "route", "del", "blackhole", &format!("{a}/32")]);
        }
    }
}

impl Drop for Lan {
    fn drop(&mut self) {
        for ns in &self.namespaces {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
        let _ = Command::new("ip").args(["link", "del", &self.bridge]).status();
    }
}
