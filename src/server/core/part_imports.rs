//! Compacted parts of queues moving here from another broker group. Below
//! the end of its compacted part a queue's offsets have gaps, which the
//! log's dense index cannot hold; so the copy keeps them as a compacted
//! part of this shard, and the log holds the queue from the part's end.
//!
//! A part is kept by its group's followers too, or a fail-over would lose
//! it: the leader's copy appends the part's batches to the shard's log as
//! records of the internal queue `PART_IMPORTS` (a begin record, chunks of
//! the batches as read, an end record with the part's start and end), and
//! every member builds the part from its own log (`build`): the leader
//! once its group committed them (its reads see no further), before it
//! copies on; a follower after mirroring them and before its next fetch;
//! a leader or single node as it opens. So a follower whose durable end is
//! past an end record holds its part, and once the group committed the
//! records (`trim_done`, after a move) they are trimmed, for retention.
//! A begin record starts a queue's import again (a new leader's copy).

use super::Core;
use super::Failure;
use crate::server::internal::queues::{self, PART_IMPORTS};
use ringmq_shards::batch;
use ringmq_shards::{FlushPolicy, QueueId, ReadWait, Shard, StorageError};
use std::collections::HashMap;

/// Bytes of a part's batches per chunk record: well within a batch, whatever
/// the batch sizes (a chunk holds any piece of the batches' bytes).
const CHUNK_BYTES: usize = 256 << 10;
/// Bytes read from the log per step of a build.
const READ_BYTES: usize = 1 << 20;

/// What a record of `PART_IMPORTS` says (its key: the kind and the queue).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Begin = 0,
    Chunk = 1,
    End = 2,
}

/// Creates the shard's `PART_IMPORTS` queue if it lacks one.
pub async fn open(storage: &Shard) -> Result<(), StorageError> {
    queues::ensure(storage, &[(PART_IMPORTS, FlushPolicy::Sync)]).await
}

/// The record retention must keep (every one from the queue's start: what
/// is done is trimmed).
pub fn needed(storage: &Shard) -> Result<(QueueId, u64), StorageError> {
    Ok((PART_IMPORTS, storage.offsets(PART_IMPORTS)?.0))
}

/// The end offset of `PART_IMPORTS` (0 while there is none).
pub fn end(storage: &Shard) -> u64 {
    storage.offsets(PART_IMPORTS).map_or(0, |(_, end)| end)
}

fn key(kind: Kind, queue: QueueId) -> [u8; 5] {
    let mut k = [kind as u8, 0, 0, 0, 0];
    k[1..].copy_from_slice(&queue.0.to_le_bytes());
    k
}

fn decode_key(key: &[u8]) -> Option<(Kind, QueueId)> {
    let kind = match key.first()? {
        0 => Kind::Begin,
        1 => Kind::Chunk,
        2 => Kind::End,
        _ => return None,
    };
    Some((kind, QueueId(u32::from_le_bytes(key.get(1..5)?.try_into().ok()?))))
}

/// One queue's import, as the leader's copy writes it.
pub struct PartImportLog<'a> {
    core: &'a Core,
    queue: QueueId,
}

impl<'a> PartImportLog<'a> {
    /// Begins (again) the import of `queue`'s part: chunks before this are void.
    pub async fn begin(core: &'a Core, queue: QueueId) -> Result<PartImportLog<'a>, StorageError> {
        let log = PartImportLog { core, queue };
        log.append(Kind::Begin, &[]).await?;
        Ok(log)
    }

    /// Adds the part's batches `bytes` (in clear, following those added before).
    pub async fn chunk(&self, bytes: &[u8]) -> Result<(), StorageError> {
        for piece in bytes.chunks(CHUNK_BYTES) {
            self.append(Kind::Chunk, piece).await?;
        }
        Ok(())
    }

    /// Ends the import: readers see offsets from `start`, the part ends at
    /// `end`. Then builds the part here (see `build`) once the group
    /// committed the records: reads see no further (and then the group's
    /// followers built it already).
    pub async fn end(self, start: u64, end: u64) -> Result<(), Failure> {
        let mut value = start.to_le_bytes().to_vec();
        value.extend_from_slice(&end.to_le_bytes());
        self.append(Kind::End, &value).await?;
        self.core.replicated_all().await?;
        build(self.core).await
    }

    async fn append(&self, kind: Kind, value: &[u8]) -> Result<(), StorageError> {
        let now_ms = self.core.clock().now_ms() as i64;
        queues::append_one(self.core.storage(), PART_IMPORTS, &key(kind, self.queue), value, now_ms).await
    }
}

/// Where a queue's import stands in `PART_IMPORTS`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Import {
    /// The offset of its latest begin record.
    begin: u64,
    /// Its end record after that begin: (offset, part start, part end).
    end: Option<(u64, u64, u64)>,
}

