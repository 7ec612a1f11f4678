//! The compressions of Kafka record batches, undone with a bound: a batch
//! is inflated only as far as `max_bytes`, so a small compressed batch cannot
//! make the broker (or a client) allocate without limit.

use std::io::Read;

/// A Kafka batch's compression (attributes bits 0-2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

impl Compression {
    /// The compression of Kafka attributes, None for an unknown codec.
    pub fn of_attributes(attributes: i16) -> Option<Compression> {
        Some(match attributes & 7 {
            0 => Compression::None,
            1 => Compression::Gzip,
            2 => Compression::Snappy,
            3 => Compression::Lz4,
            4 => Compression::Zstd,
            _ => return None,
        })
    }
}

/// Why compressed records could not be inflated.
#[derive(Debug, thiserror::Error)]
pub enum InflateError {
    #[error("they inflate past the limit of {0} bytes")]
    TooLarge(usize),
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("zstd: {0}")]
    Zstd(#[from] ruzstd::decoding::errors::FrameDecoderError),
    #[error("snappy: {0}")]
    Snappy(#[from] snap::Error),
    #[error("snappy: {0}")]
    SnappyFraming(&'static str),
}

/// Inflates `compressed` into `out` (cleared first), at most `max_bytes` of it.
pub fn inflate(
    compressed: &[u8],
    compression: Compression,
    max_bytes: usize,
    out: &mut Vec<u8>,
) -> Result<(), InflateError> {
    let limit = max_bytes as u64 + 1;
    out.clear();
    match compression {
        Compression::None => out.extend_from_slice(compressed),
        Compression::Gzip => {
            flate2::read::MultiGzDecoder::new(compressed).take(limit).read_to_end(out)?;
        }
        Compression::Snappy => snappy(compressed, max_bytes, out)?,
        Compression::Lz4 => {
            lz4_flex::frame::FrameDecoder::new(compressed).take(limit).read_to_end(out)?;
        }
        Compression::Zstd => {
            let decoder = ruzstd::decoding::StreamingDecoder::new(compressed)?;
            decoder.take(limit).read_to_end(out)?;
        }
    }
    if out.len() > max_bytes {
        return Err(InflateError::TooLarge(max_bytes));
    }
    Ok(())
}

/// Kafka's snappy: xerial's framing (an 8-byte magic, a version pair, then
/// length-prefixed raw snappy blocks) as the Java client writes it, or one
/// raw block as librdkafka may.
fn snappy(input: &[u8], max_bytes: usize, out: &mut Vec<u8>) -> Result<(), InflateError> {
    const XERIAL: &[u8] = b"\x82SNAPPY\0";
    let raw = |block: &[u8], out: &mut Vec<u8>| -> Result<(), InflateError> {
        let len = snap::raw::decompress_len(block)?;
        if out.len() + len > max_bytes {
            return Err(InflateError::TooLarge(max_bytes));
        }
        out.extend_from_slice(&snap::raw::Decoder::new().decompress_vec(block)?);
        Ok(())
    };
    if !input.starts_with(XERIAL) {
        return raw(input, out);
    }
    let bad = InflateError::SnappyFraming;
    let mut rest = input.get(16..).ok_or(bad("a xerial header is 16 bytes"))?;
    while !rest.is_empty() {
        let (len, tail) = rest.split_at_checked(4).ok_or(bad("a block length is cut"))?;
        let len = u32::from_be_bytes(len.try_into().expect("4 bytes")) as usize;
        let (block, tail) = tail.split_at_checked(len).ok_or(bad("a block is cut"))?;
        raw(block, out)?;
        rest = tail;
    }
    Ok(())
}
