//! Kafka connections: 4-byte big-endian length frames, served one after
//! another (no pipelining yet). A frame past `max_frame_bytes` or one that
//! does not decode closes that connection only.

use super::dispatch::{self, Outcome};
use super::Services;
use futures_lite::io::{AsyncReadExt, AsyncWriteExt};
use glommio::net::{TcpListener, TcpStream};
use std::rc::Rc;

/// Accepts Kafka connections until the shard stops.
pub async fn accept_loop(services: Rc<Services>, listener: TcpListener) {
    let core = services.core.clone();
    loop {
        let stream = match core.tasks().unless_stopping(listener.accept()).await {
            None => return,
            Some(Ok(stream)) => stream,
            Some(Err(error)) => {
                tracing::warn!(shard = core.id(), %error, "kafka accept failed");
                glommio::timer::sleep(std::time::Duration::from_millis(10)).await;
                continue;
            }
        };
        let services = services.clone();
        glommio::spawn_local(async move {
            let core = services.core.clone();
            if let Some(Err(error)) = core.tasks().unless_stopping(serve(&services, stream)).await {
                tracing::debug!(%error, "kafka connection closed");
            }
        })
        .detach();
    }
}

async fn serve(services: &Services, mut stream: TcpStream) -> std::io::Result<()> {
    let max = services.core.config().max_frame_bytes;
    loop {
        let mut len = [0u8; 4];
        if stream.read_exact(&mut len).await.is_err() {
            return Ok(());
        }
        let len = u32::from_be_bytes(len) as usize;
        if len > max {
            let m = format!("a Kafka frame of {len} bytes exceeds max_frame_bytes {max}");
            return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, m));
        }
        let mut frame = vec![0u8; len];
        stream.read_exact(&mut frame).await?;
        let outcome = dispatch::answer(services, frame.into())
            .await
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, format!("bad Kafka request: {e}")))?;
        let (response, close) = match outcome {
            Outcome::Silent => continue,
            Outcome::Respond(response) => (response, false),
            Outcome::Refuse(response) => (response, true),
        };
        let mut out = (response.len() as u32).to_be_bytes().to_vec();
        out.extend_from_slice(&response);
        stream.write_all(&out).await?;
        if close {
            let m = "an API or version that is not served (answered UNSUPPORTED_VERSION)";
            return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, m));
        }
    }
}
