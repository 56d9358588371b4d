//! A response is a list of parts, encoded bytes and file slices, written in
//! order by the connection's one writer (Kafka's `MultiRecordsSend`). File
//! slices go to the socket with sendfile, or through a buffer when sendfile
//! is off; either way the slice holds its segment so the file cannot go away
//! mid-send. A write that makes no progress for the connection's idle time
//! fails with `TimedOut`: a client that stops reading does not hold its
//! response (and the segments under it) for ever.

use std::future::Future;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::ResponseHeader;
use kafka_protocol::protocol::Encodable;
use seglog_core::segment::Segment;
use tokio::io::{AsyncWriteExt, Interest};
use tokio::net::TcpStream;

use crate::transport::Transport;

use crate::metrics::Metrics;

/// Bytes of one segment file: what a Fetch sends of a partition's log.
#[derive(Clone)]
pub struct FileSlice {
    pub segment: Arc<Segment>,
    pub position: u64,
    pub length: u64,
}

pub enum Part {
    Bytes(Bytes),
    File(FileSlice),
}

impl Part {
    fn len(&self) -> u64 {
        match self {
            Part::Bytes(b) => b.len() as u64,
            Part::File(f) => f.length,
        }
    }
}

/// One response frame, less its size prefix.
pub struct Response {
    pub parts: Vec<Part>,
}

/// Encodes a response header of `header_version`.
pub fn encode_header(buf: &mut BytesMut, correlation_id: i32, header_version: i16) -> anyhow::Result<()> {
    ResponseHeader::default().with_correlation_id(correlation_id).encode(buf, header_version)
}

impl Response {
    /// A response made only of bytes: a header and a body the protocol crate encodes.
    pub fn encoded<M: Encodable>(
        correlation_id: i32,
        header_version: i16,
        body: &M,
        version: i16,
    ) -> anyhow::Result<Response> {
        let mut buf = BytesMut::with_capacity(64 + body.compute_size(version)?);
        encode_header(&mut buf, correlation_id, header_version)?;
        body.encode(&mut buf, version)?;
        Ok(Response { parts: vec![Part::Bytes(buf.freeze())] })
    }

    pub fn bytes(b: Bytes) -> Response {
        Response { parts: vec![Part::Bytes(b)] }
    }

    pub fn len(&self) -> u64 {
        self.parts.iter().map(Part::len).sum()
    }

    /// The bytes it holds in memory: all but its file slices.
    pub fn in_memory(&self) -> usize {
        self.parts.iter().map(|p| if let Part::Bytes(b) = p { b.len() } else { 0 }).sum()
    }
}

/// Holds TCP_CORK on while a response with file parts goes out, so the small
/// header and the file bytes leave in full packets.
struct Cork(RawFd);

