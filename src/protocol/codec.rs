//! Little-endian field readers and writers for frame bodies. Every read is
//! bounds-checked: a short or lying body is a `DecodeError`, never a panic.

/// A body that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed body: {0}")]
pub struct DecodeError(pub &'static str);

/// Reads fields from a body.
pub struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    /// Reads from `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf }
    }

    fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], DecodeError> {
        if self.buf.len() < n {
            return Err(DecodeError(what));
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(head)
    }

    /// Reads a u8.
    pub fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1, "truncated u8")?[0])
    }

    /// Reads a u16.
    pub fn u16(&mut self) -> Result<u16, DecodeError> {
        Ok(u16::from_le_bytes(self.take(2, "truncated u16")?.try_into().expect("2 bytes")))
    }

    /// Reads a u32.
    pub fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_le_bytes(self.take(4, "truncated u32")?.try_into().expect("4 bytes")))
    }

    /// Reads a u64.
    pub fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_le_bytes(self.take(8, "truncated u64")?.try_into().expect("8 bytes")))
    }

    /// Reads u32-length-prefixed bytes.
    pub fn bytes(&mut self) -> Result<&'a [u8], DecodeError> {
        let n = self.u32()? as usize;
        self.take(n, "bytes longer than the body")
    }

    /// Reads a u16-length-prefixed UTF-8 string.
    pub fn string(&mut self) -> Result<String, DecodeError> {
        let n = usize::from(self.u16()?);
        let raw = self.take(n, "string longer than the body")?;
        String::from_utf8(raw.to_vec()).map_err(|_| DecodeError("string is not UTF-8"))
    }

    /// Reads a u32 count that must fit in what is left (each item at least `min_item` bytes).
    pub fn count(&mut self, min_item: usize) -> Result<usize, DecodeError> {
        let n = self.u32()? as usize;
        if n.saturating_mul(min_item.max(1)) > self.buf.len() {
            return Err(DecodeError("count larger than the body can hold"));
        }
        Ok(n)
    }

    /// Fails unless the whole body was read.
    pub fn finish(self) -> Result<(), DecodeError> {
        if self.buf.is_empty() {
            Ok(())
        } else {
            Err(DecodeError("trailing bytes after the body"))
        }
    }
}

/// Writes fields of a body.
#[derive(Default)]
pub struct Writer {
    pub buf: Vec<u8>,
}

impl Writer {
    /// Appends to `buf`.
    pub fn new(buf: Vec<u8>) -> Self {
        Writer { buf }
    }

    /// Writes a u8.
    pub fn u8(&mut self, v: u8) -> &mut Self {
        self.buf.push(v);
        self
    }

    /// Writes a u16.
    pub fn u16(&mut self, v: u16) -> &mut Self {
        self.buf.extend_from_slice(&v.to_le_bytes());
        self
    }

    /// Writes a u32.
    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.buf.extend_from_slice(&v.to_le_bytes());
        self
    }

    /// Writes a u64.
    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.buf.extend_from_slice(&v.to_le_bytes());
        self
    }

    /// Writes u32-length-prefixed bytes.
    pub fn bytes(&mut self, v: &[u8]) -> &mut Self {
        self.u32(v.len() as u32);
        self.buf.extend_from_slice(v);
        self
    }

    /// Writes a u16-length-prefixed string (truncated to 65,535 bytes).
    pub fn string(&mut self, v: &str) -> &mut Self {
        let v = &v.as_bytes()[..v.len().min(u16::MAX as usize)];
        self.u16(v.len() as u16);
        self.buf.extend_from_slice(v);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_round_trip_and_short_bodies_fail() {
        let mut w = Writer::default();
        w.u8(1).u16(2).u32(3).u64(4).bytes(b"xy").string("topic");
        let mut r = Reader::new(&w.buf);
        assert_eq!((r.u8(), r.u16(), r.u32(), r.u64()), (Ok(1), Ok(2), Ok(3), Ok(4)));
        assert_eq!(r.bytes(), Ok(&b"xy"[..]));
        assert_eq!(r.string(), Ok("topic".to_string()));
        r.finish().unwrap();
        let mut short = Reader::new(&w.buf[..20]);
        short.u8().unwrap();
        short.u16().unwrap();
        short.u32().unwrap();
        short.u64().unwrap();
        assert!(short.bytes().is_err());
        assert!(Reader::new(&[255, 255, 255, 255]).count(1).is_err());
    }
}
