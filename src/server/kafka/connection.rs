//! Kafka connections: 4-byte big-endian length frames, read through a
//! buffer and decoded whole as they arrive; each request is served in its
//! own task (pipelining, at most `max_inflight_per_connection` per
//! connection) and the responses are written in the order the requests
//! came, as Kafka's clients require. A frame past `max_frame_bytes`, or one
//! that does not decode, stops the reading: the requests before it are
//! answered, then the connection closes (that connection only).

use super::dispatch::{self, Decoded, Outcome};
use super::Services;
use crate::server::core::stream::Stream;
use futures_lite::io::{AsyncReadExt, AsyncWriteExt, BufReader, WriteHalf};
use glommio::channels::local_channel;
use glommio::net::{TcpListener, TcpStream};
use glommio::Task;
use std::rc::Rc;

/// Read buffer per connection: bigger requests bypass it.
const READ_BUFFER_BYTES: usize = 64 << 10;

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
            core.tasks().unless_stopping(serve(services, stream)).await;
        })
        .detach();
    }
}

/// A request being served: its task's outcome, in request order.
type Pending = Task<anyhow::Result<Outcome>>;

async fn serve(s: Rc<Services>, tcp: TcpStream) {
    let config = s.core.config();
    let stream = match Stream::accept(tcp, config.tls.as_ref(), config.tls_handshake_timeout).await {
        Ok(stream) => stream,
        Err(error) => {
            tracing::info!(shard = s.core.id(), %error, "a Kafka connection failed its TLS handshake");
            return;
        }
    };
    let (reader, writer) = futures_lite::io::split(stream);
    let mut reader = BufReader::with_capacity(READ_BUFFER_BYTES, reader);
    let (pending, answers) = local_channel::new_bounded(s.core.config().max_inflight_per_connection.max(1));
    let writing = glommio::spawn_local(write_in_order(answers, writer));
    loop {
        match read_request(&s, &mut reader).await {
            Ok((task, last)) => {
                if pending.send(task).await.is_err() || last {
                    break;
                }
            }
            Err(error) => {
                tracing::debug!(shard = s.core.id(), %error, "kafka connection closed");
                break;
            }
        }
    }
    drop(pending);
    writing.await;
}

/// Reads and decodes the next request and starts serving it, and whether it
/// is the last (an API or version not served, answered and then closed); an
/// error at the end of the stream or for a frame that does not decode.
async fn read_request(
    s: &Rc<Services>,
    reader: &mut BufReader<futures_lite::io::ReadHalf<Stream>>,
) -> anyhow::Result<(Pending, bool)> {
    let mut len = [0u8; 4];
    reader.read_exact(&mut len).await?;
    let len = u32::from_be_bytes(len) as usize;
    let max = s.core.config().max_frame_bytes;
    if len > max {
        anyhow::bail!("a Kafka frame of {len} bytes exceeds max_frame_bytes {max}");
    }
    // Checked against the limit above, so the allocation is bounded.
    let mut frame = vec![0u8; len];
    reader.read_exact(&mut frame).await?;
    match dispatch::decode(frame.into()).map_err(|e| anyhow::anyhow!("bad Kafka request: {e}"))? {
        Decoded::Unsupported { correlation } => {
            Ok((glommio::spawn_local(async move { Ok(dispatch::refuse(correlation)) }), true))
        }
        Decoded::Served { correlation, version, client_id, request } => {
            let s = s.clone();
            let task = async move { dispatch::answer(&s, correlation, version, client_id, request).await };
            Ok((glommio::spawn_local(task), false))
        }
    }
}

/// Writes each request's response as its turn comes; stops at a write
/// failure, a response that would not encode, or a refusal.
async fn write_in_order(answers: local_channel::LocalReceiver<Pending>, mut writer: WriteHalf<Stream>) {
    while let Some(task) = answers.recv().await {
        let (response, close) = match task.await {
            Ok(Outcome::Silent) => continue,
            Ok(Outcome::Respond(response)) => (response, false),
            Ok(Outcome::Refuse(response)) => (response, true),
            Err(error) => {
                tracing::error!(%error, "a Kafka response did not encode");
                break;
            }
        };
        // Flushed: a TLS session may hold the last record until then.
        if writer.write_all(&response).await.is_err() || writer.flush().await.is_err() || close {
            break;
        }
    }
    let _ = writer.close().await;
}
