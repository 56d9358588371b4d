//! A client connection's byte stream: TCP as it is, or TLS over it. Fetch
//! sends log bytes with sendfile only on plain TCP; through TLS they are
//! read into a buffer and encrypted (the kernel's TLS is not used).

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

pub enum Transport {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::server::TlsStream<Buffered>>),
}

/// TLS reads its records from a buffer: rustls asks for a few KiB at a time,
/// and a client sending many small records would otherwise cost a read
/// (and a wakeup) each.
pub type Buffered = tokio::io::BufReader<TcpStream>;

/// The read buffer under TLS.
pub const TLS_READ_BUFFER: usize = 64 << 10;

impl Transport {
    /// The TCP connection underneath.
    pub fn tcp(&self) -> &TcpStream {
        match self {
            Transport::Plain(s) => s,
            Transport::Tls(s) => s.get_ref().0.get_ref(),
        }
    }

    /// Whether file bytes can go to the socket as they are (sendfile).
    pub fn zero_copy(&self) -> bool {
        matches!(self, Transport::Plain(_))
    }

    /// The client's certificates, if it is TLS and showed any.
    pub fn peer_certificates(&self) -> Option<&[rustls::pki_types::CertificateDer<'static>]> {
        match self {
            Transport::Plain(_) => None,
            Transport::Tls(s) => s.get_ref().1.peer_certificates(),
        }
    }
}

impl AsyncRead for Transport {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Transport::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Transport::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Transport {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Transport::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Transport::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Transport::Plain(s) => Pin::new(s).poll_flush(cx),
            Transport::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Transport::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Transport::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}
