//! Lingering close. When rowgate answers before reading a whole request body (a 413 from its
//! `Content-Length`, a storage upload refused by its bucket's limits), hyper stops reading and
//! closes the connection while the client is still sending. Closing a socket with unread bytes
//! makes the kernel reset the connection; the client's next write fails and it reports
//! "connection reset" instead of the answer it was sent. As nginx and Apache do, the close
//! first sends FIN and then reads and discards what still arrives, until the client closes its
//! side, goes quiet for [`IDLE`], or [`LIMIT`] has passed.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

/// The longest a closing connection is read from.
const LIMIT: Duration = Duration::from_secs(10);

/// How long a closing connection may send nothing before it is dropped.
const IDLE: Duration = Duration::from_secs(2);

/// A stream whose shutdown drains the peer's remaining bytes before it completes.
pub struct Lingering<S> {
    inner: S,
    closing: Option<Closing>,
}

/// A shutdown under way: the write side is closed, the read side is being drained.
struct Closing {
    idle: Pin<Box<Sleep>>,
    limit: Instant,
}

impl<S> Lingering<S> {
    pub fn new(inner: S) -> Lingering<S> {
        Lingering { inner, closing: None }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Lingering<S> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for Lingering<S> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, data)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.closing.is_none() {
            ready!(Pin::new(&mut this.inner).poll_shutdown(cx))?;
        }
        let mut scratch = [0u8; 8192];
        loop {
            let mut buf = ReadBuf::new(&mut scratch);
            let read = Pin::new(&mut this.inner).poll_read(cx, &mut buf);
            if let Poll::Ready(result) = &read {
                // The client closed its side, or the connection is gone: nothing left to lose.
                if result.is_err() || buf.filled().is_empty() {
                    return Poll::Ready(Ok(()));
                }
            }
            // Made once the client has not closed at once (most have by then: no timer for them).
            let closing = this.closing.get_or_insert_with(|| Closing {
                idle: Box::pin(tokio::time::sleep(IDLE)),
                limit: Instant::now() + LIMIT,
            });
            let now = Instant::now();
            if now >= closing.limit {
                return Poll::Ready(Ok(()));
            }
            if read.is_pending() {
                return match closing.idle.as_mut().poll(cx) {
                    Poll::Ready(()) => Poll::Ready(Ok(())),
                    Poll::Pending => Poll::Pending,
                };
            }
            closing.idle.as_mut().reset(now + IDLE);
        }
    }
}
