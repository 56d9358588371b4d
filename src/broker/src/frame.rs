//! Request framing: a 4-byte big-endian size, then the request. The size is
//! checked against `socket.request.max.bytes`, and a frame's first 64 KiB are
//! read before anything more is allocated (a claim of 100 MiB followed by
//! nothing costs at most that). A request larger than that first read is read
//! on only once the broker-wide pool (`queued.max.request.bytes`) has room for
//! all of it: the pool bounds the memory of large requests read and not yet
//! answered, a request waiting for room holds none of it (so no two can wait
//! on each other), and small requests never wait for large ones.

use std::fmt;

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncReadExt};

use crate::memory::{Memory, Reservation, SMALL};

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

/// The first read of a frame's body takes at most this much room; the buffer
/// then doubles as bytes keep arriving, up to the frame's size.
const FIRST_READ: usize = SMALL;

/// What a request other than a Produce may take in memory once decoded, per
/// byte of its frame: an array entry of two bytes on the wire (an empty name)
/// becomes a struct of about a hundred.
pub const DECODED_PER_BYTE: usize = 100;

/// Takes room in the request memory for decoding `frame` (a request other
/// than a Produce, whose records stay bytes): beyond the first read,
/// `DECODED_PER_BYTE` times its size, held with the frame. `Err(needed)`
/// where that is more than the pool holds in all: such a request is refused,
/// not decoded.
pub async fn reserve_decoding(memory: &Memory, frame: &mut Frame) -> Result<(), usize> {
    let len = frame.bytes.len();
    let Some(capacity) = memory.capacity() else { return Ok(()) };
    if len <= FIRST_READ {
        return Ok(());
    }
    let needed = len.saturating_mul(DECODED_PER_BYTE);
    if needed > capacity {
        return Err(needed);
    }
    // The frame's own room is given back first: a request waiting for room
    // holds none.
    frame.memory = memory.reserve(0, false).await;
    frame.memory = memory.reserve(needed, true).await;
    Ok(())
}

/// One request's bytes and the room they hold in the broker's request memory,
/// given back when the frame is dropped (after its response is written).
pub struct Frame {
    pub bytes: Bytes,
    memory: Reservation,
}

/// Reads one request frame, or `Closed` at a clean end between frames.
#[cfg(test)]
pub async fn read_frame<R: AsyncRead + Unpin>(
    r: &mut R,
    max: usize,
    memory: &Memory,
) -> Result<Frame, FrameError> {
    read_frame_awaiting(r, max, memory, &mut |_| {}).await
}

/// `read_frame`, telling `awaiting` before each read of a frame's body how
/// many of its bytes are still to come, and 0 once it is whole (see
/// `LowWater`).
pub async fn read_frame_awaiting<R: AsyncRead + Unpin>(
    r: &mut R,
    max: usize,
    memory: &Memory,
    awaiting: &mut (dyn FnMut(usize) + Send),
) -> Result<Frame, FrameError> {
    let mut size = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        match r.read(&mut size[got..]).await {
            Ok(0) if got == 0 => return Err(FrameError::Closed),
            // A reset between requests is a client going away, not bad input;
            // so is a TLS client's close without close_notify.
            Err(e)
                if got == 0
                    && matches!(
                        e.kind(),
                        std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::UnexpectedEof
                    ) =>
            {
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
    let first = size.min(FIRST_READ);
    let mut held = memory.reserve(first, false).await;
    let mut buf: Vec<u8> = Vec::with_capacity(first);
    let read = async {
        read_into(r, &mut buf, first, size, awaiting).await?;
        if size > first {
            // The client is sending a large request: wait for room for all of it
            // in the pool, which bounds what such requests hold, then read the rest.
            drop(held);
            held = memory.reserve(size, true).await;
            buf.reserve_exact(size - buf.len());
            read_into(r, &mut buf, size, size, awaiting).await?;
        }
        Ok::<_, FrameError>(held)
    }
    .await;
    awaiting(0);
    Ok(Frame { bytes: Bytes::from(buf), memory: read? })
}

/// Reads into `buf` until it holds `upto` bytes of a `size`-byte frame.
async fn read_into<R: AsyncRead + Unpin>(
    r: &mut R,
    buf: &mut Vec<u8>,
    upto: usize,
    size: usize,
    awaiting: &mut (dyn FnMut(usize) + Send),
) -> Result<(), FrameError> {
    while buf.len() < upto {
        awaiting(size - buf.len());
        match (&mut *r).take((upto - buf.len()) as u64).read_buf(buf).await {
            Ok(0) => return Err(FrameError::Truncated { wanted: size, got: buf.len() }),
            Ok(_) => {}
            Err(e) => return Err(FrameError::Io(e)),
        }
    }
    Ok(())
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

/// A connection's receive low-water mark (`SO_RCVLOWAT`) while the rest of
/// a large request is awaited: the kernel then wakes the broker once that
/// much has arrived rather than at every segment, which a client writing
/// small TLS records would otherwise cost a wake-up each (work the kernel
/// does in the sender over loopback). The mark is never more than what is
/// sure to come: the bytes still owed less `slack`, what the reader may hold
/// of them already (for TLS, one partial record's), and is back at 1
/// between requests, so that a small request, or a client's close, wakes the
/// broker at once.
pub struct LowWater {
    fd: std::os::fd::RawFd,
    slack: usize,
    set: usize,
}

/// The most the mark is raised to.
const LOW_WATER_MAX: usize = 64 << 10;

impl LowWater {
    pub fn new(fd: std::os::fd::RawFd, slack: usize) -> LowWater {
        LowWater { fd, slack, set: 1 }
    }

    /// `remaining` bytes of a request are still to come (0: none).
    pub fn awaiting(&mut self, remaining: usize) {
        let mark = remaining.saturating_sub(self.slack).clamp(1, LOW_WATER_MAX);
        if mark != self.set {
            let v = mark as libc::c_int;
            // SAFETY: setsockopt on the connection's socket, open while the
            // connection is served, with a pointer to a live c_int and its size.
            let done = unsafe {
                libc::setsockopt(
                    self.fd,
                    libc::SOL_SOCKET,
                    libc::SO_RCVLOWAT,
                    (&v as *const libc::c_int).cast(),
                    std::mem::size_of::<libc::c_int>() as libc::socklen_t,
                )
            };
            // A kernel that refuses it only loses the saving.
            if done == 0 {
                self.set = mark;
            }
        }
    }
}

#[cfg(test)]
#[path = "frame_test.rs"]
mod tests;
