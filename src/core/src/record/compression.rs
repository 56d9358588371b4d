//! The four codecs Kafka allows in a batch's attributes, each in the exact framing
//! Kafka's clients use: gzip streams, xerial-framed snappy, LZ4 frames, zstd frames.

use std::io::{Read, Write};

use crate::error::{CorruptBatch, Error};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Compression {
    #[default]
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

/// snappy-java's stream header: magic, then version and minimum compatible version.
const XERIAL_MAGIC: [u8; 8] = [0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0];
const XERIAL_HEADER_LEN: usize = 16;
const XERIAL_BLOCK: usize = 32 * 1024;

impl Compression {
    /// The codec id stored in attribute bits 0-2.
    pub fn id(self) -> u8 {
        match self {
            Compression::None => 0,
            Compression::Gzip => 1,
            Compression::Snappy => 2,
            Compression::Lz4 => 3,
            Compression::Zstd => 4,
        }
    }

    pub fn from_id(id: u8) -> Result<Self, CorruptBatch> {
        Ok(match id {
            0 => Compression::None,
            1 => Compression::Gzip,
            2 => Compression::Snappy,
            3 => Compression::Lz4,
            4 => Compression::Zstd,
            other => return Err(CorruptBatch::UnknownCodec(other)),
        })
    }

    /// Kafka's `compression.type` names.
    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Gzip => "gzip",
            Compression::Snappy => "snappy",
            Compression::Lz4 => "lz4",
            Compression::Zstd => "zstd",
        }
    }

    /// The codec a `compression.type` / `compression_type` setting names.
    pub fn parse(name: &str) -> crate::error::Result<Self> {
        Self::from_name(name).ok_or_else(|| {
            crate::error::Error::InvalidArgument(format!(
                "compression_type must be one of none, gzip, snappy, lz4, zstd; got {name:?}"
            ))
        })
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "none" | "uncompressed" => Compression::None,
            "gzip" => Compression::Gzip,
            "snappy" => Compression::Snappy,
            "lz4" => Compression::Lz4,
            "zstd" => Compression::Zstd,
            _ => return None,
        })
    }

    /// Compresses a batch's records area. A codec that fails is an error, never
    /// an empty payload under a valid CRC.
    pub fn compress(self, data: &[u8]) -> Result<Vec<u8>, Error> {
        #[cfg(test)]
        if tests::FAIL_COMPRESSION.with(|f| f.get()) {
            return Err(self.compress_error(&"injected failure"));
        }
        let err = |e: &dyn std::fmt::Display| self.compress_error(e);
        Ok(match self {
            Compression::None => data.to_vec(),
            Compression::Gzip => {
                let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
                enc.write_all(data).map_err(|e| err(&e))?;
                enc.finish().map_err(|e| err(&e))?
            }
            Compression::Snappy => xerial_compress(data).map_err(|e| err(&e))?,
            Compression::Lz4 => {
                let mut enc = lz4_flex::frame::FrameEncoder::new(Vec::new());
                enc.write_all(data).map_err(|e| err(&e))?;
                enc.finish().map_err(|e| err(&e))?
            }
            Compression::Zstd => zstd::bulk::compress(data, 3).map_err(|e| err(&e))?,
        })
    }

    fn compress_error(self, e: &dyn std::fmt::Display) -> Error {
        Error::Io(std::io::Error::other(format!("{} compression failed: {e}", self.name())))
    }

    /// The records area decompressed in full, refused once it passes `limit`
    /// bytes (a small batch must not expand without bound).
    pub fn decompress(self, data: &[u8]) -> Result<Vec<u8>, CorruptBatch> {
        self.decompress_limited(data, MAX_UNCOMPRESSED_BATCH_BYTES)
    }

    pub fn decompress_limited(self, data: &[u8], limit: usize) -> Result<Vec<u8>, CorruptBatch> {
        let mut out = Vec::with_capacity(data.len().saturating_mul(4).min(limit));
        let mut r = self.reader(data, limit)?;
        r.read_to_end(&mut out).map_err(|e| self.decode_error(&e))?;
        Ok(out)
    }

    /// A streaming decoder of a batch's records area that fails (with
    /// `ErrorKind::FileTooLarge`) once more than `limit` bytes come out.
    pub fn reader<'a>(
        self,
        data: &'a [u8],
        limit: usize,
    ) -> Result<Limited<Box<dyn Read + 'a>>, CorruptBatch> {
        let inner: Box<dyn Read + 'a> = match self {
            Compression::None => Box::new(data),
            Compression::Gzip => Box::new(flate2::read::MultiGzDecoder::new(data)),
            Compression::Snappy => {
                Box::new(XerialReader::new(data, limit).map_err(|e| self.decode_error(&e))?)
            }
            Compression::Lz4 => Box::new(lz4_flex::frame::FrameDecoder::new(data)),
            Compression::Zstd => {
                Box::new(zstd::stream::read::Decoder::with_buffer(data).map_err(|e| self.decode_error(&e))?)
            }
        };
        Ok(Limited { inner, left: limit, limit })
    }

    fn decode_error(self, e: &std::io::Error) -> CorruptBatch {
        CorruptBatch::Decompress(format!("{}: {e}", self.name()))
    }
}

