//! Kafka connections: 4-byte big-endian length frames, served one after
//! another (no pipelining yet). A frame past `max_frame_bytes` or one that
//! does not decode closes that connection only.

use super::dispatch;
use crate::server::core::Core;
use futures_lite::io::{AsyncReadExt, AsyncWriteExt};
use glommio::net::{TcpListener, TcpStream};
use std::rc::Rc;

/// Accepts Kafka connections until the shard stops.
pub async fn accept_loop(core: Rc<Core>, listener: TcpListener) {
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
        let core = core.clone();
        glommio::spawn_local(async move {
            let tasks = core.clone();
            if let Some(Err(error)) = tasks.tasks().unless_stopping(serve(core, stream)).await {
                tracing::debug!(%error, "kafka connection closed");
            }
        })
        .detach();
    }
}

async fn serve(core: Rc<Core>, mut stream: TcpStream) -> std::io::Result<()> {
    let max = core.config().max_frame_bytes;
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
        let response = dispatch::answer(&core, frame.into())
            .await
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, format!("bad Kafka request: {e}")))?;
        let Some(response) = response else { continue };
        let mut out = (response.len() as u32).to_be_bytes().to_vec();
        out.extend_from_slice(&response);
        stream.write_all(&out).await?;
    }
}
