//! The primitives of Kafka's wire format for the ZooKeeper-mode APIs the
//! protocol crate lacks (it follows Kafka 4, which removed them): unsigned
//! varints, compact strings and arrays, and tagged fields, none of which
//! these APIs define.

use bytes::{Buf, BufMut, Bytes, BytesMut};

pub fn need(b: &Bytes, n: usize) -> Result<(), String> {
    if b.remaining() < n {
        return Err(format!("{n} more bytes expected, {} left", b.remaining()));
    }
    Ok(())
}

pub fn put_varint(buf: &mut BytesMut, mut v: u32) {
    while v >= 0x80 {
        buf.put_u8((v as u8) | 0x80);
        v >>= 7;
    }
    buf.put_u8(v as u8);
}

pub fn get_varint(b: &mut Bytes) -> Result<u32, String> {
    let mut v: u32 = 0;
    for shift in (0..35).step_by(7) {
        need(b, 1)?;
        let byte = b.get_u8();
        v |= u32::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(v);
        }
    }
    Err("a varint longer than 5 bytes".into())
}

/// Skips a flexible version's tagged fields (none are known here).
pub fn skip_tags(b: &mut Bytes) -> Result<(), String> {
    for _ in 0..get_varint(b)? {
        get_varint(b)?;
        let size = get_varint(b)? as usize;
        need(b, size)?;
        b.advance(size);
    }
    Ok(())
}

pub fn get_i32(b: &mut Bytes) -> Result<i32, String> {
    need(b, 4)?;
    Ok(b.get_i32())
}

pub fn get_i64(b: &mut Bytes) -> Result<i64, String> {
    need(b, 8)?;
    Ok(b.get_i64())
}

/// A compact array's or string's length (the varint is length + 1; 0 is null,
/// taken as empty). Each element takes at least `min_size` bytes, so a count
/// beyond what is left is refused before anything is allocated.
pub fn get_compact_len(b: &mut Bytes, min_size: usize) -> Result<usize, String> {
    let n = (get_varint(b)? as usize).saturating_sub(1);
    need(b, n.saturating_mul(min_size))?;
    Ok(n)
}

pub fn get_compact_string(b: &mut Bytes) -> Result<String, String> {
    let len = get_compact_len(b, 1)?;
    String::from_utf8(b.split_to(len).to_vec()).map_err(|e| format!("a string that is not UTF-8: {e}"))
}

pub fn put_compact_string(buf: &mut BytesMut, s: &str) {
    put_varint(buf, s.len() as u32 + 1);
    buf.put_slice(s.as_bytes());
}