/// The imports `PART_IMPORTS` holds below `until`, by queue.
async fn imports(storage: &Shard, until: u64) -> Result<HashMap<QueueId, Import>, StorageError> {
    let mut found: HashMap<QueueId, Import> = HashMap::new();
    queues::scan(storage, PART_IMPORTS, 0, |offset, r| {
        let Some((kind, queue)) = r.key.and_then(decode_key).filter(|_| offset < until) else { return };
        match kind {
            Kind::Begin => {
                found.insert(queue, Import { begin: offset, end: None });
            }
            Kind::End => {
                let value = r.value.unwrap_or_default();
                let (start, end) = (batch::u64_at(value, 0), batch::u64_at(value, 8));
                if let Some(import) = found.get_mut(&queue) {
                    import.end = Some((offset, start, end));
                }
            }
            Kind::Chunk => {}
        }
    })
    .await?;
    Ok(found)
}

/// Calls `each(offset, kind, queue, value)` for the records of
/// `PART_IMPORTS` in [next, until) that one read from `next` returns; the
/// offset to read next.
async fn read_once(
    storage: &Shard,
    next: u64,
    until: u64,
    each: &mut impl FnMut(u64, Kind, QueueId, &[u8]),
) -> Result<u64, StorageError> {
    let read = storage.read(PART_IMPORTS, next, READ_BYTES, ReadWait::No).await?;
    queues::for_each_record(&read.bytes, |offset, r| {
        let decoded = r.key.and_then(decode_key);
        if let Some((kind, queue)) = decoded.filter(|_| offset >= next && offset < until) {
            each(offset, kind, queue, r.value.unwrap_or_default());
        }
    });
    Ok(read.next_offset)
}

/// Builds the part of every ended import this shard lacks (a part ending
/// where the import's does, or later once compacted here). A follower
/// creates the queue if it has none yet, as mirroring does; a leader or a
/// single node skips a queue it no longer has (its topic was deleted).
pub async fn build(core: &Core) -> Result<(), Failure> {
    let storage = core.storage();
    for (queue, import) in imports(storage, end(storage)).await? {
        let Some((end_at, start, end)) = import.end else { continue };
        let known = storage.queues().contains(&queue);
        let built = known && storage.compacted(queue).is_some_and(|part| part.end >= end);
        if built || (!known && !storage.is_mirror()) {
            continue;
        }
        build_one(storage, queue, import.begin, end_at, start, end).await?;
        tracing::info!(
            shard = core.id(),
            queue = queue.0,
            start,
            end,
            "built the compacted part of a queue moving here"
        );
    }
    Ok(())
}

/// Builds `queue`'s part from the chunks between its begin record at
/// `begin` and its end record at `end_at`.
async fn build_one(
    storage: &Shard,
    queue: QueueId,
    begin: u64,
    end_at: u64,
    start: u64,
    end: u64,
) -> Result<(), Failure> {
    let mut part = storage.import_part(queue).await?;
    // The chunks' bytes not yet pushed: a chunk may end inside a batch.
    let mut pending = Vec::new();
    let mut next = begin;
    while next < end_at {
        let mut add = |_, kind, of, value: &[u8]| {
            if kind == Kind::Chunk && of == queue {
                pending.extend_from_slice(value);
            }
        };
        let read = read_once(storage, next, end_at, &mut add).await?;
        let whole = whole_batches(&pending);
        if let Err(error) = part.push(&pending[..whole]).await {
            part.abandon().await;
            return Err(error.into());
        }
        pending.drain(..whole);
        if read <= next {
            break;
        }
        next = read;
    }
    if !pending.is_empty() {
        part.abandon().await;
        let m = format!("queue {queue}: the copied part's last {} bytes are not a whole batch", pending.len());
        return Err(Failure::from(StorageError::Corruption {
            what: "imported compacted part",
            position: 0,
            detail: m,
        }));
    }
    Ok(part.finish(start, end).await?)
}

/// The length of the whole batches at the front of `bytes`.
fn whole_batches(bytes: &[u8]) -> usize {
    let mut at = 0;
    while at + batch::HEADER_BYTES <= bytes.len() {
        let length = batch::u32_at(bytes, at) as usize;
        if length < batch::HEADER_BYTES || at + length > bytes.len() {
            break;
        }
        at += length;
    }
    at
}

/// After a move here ended: once the group committed `PART_IMPORTS` (every
/// member in sync built its parts), trims it to its end if no import below
/// it is still going.
pub async fn trim_done(core: &Core) -> Result<(), Failure> {
    let storage = core.storage();
    let until = end(storage);
    if storage.offsets(PART_IMPORTS)?.0 >= until {
        return Ok(());
    }
    core.replicated_all().await?;
    let going = imports(storage, until).await?.values().any(|import| import.end.is_none());
    if !going {
        storage.trim(PART_IMPORTS, until)?;
        core.record_queue_starts().await?;
    }
    Ok(())
}