/// The most a batch's records may take once decompressed: what any reader must
/// be ready to hold in memory for one batch.
pub const MAX_UNCOMPRESSED_BATCH_BYTES: usize = 256 << 20;

/// A reader that fails once more than its limit came out of it.
pub struct Limited<R> {
    inner: R,
    left: usize,
    limit: usize,
}

impl<R> Limited<R> {
    /// Bytes read so far.
    pub fn consumed(&self) -> usize {
        self.limit - self.left
    }
}

impl<R: Read> Read for Limited<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.left == 0 {
            // Only an error if there is more to come.
            let mut probe = [0u8; 1];
            return match self.inner.read(&mut probe)? {
                0 => Ok(0),
                _ => Err(too_large(self.limit)),
            };
        }
        let want = buf.len().min(self.left);
        let n = self.inner.read(&mut buf[..want])?;
        self.left -= n;
        Ok(n)
    }
}

fn too_large(limit: usize) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::FileTooLarge,
        format!("the records expand past {limit} bytes when decompressed"),
    )
}

/// Streams xerial-framed snappy one block at a time (or a bare snappy block,
/// which some clients write), checking each block's size before allocating it.
struct XerialReader<'a> {
    data: &'a [u8],
    pos: usize,
    block: Vec<u8>,
    block_pos: usize,
    limit: usize,
    dec: snap::raw::Decoder,
}

impl<'a> XerialReader<'a> {
    fn new(data: &'a [u8], limit: usize) -> std::io::Result<Self> {
        let mut r = XerialReader {
            data,
            pos: 0,
            block: Vec::new(),
            block_pos: 0,
            limit,
            dec: snap::raw::Decoder::new(),
        };
        if data.len() < XERIAL_HEADER_LEN || data[..8] != XERIAL_MAGIC {
            r.fill(data)?;
            r.pos = data.len();
        } else {
            r.pos = XERIAL_HEADER_LEN;
        }
        Ok(r)
    }

    fn fill(&mut self, block: &[u8]) -> std::io::Result<()> {
        let invalid =
            |e: &dyn std::fmt::Display| std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string());
        let n = snap::raw::decompress_len(block).map_err(|e| invalid(&e))?;
        if n > self.limit {
            return Err(too_large(self.limit));
        }
        self.block.clear();
        self.block.resize(n, 0);
        self.dec.decompress(block, &mut self.block).map_err(|e| invalid(&e))?;
        self.block_pos = 0;
        Ok(())
    }
}

impl Read for XerialReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.block_pos == self.block.len() {
            if self.pos >= self.data.len() {
                return Ok(0);
            }
            let invalid = |m: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, m.to_string());
            let len_bytes: [u8; 4] = self
                .data
                .get(self.pos..self.pos + 4)
                .and_then(|s| s.try_into().ok())
                .ok_or_else(|| invalid("truncated xerial block length"))?;
            let start = self.pos + 4;
            let block = usize::try_from(i32::from_be_bytes(len_bytes))
                .ok()
                .and_then(|n| self.data.get(start..start.checked_add(n)?))
                .ok_or_else(|| invalid("xerial block runs past the end"))?;
            self.pos = start + block.len();
            self.fill(block)?;
        }
        let n = buf.len().min(self.block.len() - self.block_pos);
        buf[..n].copy_from_slice(&self.block[self.block_pos..self.block_pos + n]);
        self.block_pos += n;
        Ok(n)
    }
}

/// Snappy as Kafka's Java client writes it (snappy-java's block stream).
fn xerial_compress(data: &[u8]) -> Result<Vec<u8>, snap::Error> {
    let mut out = Vec::with_capacity(XERIAL_HEADER_LEN + data.len() / 2 + 64);
    out.extend_from_slice(&XERIAL_MAGIC);
    out.extend_from_slice(&1i32.to_be_bytes());
    out.extend_from_slice(&1i32.to_be_bytes());
    let mut enc = snap::raw::Encoder::new();
    for chunk in data.chunks(XERIAL_BLOCK) {
        let block = enc.compress_vec(chunk)?;
        out.extend_from_slice(&(block.len() as i32).to_be_bytes());
        out.extend_from_slice(&block);
    }
    Ok(out)
}

#[cfg(test)]
#[path = "compression_test.rs"]
mod tests;
