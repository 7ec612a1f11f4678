//! One object of tiered storage: the batches of a sealed segment's tiered
//! queues, as stored (a sealed batch stays sealed: its key id and nonce
//! travel in it, and its tag does not cover the base offset or queue),
//! header CRCs in wire form.
//!
//! The object is made in parts of about `PART_BYTES` (S3's multipart parts
//! are at least 5 MiB but the last), each from the next stretch of the
//! segment: within a part, each queue's batches of that stretch lie
//! together (a `Slice`), so a reader of one queue reads only its own bytes
//! and the builder holds one part at a time. The last part ends with the
//! footer (the `ObjectIndex`: every slice with its queue, offsets, place,
//! CRC32 and newest timestamp; the records' lookup entries sorted by hash; the data keys
//! that sealed batches) and a 16-byte trailer: u64 footer position, u32
//! footer length, u32 magic. Little-endian throughout.

use crate::batch::{self, verify_stored, ATTR_SEALED, HEADER_BYTES};
use crate::error::{Result, StorageError};
use std::collections::{BTreeMap, BTreeSet};

/// Bytes of data after which a part is cut.
pub const PART_BYTES: usize = 8 << 20;
/// Bytes of the trailer at an object's end.
pub const TRAILER_BYTES: usize = 16;
const FOOTER_MAGIC: u64 = 0x3130_4a42_4f51_4d52; // "RMQOBJ01"
const TRAILER_MAGIC: u32 = 0x4a42_4f52; // "ROBJ"
const SLICE_BYTES: usize = 44;
const LOOKUP_BYTES: usize = 20;

/// One queue's batches within one part of an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slice {
    pub queue: u32,
    /// The first offset of its first batch, and the offset past its last.
    pub first: u64,
    pub next: u64,
    /// Where it lies in the object, and its length.
    pub pos: u64,
    pub len: u32,
    /// CRC32 of its bytes.
    pub crc: u32,
    /// The newest record's timestamp in it (ms), for time retention.
    pub newest_ms: i64,
}

/// An object's footer: where each queue's batches are, and what else it holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ObjectIndex {
    /// In object order (a queue's slices in offset order).
    pub slices: Vec<Slice>,
    /// (lookup hash, queue, offset) of the records' keys and message ids, by hash.
    pub lookups: Vec<(u64, u32, u64)>,
    /// The data keys that sealed any of its batches.
    pub key_ids: Vec<u32>,
}

/// Where an object's footer lies, and the CRC it ends with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FooterPlace {
    pub pos: u64,
    pub len: u32,
    pub crc: u32,
}

/// A part of an object, in chunks to send in order: cut without copying
/// the batches again (the S3 thread joins them).
#[derive(Debug, Default)]
pub struct ObjectPart {
    chunks: Vec<Vec<u8>>,
}

