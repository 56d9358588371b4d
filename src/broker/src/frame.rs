//! Request framing: a 4-byte big-endian size, then the request. The size is
//! checked against `socket.request.max.bytes` before anything is allocated.

use std::fmt;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt};

/// Why a connection's input cannot be served; the connection is closed with a
/// log line naming it.
#[derive(Debug)]
pub enum FrameError {
    /// The peer closed the connection between requests.
    Closed,
    /// A size below the smallest header or above the limit.
    BadSize {
        size: i64,
        max: usize,
    },
    /// The peer went away in the middle of a frame.
    Truncated {
        wanted: usize,
        got: usize,
    },
    Io(std::io::Error),
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameError::Closed => write!(f, "connection closed by the client"),
            FrameError::BadSize { size, max } => write!(
                f,
                "request size {size} is outside 8..={max} bytes (socket.request.max.bytes, or not a Kafka client)"
            ),
            FrameError::Truncated { wanted, got } => {
                write!(f, "connection closed in the middle of a request ({got} of {wanted} bytes)")
            }
            FrameError::Io(e) => write!(f, "read failed: {e}"),
        }
    }
}

/// The smallest request: api key, version and correlation id.
pub const MIN_REQUEST: usize = 8;

/// Reads one request frame, or `Closed` at a clean end between frames.
pub async fn read_frame<R: AsyncRead + Unpin>(r: &mut R, max: usize) -> Result<Bytes, FrameError> {
    let mut size = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        match r.read(&mut size[got..]).await {
            Ok(0) if got == 0 => return Err(FrameError::Closed),
            // A reset between requests is a client going away, not bad input.
            Err(e) if got == 0 && e.kind() == std::io::ErrorKind::ConnectionReset => {
                return Err(FrameError::Closed)
            }
            Ok(0) => return Err(FrameError::Truncated { wanted: 4, got }),
            Ok(n) => got += n,
            Err(e) => return Err(FrameError::Io(e)),
        }
    }
    let size = i32::from_be_bytes(size);
    if size < MIN_REQUEST as i32 || size as usize > max {
        return Err(FrameError::BadSize { size: size.into(), max });
    }
    let size = size as usize;
    let mut buf = BytesMut::zeroed(size);
    let mut got = 0;
    while got < size {
        match r.read(&mut buf[got..]).await {
            Ok(0) => return Err(FrameError::Truncated { wanted: size, got }),
            Ok(n) => got += n,
            Err(e) => return Err(FrameError::Io(e)),
        }
    }
    Ok(buf.freeze())
}

/// The fixed start of every request header, read before the full header is
/// decoded so that an unknown key or version can still be answered or logged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeaderStart {
    pub api_key: i16,
    pub api_version: i16,
    pub correlation_id: i32,
}

impl HeaderStart {
    pub fn peek(frame: &[u8]) -> Option<HeaderStart> {
        let b = frame.get(..MIN_REQUEST)?;
        Some(HeaderStart {
            api_key: i16::from_be_bytes([b[0], b[1]]),
            api_version: i16::from_be_bytes([b[2], b[3]]),
            correlation_id: i32::from_be_bytes([b[4], b[5], b[6], b[7]]),
        })
    }
}

#[cfg(test)]
#[path = "frame_test.rs"]
mod tests;
