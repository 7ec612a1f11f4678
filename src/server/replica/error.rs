//! Why a follower's fetch from its leader, or a moving queue's copy from
//! its source, stopped (logged; either connects again after a pause).

use crate::protocol::{DecodeError, ErrorCode};
use crate::server::core::Failure;
use ringmq_shards::StorageError;
use std::net::SocketAddr;

/// A failed replication fetch or queue copy.
#[derive(Debug, thiserror::Error)]
pub enum ReplicaError {
    #[error("connecting to {addr}: {why}")]
    Connect { addr: SocketAddr, why: String },
    #[error("over the link to the other node: {0}")]
    Io(glommio::GlommioError<()>),
    #[error("a response does not parse: {0}")]
    Response(DecodeError),
    #[error("the answer is for request {got}, not {asked}")]
    Correlation { got: u32, asked: u32 },
    #[error("the leader refused: {0:?}: {1}")]
    Refused(ErrorCode, String),
    #[error("a ReplicaFetch answer does not decode: {0}")]
    Answer(DecodeError),
    #[error("asked from {asked}, the leader answered from {from}")]
    Position { asked: u64, from: u64 },
    #[error("mirroring: {0}")]
    Mirror(StorageError),
    #[error("storing the replicated topic metadata: {0}")]
    Metadata(Failure),
    #[error("building the compacted part of a queue moving here: {0}")]
    PartImport(Failure),
}
