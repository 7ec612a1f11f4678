//! Listening sockets, bound exclusively. glommio's `TcpListener::bind` sets
//! SO_REUSEPORT, so a second broker (or anything else of the same user)
//! started on a port already served binds it too, and the kernel then splits
//! new connections between the two: clients would reach a broker that does
//! not hold their data, with no error anywhere. Each shard has its own port,
//! so none needs the kernel's balancing: a port in use is refused here.

use crate::server::core::Core;
use glommio::net::{TcpListener, TcpStream};
use std::net::SocketAddr;
use std::os::fd::{FromRawFd, IntoRawFd};

/// Connections the kernel queues before they are accepted (as glommio's own bind).
const BACKLOG: i32 = 1024;

/// A listener on `addr` that no other socket shares (EADDRINUSE if one has it).
pub fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = std::net::TcpListener::bind(addr)?;
    // std listens with a backlog of 128; listening again only raises it.
    rustix::net::listen(&socket, BACKLOG)?;
    let fd = socket.into_raw_fd();
    // SAFETY: `fd` is a bound, listening TCP socket whose ownership
    // `into_raw_fd` gave up; glommio's listener takes it over and closes it.
    Ok(unsafe { TcpListener::from_raw_fd(fd) })
}

/// The next connection `listener` (named `name` in logs) accepts; a failed
/// accept is logged and tried again shortly. None once the shard stops.
pub async fn accept(core: &Core, listener: &TcpListener, name: &'static str) -> Option<TcpStream> {
    loop {
        match core.tasks().unless_stopping(listener.accept()).await? {
            Ok(stream) => return Some(stream),
            Err(error) => {
                tracing::warn!(shard = core.id(), listener = name, %error, "accept failed");
                glommio::timer::sleep(std::time::Duration::from_millis(10)).await;
            }
        }
    }
}
