//! The HTTP/1.1 server loop every listener of rowgate runs (the API's, the admin port's, the
//! static ceiling's): connections accepted up to `server-max-connections` (past it, a 503 the
//! client can read), each with rowgate's limits and lingering close, and a graceful stop.

use std::convert::Infallible;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{header, HeaderValue, Request, Response};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

use super::{linger, target};
use crate::config::Config;
use crate::error::{code, Error};
use crate::response::Body;

/// What the server loop bounds for every connection.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// `server-max-header-size`.
    pub max_header_size: usize,
    /// `server-max-connections`.
    pub max_connections: usize,
    /// `server-read-timeout`, for a request's head.
    pub read_timeout: Duration,
}

impl Limits {
    /// The limits `config` sets.
    pub fn of(config: &Config) -> Limits {
        Limits {
            max_header_size: config.server.max_header_size,
            max_connections: config.server.max_connections,
            read_timeout: config.server.read_timeout,
        }
    }

    /// Limits for a server of rowgate's own (the admin port, the static ceiling).
    pub fn internal() -> Limits {
        Limits { max_header_size: 32 * 1024, max_connections: 10_000, read_timeout: Duration::from_secs(30) }
    }
}

/// The HTTP/1.1 server loop: every connection of `listener` answered by `handler` (given each
/// request and the address of the client that sent it), with rowgate's limits, until
/// `shutdown`.
pub async fn serve_with<H, F>(
    listener: TcpListener,
    limits: Limits,
    handler: H,
    shutdown: impl Future<Output = ()>,
    grace: Duration,
) where
    H: Fn(Request<Incoming>, IpAddr) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response<Body>> + Send + 'static,
{
    // Connections are told to finish by this (hyper-util's GracefulShutdown cannot watch a
    // connection that may be upgraded to a WebSocket).
    let (stop, stopping) = tokio::sync::watch::channel(false);
    let mut http = hyper::server::conn::http1::Builder::new();
    http.max_header_size(limits.max_header_size).timer(hyper_util::rt::TokioTimer::new());
    http.header_read_timeout(limits.read_timeout);
    let open = Arc::new(AtomicUsize::new(0));
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        // Out of file descriptors and similar: back off instead of spinning.
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let _ = stream.set_nodelay(true);
                if open.load(Ordering::Relaxed) >= limits.max_connections {
                    tokio::spawn(refuse(stream));
                    continue;
                }
                let counted = OpenConnection::new(&open);
                let handler = handler.clone();
                let client = peer.ip();
                let service = service_fn(move |req| {
                    let response = handler(req, client);
                    async move { Ok::<_, Infallible>(response.await) }
                });
                let conn = http.serve_connection(TokioIo::new(target::LenientTarget::new(linger::Lingering::new(stream))), service).with_upgrades();
                let mut stopping = stopping.clone();
                tokio::spawn(async move {
                    let mut conn = std::pin::pin!(conn);
                    tokio::select! {
                        _ = conn.as_mut() => {}
                        _ = stopping.changed() => {
                            conn.as_mut().graceful_shutdown();
                            let _ = conn.await;
                        }
                    }
                    drop(counted);
                });
            }
            () = &mut shutdown => break,
        }
    }
    drop(listener);
    let _ = stop.send(true);
    let drained = async {
        while open.load(Ordering::Relaxed) > 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    if tokio::time::timeout(grace, drained).await.is_err() {
        tracing::warn!("shutdown grace period ended with requests still in flight");
    }
}

/// A connection counted among the open ones until it is dropped.
struct OpenConnection(Arc<AtomicUsize>);

impl OpenConnection {
    fn new(open: &Arc<AtomicUsize>) -> OpenConnection {
        open.fetch_add(1, Ordering::Relaxed);
        OpenConnection(open.clone())
    }
}

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Answers a connection beyond `server-max-connections` with 503 RG006 and closes it (a
/// refusal the client can read, where a full accept queue would only stall it).
async fn refuse(mut stream: tokio::net::TcpStream) {
    use tokio::io::AsyncWriteExt;
    let e = Error::api(code::TOO_MANY_CONNECTIONS, "Too many open connections: retry later").to_response();
    let head = format!(
        "HTTP/1.1 {} {}\r\ncontent-type: application/json; charset=utf-8\r\nretry-after: 1\r\n\
         connection: close\r\ncontent-length: {}\r\n\r\n",
        e.status.as_u16(),
        e.status.canonical_reason().unwrap_or_default(),
        e.body.len()
    );
    let answer = [head.as_bytes(), e.body.as_bytes()].concat();
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        let _ = stream.write_all(&answer).await;
        let _ = stream.shutdown().await;
    })
    .await;
}

/// Serves one fixed answer (`body` with `content_type`, and an ETag) to every request with the
/// same server loop: the ceiling the benchmarks compare cached answers with.
pub async fn serve_static(
    listener: TcpListener,
    body: Bytes,
    content_type: HeaderValue,
    shutdown: impl Future<Output = ()>,
) {
    let etag =
        HeaderValue::from_str(&format!("\"{:x}\"", body.len())).unwrap_or(HeaderValue::from_static("\"0\""));
    let handler = move |_req, _client| {
        let (body, content_type, etag) = (body.clone(), content_type.clone(), etag.clone());
        async move {
            let mut r = Response::new(Body::from(body));
            r.headers_mut().insert(header::CONTENT_TYPE, content_type);
            r.headers_mut().insert(header::ETAG, etag);
            r
        }
    };
    serve_with(listener, Limits::internal(), handler, shutdown, Duration::from_secs(1)).await
}

/// Binds the configured address.
pub async fn bind(config: &Config) -> std::io::Result<TcpListener> {
    listen(SocketAddr::new(config.server.host, config.server.port))
}

/// Connections the kernel queues before they are accepted. Tokio's default (1,024) overflows when
/// a thousand clients connect at once while the workers are busy; a dropped SYN is retried only
/// a second later, which shows as a one-second stall (PocketBase's benchmark at c=1000). The
/// kernel caps this at `net.core.somaxconn`.
const LISTEN_BACKLOG: u32 = 8192;

/// Listens on `addr` with [`LISTEN_BACKLOG`].
pub fn listen(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket =
        if addr.is_ipv4() { tokio::net::TcpSocket::new_v4()? } else { tokio::net::TcpSocket::new_v6()? };
    // As `TcpListener::bind` does: a restart may rebind at once.
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(LISTEN_BACKLOG)
}