impl ObjectPart {
    /// Its length in bytes.
    pub fn len(&self) -> usize {
        self.chunks.iter().map(Vec::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Its bytes, joined.
    pub fn concat(&self) -> Vec<u8> {
        self.chunks.concat()
    }

    /// Its last chunk: in an object's last part, the footer and the trailer.
    pub fn tail(&self) -> &[u8] {
        self.chunks.last().map_or(&[], Vec::as_slice)
    }

    pub fn into_chunks(self) -> Vec<Vec<u8>> {
        self.chunks
    }
}

/// One queue's batches in the part being made, in chunks of about
/// `CHUNK_BYTES` (a growing buffer would copy itself over and over).
struct PartSlice {
    first: u64,
    next: u64,
    newest_ms: i64,
    chunks: Vec<Vec<u8>>,
    len: usize,
}

/// Bytes of one chunk of a queue's batches in a part: under the
/// allocator's mmap threshold (128 KiB), so chunks reuse freed memory
/// instead of faulting in fresh pages on the shard's thread.
const CHUNK_BYTES: usize = 64 << 10;

/// Makes an object from a segment's batches, in log order.
#[derive(Default)]
pub struct ObjectBuilder {
    /// The current part's batches, by queue.
    part: BTreeMap<u32, PartSlice>,
    part_bytes: usize,
    /// Bytes of the parts already cut.
    written: u64,
    index: ObjectIndex,
    key_ids: BTreeSet<u32>,
}

impl ObjectBuilder {
    pub fn new() -> ObjectBuilder {
        ObjectBuilder::default()
    }

    /// Adds a stored batch (wire form, sealed or not), its newest record's
    /// timestamp and its records' lookup entries (hash, offset); the next
    /// part once one is full.
    pub fn push(
        &mut self,
        stored: &[u8],
        newest_ms: i64,
        lookups: impl IntoIterator<Item = (u64, u64)>,
    ) -> Result<Option<ObjectPart>> {
        let header = verify_stored(stored).map_err(|detail| refused(format!("a batch to upload: {detail}")))?;
        let (first, next) = (header.base_offset, header.next_offset());
        let slice = self.part.entry(header.queue).or_insert(PartSlice {
            first,
            next: first,
            newest_ms,
            chunks: Vec::new(),
            len: 0,
        });
        if first < slice.next {
            return Err(refused(format!(
                "queue {}: a batch at {first} after one that ended at {}",
                header.queue, slice.next
            )));
        }
        slice.next = next;
        slice.newest_ms = slice.newest_ms.max(newest_ms);
        match slice.chunks.last_mut() {
            Some(chunk) if chunk.len() + stored.len() <= chunk.capacity() => chunk.extend_from_slice(stored),
            _ => {
                let mut chunk = Vec::with_capacity(CHUNK_BYTES.max(stored.len()));
                chunk.extend_from_slice(stored);
                slice.chunks.push(chunk);
            }
        }
        slice.len += stored.len();
        self.part_bytes += stored.len();
        if header.attributes & ATTR_SEALED != 0 && stored.len() >= HEADER_BYTES + 4 {
            self.key_ids.insert(batch::u32_at(stored, HEADER_BYTES));
        }
        self.index.lookups.extend(lookups.into_iter().map(|(hash, offset)| (hash, header.queue, offset)));
        Ok((self.part_bytes >= PART_BYTES).then(|| self.cut()))
    }

    /// The current part, its slices noted.
    fn cut(&mut self) -> ObjectPart {
        let mut out = ObjectPart::default();
        for (queue, part) in std::mem::take(&mut self.part) {
            let mut crc = crc32fast::Hasher::new();
            for chunk in &part.chunks {
                crc.update(chunk);
            }
            let (first, next, newest_ms, len) = (part.first, part.next, part.newest_ms, part.len as u32);
            self.index.slices.push(Slice {
                queue,
                first,
                next,
                pos: self.written,
                len,
                crc: crc.finalize(),
                newest_ms,
            });
            self.written += u64::from(len);
            out.chunks.extend(part.chunks);
        }
        self.part_bytes = 0;
        out
    }

    /// The last part (the rest of the data, the footer, the trailer) and the index.
    pub fn finish(self) -> (ObjectPart, ObjectIndex) {
        self.close().finish()
    }

    /// The rest of the data as the last part, and the index as it is: its
    /// footer is made by `Closing::finish`, wherever the caller wants the
    /// work done.
    pub fn close(mut self) -> Closing {
        let last = self.cut();
        self.index.key_ids = self.key_ids.into_iter().collect();
        Closing { last, index: self.index, footer_pos: self.written }
    }
}

/// An object whose data is all cut, its footer not made yet: sorting and
/// encoding a segment's lookup entries (two per record, about 32,000 for
/// 16 MiB of 1 KiB records) took 10-17 ms at once, too long for a shard's
/// thread, so the uploader has it done on its S3 thread.
pub struct Closing {
    last: ObjectPart,
    index: ObjectIndex,
    footer_pos: u64,
}

impl Closing {
    /// Whether the object holds no batch (the segment held none wanted).
    pub fn is_empty(&self) -> bool {
        self.index.slices.is_empty()
    }

    /// The last part (the rest of the data, the footer, the trailer) and the index.
    pub fn finish(mut self) -> (ObjectPart, ObjectIndex) {
        self.index.lookups.sort_unstable();
        let mut footer = self.index.encode();
        let footer_len = footer.len() as u32;
        footer.extend_from_slice(&self.footer_pos.to_le_bytes());
        footer.extend_from_slice(&footer_len.to_le_bytes());
        footer.extend_from_slice(&TRAILER_MAGIC.to_le_bytes());
        self.last.chunks.push(footer);
        (self.last, self.index)
    }
}

impl ObjectIndex {
    fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(24 + self.slices.len() * SLICE_BYTES + self.lookups.len() * LOOKUP_BYTES);
        b.extend_from_slice(&FOOTER_MAGIC.to_le_bytes());
        b.extend_from_slice(&(self.slices.len() as u32).to_le_bytes());
        for s in &self.slices {
            b.extend_from_slice(&s.queue.to_le_bytes());
            for v in [s.first, s.next, s.pos] {
                b.extend_from_slice(&v.to_le_bytes());
            }
            b.extend_from_slice(&s.len.to_le_bytes());
            b.extend_from_slice(&s.crc.to_le_bytes());
            b.extend_from_slice(&s.newest_ms.to_le_bytes());
        }
        b.extend_from_slice(&(self.lookups.len() as u32).to_le_bytes());
        for (hash, queue, offset) in &self.lookups {
            b.extend_from_slice(&hash.to_le_bytes());
            b.extend_from_slice(&queue.to_le_bytes());
            b.extend_from_slice(&offset.to_le_bytes());
        }
        b.extend_from_slice(&(self.key_ids.len() as u32).to_le_bytes());
        for id in &self.key_ids {
            b.extend_from_slice(&id.to_le_bytes());
        }
        let crc = crc32fast::hash(&b);
        b.extend_from_slice(&crc.to_le_bytes());
        b
    }

    /// The footer's position and length, from an object's last `TRAILER_BYTES`.
    pub fn trailer(tail: &[u8]) -> Result<(u64, u32)> {
        if tail.len() != TRAILER_BYTES || batch::u32_at(tail, 12) != TRAILER_MAGIC {
            return Err(refused("the object's trailer is not one: the object is damaged or not ringmq's".into()));
        }
        Ok((batch::u64_at(tail, 0), batch::u32_at(tail, 8)))
    }

    /// Where an object's footer lies and its CRC, from the object's last
    /// part (which ends with the whole footer and the trailer).
    pub fn footer_of(last: &[u8]) -> Result<FooterPlace> {
        let short = || refused("the last part is shorter than its footer".into());
        let tail = last.len().checked_sub(TRAILER_BYTES).ok_or_else(short)?;
        let (pos, len) = ObjectIndex::trailer(&last[tail..])?;
        let crc_at = tail.checked_sub(4).filter(|_| len >= 4 && len as usize <= tail).ok_or_else(short)?;
        Ok(FooterPlace { pos, len, crc: batch::u32_at(last, crc_at) })
    }

    /// The footer `bytes` (CRC-checked).
    pub fn decode(bytes: &[u8]) -> Result<ObjectIndex> {
        let damaged = || refused("the object's footer fails its check".into());
        if bytes.len() < 24 || batch::u64_at(bytes, 0) != FOOTER_MAGIC {
            return Err(damaged());
        }
        let (body, crc) = bytes.split_at(bytes.len() - 4);
        if crc32fast::hash(body) != batch::u32_at(crc, 0) {
            return Err(damaged());
        }
        let mut r = FooterReader { b: body, at: 8 };
        let slices = (0..r.u32()?)
            .map(|_| {
                Ok(Slice {
                    queue: r.u32()?,
                    first: r.u64()?,
                    next: r.u64()?,
                    pos: r.u64()?,
                    len: r.u32()?,
                    crc: r.u32()?,
                    newest_ms: r.u64()? as i64,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let lookups = (0..r.u32()?).map(|_| Ok((r.u64()?, r.u32()?, r.u64()?))).collect::<Result<Vec<_>>>()?;
        let key_ids = (0..r.u32()?).map(|_| r.u32()).collect::<Result<Vec<_>>>()?;
        Ok(ObjectIndex { slices, lookups, key_ids })
    }

    /// The slices of `queue` holding offsets at or past `offset`, in order.
    pub fn slices_from(&self, queue: u32, offset: u64) -> impl Iterator<Item = &Slice> {
        self.slices.iter().filter(move |s| s.queue == queue && s.next > offset)
    }

    /// Each queue's offsets in the object: first and next.
    pub fn queues(&self) -> BTreeMap<u32, (u64, u64)> {
        let mut queues = BTreeMap::new();
        for s in &self.slices {
            let range = queues.entry(s.queue).or_insert((s.first, s.next));
            range.1 = range.1.max(s.next);
        }
        queues
    }

    /// Offsets of `queue` whose key or message id has lookup `hash`.
    pub fn lookup(&self, hash: u64, queue: u32) -> Vec<u64> {
        let from = self.lookups.partition_point(|l| l.0 < hash);
        self.lookups[from..].iter().take_while(|l| l.0 == hash).filter(|l| l.1 == queue).map(|l| l.2).collect()
    }
}

/// Checks a slice's bytes as read from the bucket: its CRC, then each
/// batch's own checks, queue and offsets. Damage is reported, never served.
pub fn verify_slice(bytes: &[u8], slice: &Slice) -> Result<()> {
    let damaged = |detail: String| refused(format!("queue {} slice at {}: {detail}", slice.queue, slice.pos));
    if bytes.len() != slice.len as usize || crc32fast::hash(bytes) != slice.crc {
        return Err(damaged(format!("{} bytes fail the slice's CRC (the object is damaged)", bytes.len())));
    }
    let mut next = slice.first;
    for stored in batch::split(bytes) {
        let header = verify_stored(stored).map_err(|detail| damaged(detail.to_string()))?;
        if header.queue != slice.queue || header.base_offset < next {
            return Err(damaged(format!("a batch of queue {} at offset {}", header.queue, header.base_offset)));
        }
        next = header.next_offset();
    }
    if next != slice.next {
        return Err(damaged(format!("its batches end at {next}, the footer says {}", slice.next)));
    }
    Ok(())
}

/// Reads the footer's fields in order, refusing one that runs past its end.
struct FooterReader<'a> {
    b: &'a [u8],
    at: usize,
}

impl FooterReader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8]> {
        let bytes =
            self.b.get(self.at..self.at + n).ok_or_else(|| refused("the object's footer is cut short".into()))?;
        self.at += n;
        Ok(bytes)
    }

    fn u32(&mut self) -> Result<u32> {
        Ok(batch::u32_at(self.take(4)?, 0))
    }

    fn u64(&mut self) -> Result<u64> {
        Ok(batch::u64_at(self.take(8)?, 0))
    }
}

fn refused(detail: String) -> StorageError {
    StorageError::Corruption { what: "tiered object", position: 0, detail }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::BatchBuilder;
    use crate::record::Record;

    /// A stored batch of `records` values of queue `queue` at `base`.
    fn stored(queue: u32, base: u64, records: usize, len: usize) -> Vec<u8> {
        let mut b = BatchBuilder::new(1_700_000_000_000);
        for i in 0..records {
            let value = vec![b'a' + ((base as usize + i) % 26) as u8; len];
            b.push(&Record { key: Some(b"k"), value: Some(&value), ..Record::default() });
        }
        let mut out = b.finish();
        batch::stamp(&mut out, base, queue);
        out
    }

    #[test]
    fn an_object_gives_each_queue_its_batches_back_and_finds_damage() {
        let mut builder = ObjectBuilder::new();
        let mut parts = Vec::new();
        let mut sent: BTreeMap<u32, Vec<u8>> = BTreeMap::new();
        let mut next = [0u64; 3];
        // Three queues interleaved, 4 KiB batches: about three parts.
        for i in 0..6_000u64 {
            let queue = (i % 3) as u32;
            let b = stored(queue, next[queue as usize], 4, 1_000);
            next[queue as usize] += 4;
            sent.entry(queue).or_default().extend_from_slice(&b);
            if let Some(part) = builder.push(&b, 0, [(i, next[queue as usize] - 4)]).unwrap() {
                assert!(part.len() >= PART_BYTES, "a part is cut once full");
                parts.push(part.concat());
            }
        }
        let (last, index) = builder.finish();
        assert_eq!(ObjectIndex::footer_of(last.tail()).unwrap().len as usize, last.tail().len() - TRAILER_BYTES);
        parts.push(last.concat());
        assert!(parts.len() >= 3, "{} parts", parts.len());
        let object = parts.concat();

        let tail = &object[object.len() - TRAILER_BYTES..];
        let (at, len) = ObjectIndex::trailer(tail).unwrap();
        let footer = ObjectIndex::decode(&object[at as usize..at as usize + len as usize]).unwrap();
        assert_eq!(footer, index);
        assert_eq!(footer.queues()[&1], (0, next[1]));
        for (queue, want) in &sent {
            let mut got = Vec::new();
            for s in footer.slices_from(*queue, 0) {
                let bytes = &object[s.pos as usize..s.pos as usize + s.len as usize];
                verify_slice(bytes, s).unwrap();
                got.extend_from_slice(bytes);
            }
            assert_eq!(&got, want, "queue {queue}'s batches, in order, nothing else");
        }
        let late: Vec<_> = footer.slices_from(2, next[2] - 1).collect();
        assert_eq!(late.len(), 1, "only the slice holding the offset and after");
        assert_eq!(footer.lookup(4, 1), vec![4], "record 4 was queue 1's offset 4");

        let s = footer.slices[1];
        let mut bytes = object[s.pos as usize..s.pos as usize + s.len as usize].to_vec();
        bytes[100] ^= 1;
        assert!(verify_slice(&bytes, &s).unwrap_err().to_string().contains("fail the slice's CRC"));
        let mut damaged = object[at as usize..at as usize + len as usize].to_vec();
        damaged[30] ^= 1;
        assert!(ObjectIndex::decode(&damaged).is_err());
        assert!(ObjectIndex::trailer(&[0; TRAILER_BYTES]).is_err());
    }

    #[test]
    fn a_batch_out_of_order_is_refused() {
        let mut builder = ObjectBuilder::new();
        builder.push(&stored(0, 10, 2, 10), 0, []).unwrap();
        let refused = builder.push(&stored(0, 5, 2, 10), 0, []).unwrap_err();
        assert!(refused.to_string().contains("a batch at 5 after one that ended at 12"), "{refused}");
    }
}
