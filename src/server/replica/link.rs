//! One request at a time over a native-protocol connection from a shard to
//! another node (a follower to its leader), with a bound on every wait and
//! on the size of what it reads.

use super::ReplicaError;
use crate::protocol::frame::{self, Response};
use crate::protocol::ApiKey;
use crate::security::tls::ServerTls;
use crate::server::net::stream::Stream;
use futures_lite::{AsyncReadExt, AsyncWriteExt};
use glommio::net::TcpStream;
use std::net::SocketAddr;
use std::time::Duration;

/// A connection to one shard of another node.
pub struct Link {
    stream: Stream,
    next_correlation: u32,
    frame_bytes_max: usize,
}

/// A response frame read whole; `response()` parses it.
pub struct Answer(Vec<u8>);

impl Answer {
    pub fn response(&self) -> Result<Response<'_>, ReplicaError> {
        Response::parse(&self.0[4..]).map_err(ReplicaError::Response)
    }
}

impl Link {
    /// Connects (under TLS when the broker serves TLS: the other node's
    /// certificate is verified against `--tls-ca` and this node's presented).
    pub async fn connect(
        addr: SocketAddr,
        tls: Option<&ServerTls>,
        timeout: Duration,
        frame_bytes_max: usize,
    ) -> Result<Link, ReplicaError> {
        let tcp = glommio::timer::timeout(timeout, async {
            TcpStream::connect(addr).await.map_err(|e| glommio::GlommioError::IoError(e.into()))
        })
        .await
        .map_err(|e| ReplicaError::Connect { addr, why: e.to_string() })?;
        let stream = Stream::connect(tcp, &addr.to_string(), tls, timeout)
            .await
            .map_err(|e| ReplicaError::Connect { addr, why: e.to_string() })?;
        Ok(Link { stream, next_correlation: 0, frame_bytes_max })
    }

    /// Sends one request and reads its response, all within `timeout`.
    pub async fn call(&mut self, api: ApiKey, body: &[u8], timeout: Duration) -> Result<Answer, ReplicaError> {
        self.next_correlation = self.next_correlation.wrapping_add(1);
        let corr = self.next_correlation;
        let request = frame::request(api as u16, 0, corr, body);
        let frame_bytes_max = self.frame_bytes_max;
        let stream = &mut self.stream;
        let answer = glommio::timer::timeout(timeout, async move {
            let io = |e: std::io::Error| glommio::GlommioError::IoError(e);
            stream.write_all(&request).await.map_err(io)?;
            stream.flush().await.map_err(io)?;
            let mut len = [0u8; 4];
            stream.read_exact(&mut len).await.map_err(io)?;
            let len = u32::from_le_bytes(len) as usize;
            if len > frame_bytes_max {
                let m = format!("a response frame of {len} bytes is above the limit of {frame_bytes_max}");
                return Err(io(std::io::Error::new(std::io::ErrorKind::InvalidData, m)));
            }
            let mut frame = vec![0u8; 4 + len];
            frame[..4].copy_from_slice(&(len as u32).to_le_bytes());
            stream.read_exact(&mut frame[4..]).await.map_err(io)?;
            Ok(Answer(frame))
        })
        .await
        .map_err(ReplicaError::Io)?;
        let got = answer.response()?.correlation_id;
        if got != corr {
            return Err(ReplicaError::Correlation { got, asked: corr });
        }
        Ok(answer)
    }
}