impl Cork {
    fn set(fd: RawFd, on: bool) {
        let v: libc::c_int = on.into();
        // SAFETY: setsockopt on a socket we own with a pointer to a live c_int
        // and its size; a failure only loses the packet coalescing.
        unsafe {
            libc::setsockopt(
                fd,
                libc::IPPROTO_TCP,
                libc::TCP_CORK,
                (&v as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            );
        }
    }
}

impl Drop for Cork {
    fn drop(&mut self) {
        Cork::set(self.0, false);
    }
}

/// Bytes parts up to this size are copied behind the size prefix to go out
/// in one write.
const JOIN_PREFIX: usize = 16 << 10;

/// Writes `response` as one frame, failing with `TimedOut` when the socket
/// takes no bytes for `idle`. Once its size prefix is out, any error leaves
/// the connection unusable: the caller must close it.
pub async fn write_response(
    stream: &mut Transport,
    response: &Response,
    sendfile: bool,
    metrics: &Metrics,
    idle: Duration,
) -> io::Result<()> {
    let total = response.len();
    let size = i32::try_from(total).map_err(|_| io::Error::other(format!("response of {total} bytes")))?;
    let has_files = response.parts.iter().any(|p| matches!(p, Part::File(_)));
    let large = response.in_memory() > JOIN_PREFIX;
    let fd = stream.tcp().as_raw_fd();
    let _cork = (has_files || large).then(|| {
        Cork::set(fd, true);
        Cork(fd)
    });
    // The size prefix rides with the first bytes part, copied beside it when
    // that is small; a large one is not copied, the cork joins them on the wire.
    let mut prefix = BytesMut::with_capacity(4);
    prefix.put_i32(size);
    let mut pending: Option<BytesMut> = Some(prefix);
    for part in &response.parts {
        match part {
            Part::Bytes(b) if b.len() > JOIN_PREFIX => {
                if let Some(p) = pending.take() {
                    write_bytes(stream, &p, idle).await?;
                }
                write_bytes(stream, b, idle).await?;
            }
            Part::Bytes(b) => {
                if let Some(mut p) = pending.take() {
                    p.extend_from_slice(b);
                    write_bytes(stream, &p, idle).await?;
                } else {
                    write_bytes(stream, b, idle).await?;
                }
            }
            Part::File(f) => {
                if let Some(p) = pending.take() {
                    write_bytes(stream, &p, idle).await?;
                }
                if let (true, Transport::Plain(tcp)) = (sendfile, &mut *stream) {
                    send_file(tcp, f, idle).await?;
                    metrics.sendfile_bytes.inc_by(f.length);
                } else {
                    copy_file(stream, f, idle).await?;
                    metrics.copied_bytes.inc_by(f.length);
                }
                // Finding the range's batches read their headers through the
                // segment's map; the pages need not stay resident here.
                f.segment.release_mapped(f.position, f.length);
            }
        }
    }
    if let Some(p) = pending.take() {
        write_bytes(stream, &p, idle).await?;
    }
    // TLS keeps the last record's bytes until flushed.
    within(idle, stream.flush()).await
}

/// `step` within `idle`, or `TimedOut`: the socket took nothing for that long.
async fn within<T>(idle: Duration, step: impl Future<Output = io::Result<T>>) -> io::Result<T> {
    match tokio::time::timeout(idle, step).await {
        Ok(r) => r,
        Err(_) => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("the client read nothing of its response for {} ms", idle.as_millis()),
        )),
    }
}

/// Bytes in steps small enough that each one's progress is timed.
async fn write_bytes(stream: &mut Transport, bytes: &[u8], idle: Duration) -> io::Result<()> {
    const STEP: usize = 256 << 10;
    for chunk in bytes.chunks(STEP) {
        within(idle, stream.write_all(chunk)).await?;
    }
    Ok(())
}

/// The file range to the socket with sendfile(2): the bytes go from the page
/// cache to the socket without passing through this process.
async fn send_file(stream: &mut TcpStream, f: &FileSlice, idle: Duration) -> io::Result<()> {
    let sock = stream.as_raw_fd();
    let file = f.segment.log_fd().as_raw_fd();
    let mut offset = f.position as libc::off_t;
    let end = f.position + f.length;
    while (offset as u64) < end {
        within(idle, stream.writable()).await?;
        let left = (end - offset as u64).min(1 << 30) as usize;
        let sent = stream.try_io(Interest::WRITABLE, || {
            // SAFETY: both descriptors are open for the call (the socket is
            // borrowed mutably, the file is held by `f.segment`), and `offset`
            // is a live off_t the kernel advances.
            let n = unsafe { libc::sendfile(sock, file, &mut offset, left) };
            if n < 0 {
                Err(io::Error::last_os_error())
            } else {
                Ok(n as usize)
            }
        });
        match sent {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!(
                        "{} ended before position {end} while sending it (truncated under a fetch)",
                        f.segment.log_path().display()
                    ),
                ))
            }
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The file range through a buffer: what a transport without sendfile does.
async fn copy_file(stream: &mut Transport, f: &FileSlice, idle: Duration) -> io::Result<()> {
    const CHUNK: u64 = 256 << 10;
    let mut pos = f.position;
    let end = f.position + f.length;
    while pos < end {
        let n = (end - pos).min(CHUNK) as usize;
        let buf = f.segment.read_bytes(pos, n).map_err(io::Error::other)?;
        within(idle, stream.write_all(&buf)).await?;
        pos += n as u64;
    }
    Ok(())
}
