//! Zig-zag variable-length integers as Kafka's records use them
//! (protobuf's encoding: 7 bits per byte, low groups first).

use crate::error::CorruptBatch;

#[inline]
pub fn zigzag64(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

#[inline]
pub fn unzigzag64(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// Bytes that `put_varlong(v)` writes.
#[inline]
pub fn size_of_varlong(v: i64) -> usize {
    let mut u = zigzag64(v);
    let mut n = 1;
    while u >= 0x80 {
        u >>= 7;
        n += 1;
    }
    n
}

#[inline]
pub fn put_varlong(out: &mut Vec<u8>, v: i64) {
    let mut u = zigzag64(v);
    while u >= 0x80 {
        out.push((u as u8) | 0x80);
        u >>= 7;
    }
    out.push(u as u8);
}

/// A cursor over a byte slice that reads Kafka's record fields, refusing
/// truncated or overlong input with a `CorruptBatch` rather than panicking.
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    pub fn position(&self) -> usize {
        self.pos
    }

    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    #[inline]
    pub fn varlong(&mut self) -> Result<i64, CorruptBatch> {
        // Most fields of a record are one- or two-byte varints (a record's
        // length of 64 bytes or more, a timestamp delta of a few ms).
        match self.buf.get(self.pos..self.pos + 2) {
            Some(&[b0, _]) if b0 & 0x80 == 0 => {
                self.pos += 1;
                Ok(unzigzag64(u64::from(b0)))
            }
            Some(&[b0, b1]) if b1 & 0x80 == 0 => {
                self.pos += 2;
                Ok(unzigzag64(u64::from(b0 & 0x7f) | (u64::from(b1) << 7)))
            }
            _ => self.varlong_slow(),
        }
    }

    #[cold]
    fn varlong_slow(&mut self) -> Result<i64, CorruptBatch> {
        let mut result: u64 = 0;
        for i in 0..10 {
            let Some(&b) = self.buf.get(self.pos) else {
                return Err(CorruptBatch::BadRecord("varint runs past the end".into()));
            };
            self.pos += 1;
            result |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(unzigzag64(result));
            }
        }
        Err(CorruptBatch::BadRecord("varint longer than 10 bytes".into()))
    }

    #[inline]
    pub fn varint(&mut self) -> Result<i32, CorruptBatch> {
        let v = self.varlong()?;
        i32::try_from(v).map_err(|_| CorruptBatch::BadRecord(format!("varint {v} overflows int32")))
    }

    #[inline]
    pub fn i8(&mut self) -> Result<i8, CorruptBatch> {
        Ok(self.bytes(1)?[0] as i8)
    }

    #[inline]
    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8], CorruptBatch> {
        if n > self.remaining() {
            return Err(CorruptBatch::BadRecord(format!(
                "field of {n} bytes runs past the end ({} left)",
                self.remaining()
            )));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    /// A varint length followed by that many bytes; -1 means null.
    #[inline]
    pub fn nullable_bytes(&mut self) -> Result<Option<&'a [u8]>, CorruptBatch> {
        match self.varint()? {
            -1 => Ok(None),
            n if n < 0 => Err(CorruptBatch::BadRecord(format!("negative length {n}"))),
            n => self.bytes(n as usize).map(Some),
        }
    }
}

#[cfg(test)]
#[path = "varint_test.rs"]
mod tests;
