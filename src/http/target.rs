//! Request targets as curl sends them. PostgREST's documentation writes URLs such as
//! `/people?select=id,json_data->>blood_type` and `?name=in.("a,b",c)`, and curl sends their
//! `>`, `<` and `"` as they are; hyper's parser refuses those bytes in a request target with a
//! bare 400 before rowgate sees the request, where PostgREST answers it. `LenientTarget` sits
//! between the socket and hyper and percent-encodes exactly those three bytes in each request
//! line, which every later stage decodes back to the same text.
//!
//! To know where each request line starts it follows the connection's framing: the head ends at
//! an empty line, a body is `Content-Length` bytes. Anything it cannot follow with certainty
//! (`Transfer-Encoding`, an unreadable or repeated `Content-Length`, an upgrade, `CONNECT`) makes
//! it step aside for the rest of the connection: from then on bytes pass unchanged, so hyper
//! sees exactly what the client sent and it never rewrites a byte of a body.

use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// How much of a header line is kept to read its name and value: the headers that matter
/// (`Content-Length`, `Transfer-Encoding`, `Upgrade`) fit; a longer one of those is unreadable.
const KEPT_LINE: usize = 64;

const CONNECT: &[u8] = b"CONNECT";

/// A connection's stream whose request lines' `<`, `>` and `"` reach hyper percent-encoded.
pub struct LenientTarget<S> {
    inner: S,
    framing: Framing,
    /// Bytes already read and rewritten that did not fit the caller's buffer.
    pending: Vec<u8>,
    /// How much of `pending` has been handed out.
    taken: usize,
}

impl<S> LenientTarget<S> {
    pub fn new(inner: S) -> LenientTarget<S> {
        LenientTarget { inner, framing: Framing::default(), pending: Vec::new(), taken: 0 }
    }
}

/// Where the connection's byte stream is.
#[derive(Debug)]
enum Framing {
    /// In a request line (or the empty lines before one): `field` counts the spaces seen, so 1
    /// is the target; `method` how many bytes of the method matched `CONNECT` (`u8::MAX` once
    /// one did not).
    Line { field: u8, started: bool, method: u8 },
    /// In the header lines of a request.
    Head(Head),
    /// In a body, with this many bytes left.
    Body(u64),
    /// Not followed any more: bytes pass unchanged.
    Aside,
}

impl Default for Framing {
    fn default() -> Framing {
        Framing::Line { field: 0, started: false, method: 0 }
    }
}

/// What a request's header lines said so far.
#[derive(Debug, Default)]
struct Head {
    /// The start of the current line.
    line: Vec<u8>,
    /// The current line was longer than `KEPT_LINE`.
    long: bool,
    content_length: Option<u64>,
    /// The framing cannot be followed (chunked, repeated or unreadable length, an upgrade).
    unfollowable: bool,
}

impl Head {
    /// Takes in one complete header line (without its line end).
    fn line_ended(&mut self) {
        let line = std::mem::take(&mut self.line);
        let long = std::mem::take(&mut self.long);
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            return;
        };
        let name = &line[..colon];
        let value = line[colon + 1..].trim_ascii();
        if name.eq_ignore_ascii_case(b"content-length") {
            let parsed = std::str::from_utf8(value)
                .ok()
                .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|v| v.parse::<u64>().ok());
            match (parsed, self.content_length, long) {
                (Some(n), None, false) => self.content_length = Some(n),
                _ => self.unfollowable = true,
            }
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") || name.eq_ignore_ascii_case(b"upgrade") {
            self.unfollowable = true;
        }
    }
}

impl Framing {
    /// Follows `bytes` and returns the position of the first byte to percent-encode, having
    /// followed everything before it (and not that byte).
    fn follow(&mut self, bytes: &[u8]) -> Option<usize> {
        let mut i = 0;
        while i < bytes.len() {
            match self {
                Framing::Aside => return None,
                Framing::Body(left) => {
                    let n = (*left).min((bytes.len() - i) as u64);
                    i += n as usize;
                    *left -= n;
                    if *left == 0 {
                        *self = Framing::default();
                    }
                    continue;
                }
                Framing::Line { field, started, method } => match bytes[i] {
                    // A tunnel's bytes after its head are not HTTP.
                    b'\n' if *started && *method as usize == CONNECT.len() => *self = Framing::Aside,
                    b'\n' if *started => *self = Framing::Head(Head::default()),
                    b'\r' | b'\n' => {}
                    b' ' => {
                        if *field == 0 && (*method as usize) < CONNECT.len() {
                            *method = u8::MAX;
                        }
                        *field = field.saturating_add(1);
                        *started = true;
                    }
                    b'<' | b'>' | b'"' if *field == 1 => return Some(i),
                    b => {
                        *started = true;
                        if *field == 0 {
                            *method = match CONNECT.get(*method as usize) {
                                Some(&c) if c == b => *method + 1,
                                _ => u8::MAX,
                            };
                        }
                    }
                },
                Framing::Head(head) => match bytes[i] {
                    b'\n' if head.line.is_empty() && !head.long => {
                        *self = match (head.unfollowable, head.content_length) {
                            (true, _) => Framing::Aside,
                            (false, Some(n)) if n > 0 => Framing::Body(n),
                            (false, _) => Framing::default(),
                        };
                    }
                    b'\n' => head.line_ended(),
                    b'\r' => {}
                    b => {
                        if head.line.len() < KEPT_LINE {
                            head.line.push(b);
                        } else {
                            head.long = true;
                        }
                    }
                },
            }
            i += 1;
        }
        None
    }
}

