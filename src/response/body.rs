//! A response's body: bytes in memory (every API answer), or a stream of a known length (a
//! stored file), which hyper sends as it is read, so that a file of any size is never held
//! whole in memory.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures_util::Stream;
use http_body::{Frame, SizeHint};

/// The body of every response rowgate sends.
pub enum Body {
    /// Bytes in memory (taken when sent).
    Full(Option<Bytes>),
    /// Chunks as they are read, `remaining` bytes in all.
    Stream {
        /// The chunks.
        chunks: Pin<Box<dyn Stream<Item = std::io::Result<Bytes>> + Send>>,
        /// Bytes still to come, which the chunks must add up to.
        remaining: u64,
    },
    /// Chunks of a length not known ahead (sent chunked): another server's streamed answer.
    Open(Pin<Box<dyn Stream<Item = std::io::Result<Bytes>> + Send>>),
}

impl Body {
    /// A body of `len` bytes, read from `chunks`.
    pub fn stream(chunks: impl Stream<Item = std::io::Result<Bytes>> + Send + 'static, len: u64) -> Body {
        Body::Stream { chunks: Box::pin(chunks), remaining: len }
    }

    /// The bytes of an in-memory body (none for a stream).
    pub fn bytes(&self) -> Option<&Bytes> {
        match self {
            Body::Full(b) => b.as_ref(),
            Body::Stream { .. } | Body::Open(_) => None,
        }
    }
}

impl Default for Body {
    fn default() -> Body {
        Body::Full(None)
    }
}

impl From<Bytes> for Body {
    fn from(b: Bytes) -> Body {
        Body::Full(Some(b))
    }
}

impl From<String> for Body {
    fn from(s: String) -> Body {
        Body::Full(Some(Bytes::from(s)))
    }
}

impl From<Vec<u8>> for Body {
    fn from(v: Vec<u8>) -> Body {
        Body::Full(Some(Bytes::from(v)))
    }
}

impl From<&'static str> for Body {
    fn from(s: &'static str) -> Body {
        Body::Full(Some(Bytes::from_static(s.as_bytes())))
    }
}

impl From<&'static [u8]> for Body {
    fn from(s: &'static [u8]) -> Body {
        Body::Full(Some(Bytes::from_static(s)))
    }
}

impl http_body::Body for Body {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        match self.get_mut() {
            Body::Full(bytes) => {
                Poll::Ready(bytes.take().filter(|b| !b.is_empty()).map(|b| Ok(Frame::data(b))))
            }
            Body::Stream { chunks, remaining } => match chunks.as_mut().poll_next(cx) {
                Poll::Ready(Some(Ok(chunk))) => {
                    let len = chunk.len() as u64;
                    if len > *remaining {
                        return Poll::Ready(Some(Err(std::io::Error::other(
                            "the file grew while it was sent",
                        ))));
                    }
                    *remaining -= len;
                    Poll::Ready(Some(Ok(Frame::data(chunk))))
                }
                Poll::Ready(None) if *remaining > 0 => {
                    Poll::Ready(Some(Err(std::io::Error::other("the file shrank while it was sent"))))
                }
                other => other.map(|c| c.map(|r| r.map(Frame::data))),
            },
            Body::Open(chunks) => chunks.as_mut().poll_next(cx).map(|c| c.map(|r| r.map(Frame::data))),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Body::Full(b) => b.as_ref().is_none_or(Bytes::is_empty),
            Body::Stream { remaining, .. } => *remaining == 0,
            Body::Open(_) => false,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Body::Full(b) => SizeHint::with_exact(b.as_ref().map_or(0, |b| b.len() as u64)),
            Body::Stream { remaining, .. } => SizeHint::with_exact(*remaining),
            Body::Open(_) => SizeHint::default(),
        }
    }
}
