//! The four codecs Kafka allows in a batch's attributes, each in the exact framing
//! Kafka's clients use: gzip streams, xerial-framed snappy, LZ4 frames, zstd frames.

use std::io::{Read, Write};

use crate::error::CorruptBatch;

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

    pub fn compress(self, data: &[u8]) -> Vec<u8> {
        match self {
            Compression::None => data.to_vec(),
            Compression::Gzip => {
                let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
                // Writing into a Vec cannot fail.
                let _ = enc.write_all(data);
                enc.finish().unwrap_or_default()
            }
            Compression::Snappy => xerial_compress(data),
            Compression::Lz4 => {
                let mut enc = lz4_flex::frame::FrameEncoder::new(Vec::new());
                let _ = enc.write_all(data);
                enc.finish().unwrap_or_default()
            }
            Compression::Zstd => zstd::bulk::compress(data, 3).unwrap_or_default(),
        }
    }

    pub fn decompress(self, data: &[u8]) -> Result<Vec<u8>, CorruptBatch> {
        let err = |e: &dyn std::fmt::Display| CorruptBatch::Decompress(format!("{}: {e}", self.name()));
        let mut out = Vec::with_capacity(data.len() * 4);
        match self {
            Compression::None => out.extend_from_slice(data),
            Compression::Gzip => {
                flate2::read::MultiGzDecoder::new(data).read_to_end(&mut out).map_err(|e| err(&e))?;
            }
            Compression::Snappy => return xerial_decompress(data).map_err(|e| err(&e)),
            Compression::Lz4 => {
                lz4_flex::frame::FrameDecoder::new(data).read_to_end(&mut out).map_err(|e| err(&e))?;
            }
            Compression::Zstd => {
                zstd::stream::read::Decoder::new(data)
                    .and_then(|mut d| d.read_to_end(&mut out))
                    .map_err(|e| err(&e))?;
            }
        }
        Ok(out)
    }
}

/// Snappy as Kafka's Java client writes it (snappy-java's block stream).
fn xerial_compress(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(XERIAL_HEADER_LEN + data.len() / 2 + 64);
    out.extend_from_slice(&XERIAL_MAGIC);
    out.extend_from_slice(&1i32.to_be_bytes());
    out.extend_from_slice(&1i32.to_be_bytes());
    let mut enc = snap::raw::Encoder::new();
    for chunk in data.chunks(XERIAL_BLOCK) {
        let block = enc.compress_vec(chunk).unwrap_or_default();
        out.extend_from_slice(&(block.len() as i32).to_be_bytes());
        out.extend_from_slice(&block);
    }
    out
}

/// Reads xerial-framed snappy, and also a bare snappy block (what some clients write).
fn xerial_decompress(data: &[u8]) -> Result<Vec<u8>, String> {
    let mut dec = snap::raw::Decoder::new();
    if data.len() < XERIAL_HEADER_LEN || data[..8] != XERIAL_MAGIC {
        return dec.decompress_vec(data).map_err(|e| e.to_string());
    }
    let mut out = Vec::new();
    let mut pos = XERIAL_HEADER_LEN;
    while pos < data.len() {
        let len_bytes: [u8; 4] =
            data.get(pos..pos + 4).and_then(|s| s.try_into().ok()).ok_or("truncated xerial block length")?;
        let len = i32::from_be_bytes(len_bytes);
        pos += 4;
        let block = usize::try_from(len)
            .ok()
            .and_then(|n| data.get(pos..pos + n))
            .ok_or("xerial block runs past the end")?;
        pos += block.len();
        let n = snap::raw::decompress_len(block).map_err(|e| e.to_string())?;
        let start = out.len();
        out.resize(start + n, 0);
        dec.decompress(block, &mut out[start..]).map_err(|e| e.to_string())?;
    }
    Ok(out)
}

#[cfg(test)]
#[path = "compression_test.rs"]
mod tests;