/// The bytes `raw` stands for once every byte `framing` marks is percent-encoded.
fn rewrite(framing: &mut Framing, mut raw: &[u8], out: &mut Vec<u8>) {
    while let Some(at) = framing.follow(raw) {
        out.extend_from_slice(&raw[..at]);
        out.extend_from_slice(match raw[at] {
            b'<' => b"%3C",
            b'>' => b"%3E",
            _ => b"%22",
        });
        raw = &raw[at + 1..];
    }
    out.extend_from_slice(raw);
}

impl<S: AsyncRead + Unpin> AsyncRead for LenientTarget<S> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.taken < this.pending.len() {
            let n = (this.pending.len() - this.taken).min(buf.remaining());
            buf.put_slice(&this.pending[this.taken..this.taken + n]);
            this.taken += n;
            if this.taken == this.pending.len() {
                this.pending.clear();
                this.taken = 0;
            }
            return Poll::Ready(Ok(()));
        }
        let before = buf.filled().len();
        ready!(Pin::new(&mut this.inner).poll_read(cx, buf))?;
        // Most reads need no change: they are followed in place and handed on as read.
        let Some(at) = this.framing.follow(&buf.filled()[before..]) else {
            return Poll::Ready(Ok(()));
        };
        let rest = buf.filled()[before + at..].to_vec();
        buf.set_filled(before + at);
        let mut out = Vec::with_capacity(rest.len() + 8);
        // The first byte of `rest` is the one `follow` stopped at; rewrite follows it again.
        rewrite(&mut this.framing, &rest, &mut out);
        let n = out.len().min(buf.remaining());
        buf.put_slice(&out[..n]);
        if n < out.len() {
            this.pending = out;
            this.taken = n;
        }
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for LenientTarget<S> {
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
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What hyper reads of `sent` when it arrives in pieces of `piece` bytes.
    fn through(sent: &[u8], piece: usize) -> Vec<u8> {
        let mut framing = Framing::default();
        let mut out = Vec::new();
        for chunk in sent.chunks(piece) {
            rewrite(&mut framing, chunk, &mut out);
        }
        out
    }

    fn each_split(sent: &[u8], expected: &[u8]) {
        for piece in 1..=sent.len() {
            assert_eq!(
                String::from_utf8_lossy(&through(sent, piece)),
                String::from_utf8_lossy(expected),
                "in pieces of {piece}"
            );
        }
    }

    #[test]
    fn a_targets_angle_brackets_and_quotes_are_percent_encoded() {
        each_split(
            b"GET /people?select=id,data->>a&name=in.(\"a,b\")&x=<1 HTTP/1.1\r\nHost: h\r\n\r\n",
            b"GET /people?select=id,data-%3E%3Ea&name=in.(%22a,b%22)&x=%3C1 HTTP/1.1\r\nHost: h\r\n\r\n",
        );
    }

    #[test]
    fn bodies_and_headers_are_left_alone_and_the_next_request_line_is_found() {
        each_split(
            b"POST /t?a=> HTTP/1.1\r\ncontent-length: 9\r\nX-A: \"<>\"\r\n\r\n{\"a\":\"<\"}GET /t?b=> HTTP/1.1\r\n\r\n",
            b"POST /t?a=%3E HTTP/1.1\r\ncontent-length: 9\r\nX-A: \"<>\"\r\n\r\n{\"a\":\"<\"}GET /t?b=%3E HTTP/1.1\r\n\r\n",
        );
    }

    #[test]
    fn framing_it_cannot_follow_is_passed_on_unchanged() {
        for sent in [
            &b"POST /t HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n\"<>\"\n\r\nGET /t?> HTTP/1.1\r\n\r\n"[..],
            b"POST /t HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n\"GET /t?> HTTP/1.1\r\n\r\n",
            b"POST /t HTTP/1.1\r\nContent-Length: +1\r\n\r\n\"GET /t?> HTTP/1.1\r\n\r\n",
            b"GET /ws HTTP/1.1\r\nUpgrade: websocket\r\n\r\n\"<>GET /t?> HTTP/1.1\r\n\r\n",
            b"CONNECT h:1 HTTP/1.1\r\n\r\nGET /t?> HTTP/1.1\r\n\r\n",
        ] {
            each_split(sent, sent);
        }
    }

    #[test]
    fn only_the_target_is_rewritten() {
        each_split(b"\r\nGE\"T /a?\" HTTP/1.1>\r\n\r\n", b"\r\nGE\"T /a?%22 HTTP/1.1>\r\n\r\n");
    }
}
