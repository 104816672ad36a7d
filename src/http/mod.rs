//! The HTTP front: a hyper server with limits and graceful shutdown, and the route table
//! (`/live`, `/ready`, `/rowgate/...`, `/auth/v1/...`, the API under `api-prefix`, static
//! files under `static-prefix`). The API's pipeline is `api.rs`.

mod access_log;
mod api;
mod cached;
mod context;
mod cors;
mod docs;
mod identify;
mod linger;
mod rate_limit;
mod static_files;
mod target;

pub use cors::Cors;
pub use rate_limit::RateLimiter;
pub use static_files::StaticFiles;

use std::convert::Infallible;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::FutureExt;
use http::{header, HeaderValue, Request, Response, StatusCode};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

use crate::auth::Authenticator;
use crate::backend::Backend;
use crate::config::Config;
use crate::config::ErrorVerbosity;
use crate::error::{code, Error};
use crate::response::{error_response, error_response_as, Body};
use crate::schema::SharedSchema;

/// What every request handler shares.
pub struct AppState {
    /// The configuration.
    pub config: Arc<Config>,
    /// The database.
    pub backend: Arc<Backend>,
    /// The schema cache.
    pub schema: Arc<SharedSchema>,
    /// Verifies bearer tokens.
    pub auth: Arc<Authenticator>,
    /// The CORS policy.
    pub cors: Cors,
    /// Verifies API keys.
    pub keys: Arc<crate::apikey::KeyStore>,
    /// The response cache, when `cache-enabled`.
    pub cache: Option<Arc<crate::cache::ResponseCache>>,
    /// The built-in accounts (`accounts-enabled`).
    pub accounts: Option<Arc<crate::accounts::Accounts>>,
    /// The files of `static-dir`.
    pub static_files: Option<StaticFiles>,
    /// `rate-limit-*`.
    pub rate_limits: RateLimiter,
    /// Storage at `/storage/v1`, when `storage-enabled`.
    pub storage: Option<Arc<crate::storage::Storage>>,
    /// Realtime at `/realtime/v1`, when `realtime-enabled`.
    pub realtime: Option<Arc<crate::realtime::Realtime>>,
    /// Shutting down: `/ready` answers 503 while requests are still served
    /// (`server-shutdown-delay`).
    pub draining: std::sync::atomic::AtomicBool,
}

/// Serves `listener` until `shutdown` completes, then lets in-flight requests finish (for at
/// most `grace`).
pub async fn serve(
    listener: TcpListener,
    state: Arc<AppState>,
    shutdown: impl Future<Output = ()>,
    grace: Duration,
) {
    let limits = Limits::of(&state.config);
    let handler = move |req, client| {
        let state = state.clone();
        // The request's future holds the state of every route (about 12 KB): boxed once here,
        // it moves as a pointer; by value it was copied whole into hyper's service wrapper and
        // its dispatcher.
        Box::pin(async move { handle(&state, req, client).await })
    };
    serve_with(listener, limits, handler, shutdown, grace).await
}

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
            max_header_size: config.server_max_header_size,
            max_connections: config.server_max_connections,
            read_timeout: config.server_read_timeout,
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
    listen(SocketAddr::new(config.server_host, config.server_port))
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

/// Answers one request; a panic inside becomes a 500 instead of taking the server down.
pub async fn handle(state: &AppState, req: Request<Incoming>, client: IpAddr) -> Response<Body> {
    match AssertUnwindSafe(route(state, req, client)).catch_unwind().await {
        Ok(response) => response,
        Err(_) => {
            tracing::error!("request handler panicked");
            error_response(&Error::api(code::INTERNAL, "Internal server error"))
        }
    }
}

async fn route(state: &AppState, req: Request<Incoming>, client: IpAddr) -> Response<Body> {
    if tracing::enabled!(tracing::Level::INFO) {
        let started = std::time::Instant::now();
        let (method, uri) = (req.method().clone(), access_log::uri(req.uri()));
        let response = dispatch(state, req, client).await;
        tracing::info!(%method, %uri, status = response.status().as_u16(), elapsed = ?started.elapsed(), "request");
        return response;
    }
    dispatch(state, req, client).await
}

async fn dispatch(state: &AppState, req: Request<Incoming>, client: IpAddr) -> Response<Body> {
    if let Some(preflight) = state.cors.preflight(&req) {
        return preflight;
    }
    let origin = req.headers().get(header::ORIGIN).cloned();
    let mut response = endpoint(state, req, client).await;
    state.cors.decorate(origin.as_ref(), &mut response);
    response
}

async fn endpoint(state: &AppState, req: Request<Incoming>, peer: IpAddr) -> Response<Body> {
    let uri = req.uri().clone();
    let client = client_address(&state.config.server_trusted_proxies, peer, req.headers());
    match uri.path() {
        "/live" => return plain(StatusCode::OK),
        "/ready" => return ready(state).await,
        path => {
            if let Err(e) = state.rate_limits.admit_client(client) {
                return match path.starts_with("/auth/v1/") && state.accounts.is_some() {
                    true => crate::accounts::refused(&e),
                    false => error_response(&e),
                };
            }
        }
    }
    match uri.path() {
        "/rowgate/metrics" if matches!(*req.method(), http::Method::GET | http::Method::HEAD) => {
            metrics(state)
        }
        path if state.config.api_docs_enabled
            && (path == docs::PATH || path.starts_with(&format!("{}/", docs::PATH))) =>
        {
            let root = format!("{}/", state.config.api_prefix.trim_end_matches('/'));
            docs::serve(path, req.method(), req.headers(), &root)
        }
        "/rowgate/apikey" if matches!(*req.method(), http::Method::GET | http::Method::HEAD) => {
            identify::describe_api_key(state, req.headers()).await.unwrap_or_else(|e| error_response(&e))
        }
        path if path.starts_with("/storage/v1/") && state.storage.is_some() => {
            let storage = state.storage.as_ref().expect("checked");
            let (parts, body) = req.into_parts();
            let caller = identify::storage_caller(state, &parts.headers).await;
            let rest = &path["/storage/v1".len()..];
            storage.handle(parts, body, rest, caller, client).await
        }
        path if path.starts_with("/realtime/v1/") && state.realtime.is_some() => realtime(state, req).await,
        path if path.starts_with("/auth/v1/") && state.accounts.is_some() => {
            let accounts = state.accounts.as_ref().expect("checked");
            let (parts, incoming) = req.into_parts();
            if let Err(e) = identify::admit_application(state, &parts.headers).await {
                return crate::accounts::refused(&e);
            }
            let body = match api::read_body(incoming, 64 * 1024, state.config.server_read_timeout).await {
                Ok(b) => b,
                Err(e) => return error_response(&e),
            };
            let verify = |authorization: Option<&str>| {
                let principal = state.auth.authenticate(authorization).ok().filter(|p| !p.anonymous)?;
                let claims: serde_json::Value = serde_json::from_str(&principal.claims).ok()?;
                claims.get("sub").and_then(|s| s.as_str()).map(str::to_owned)
            };
            accounts.handle(&parts, client, body, verify).await
        }
        path => {
            let config = &state.config;
            // Supabase's clients find the API at /rest/v1 beside /auth/v1, /storage/v1 and
            // /realtime/v1: with the API at the root (the default), it is served there too. A
            // chosen `api-prefix` is the only one (a proxy may guard it alone).
            let (rest, prefixed) = match under(path, SUPABASE_REST).filter(|_| config.api_prefix == "/") {
                Some(rest) => (Some(rest), true),
                None => (under(path, &config.api_prefix), config.api_prefix != "/"),
            };
            if let Some(rest) = rest {
                let mut req = req;
                if prefixed {
                    if matches!(rest, "" | "/") {
                        // Only the root describes where it was reached (the description's base).
                        let mounted =
                            if config.api_prefix == "/" { SUPABASE_REST } else { config.api_prefix.as_str() };
                        req.extensions_mut().insert(MountedAt(mounted.trim_end_matches('/').to_owned()));
                    }
                    // The API sees its paths as if it were at the root.
                    let target = match req.uri().query() {
                        Some(q) => format!("{rest}?{q}"),
                        None => rest.to_owned(),
                    };
                    match target.parse() {
                        Ok(uri) => *req.uri_mut() = uri,
                        Err(_) => return plain(StatusCode::BAD_REQUEST),
                    }
                }
                let trace = config
                    .server_trace_header
                    .as_ref()
                    .and_then(|h| Some((h.clone(), req.headers().get(h)?.clone())));
                let mut response = match api::api(state, req).await {
                    // As PostgREST 16, on every answer but an error: what it depends on.
                    Ok(mut response) => {
                        if let http::header::Entry::Vacant(vary) = response.headers_mut().entry(header::VARY)
                        {
                            vary.insert(HeaderValue::from_static("Accept, Prefer, Range"));
                        }
                        response
                    }
                    Err(e) => error_response_as(&e, config.client_error_verbosity == ErrorVerbosity::Minimal),
                };
                // `server-trace-header`: the caller's request id comes back, error or not.
                if let Some((name, value)) = trace {
                    response.headers_mut().insert(name, value);
                }
                return response;
            }
            match (&state.static_files, under(path, &config.static_prefix)) {
                (Some(files), Some(rest)) => files.serve(rest, req.method(), req.headers()).await,
                _ => plain(StatusCode::NOT_FOUND),
            }
        }
    }
}

/// `/realtime/v1/websocket` (the socket runs as its `apikey` query parameter or headers make
/// it) and `/realtime/v1/api/broadcast` (as its headers make it).
async fn realtime(state: &AppState, req: Request<Incoming>) -> Response<Body> {
    let rt = state.realtime.as_ref().expect("checked");
    let path = req.uri().path().trim_start_matches("/realtime/v1");
    // Refused callers get Supabase Realtime's body; one beyond a rate limit, the limit's.
    let unauthorized = |e: &Error| {
        let mut r = error_response(e);
        if r.status() != StatusCode::TOO_MANY_REQUESTS {
            *r.body_mut() = Body::from(
                serde_json::json!({"message": "Unauthorized", "error": e.to_string()}).to_string(),
            );
        }
        r
    };
    if path == "/websocket" && req.method() == http::Method::GET {
        let apikey = crate::realtime::query_value(req.uri().query(), "apikey");
        return match identify::socket_caller(state, req.headers(), apikey.as_deref()).await {
            Ok(principal) => crate::realtime::upgrade(rt, req, principal),
            Err(e) => unauthorized(&e),
        };
    }
    if let Some(rest) = path.strip_prefix("/api/broadcast") {
        if req.method() != http::Method::POST {
            return plain(StatusCode::METHOD_NOT_ALLOWED);
        }
        if let Err(e) = identify::admit(state, req.headers()).await {
            return unauthorized(&e);
        }
        let content_type =
            req.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).map(str::to_owned);
        let (rest, query) = (rest.to_owned(), req.uri().query().map(str::to_owned));
        let limit = state.config.realtime.max_message_size;
        let body = match api::read_body(req.into_body(), limit, state.config.server_read_timeout).await {
            Ok(b) => b,
            Err(e) => return error_response(&e),
        };
        return crate::realtime::broadcast_api(rt, &rest, query.as_deref(), content_type.as_deref(), body);
    }
    plain(StatusCode::NOT_FOUND)
}

/// Where Supabase's clients look for the REST API.
const SUPABASE_REST: &str = "/rest/v1";

/// The path an API request came under (`/rest/v1`, or `api-prefix`), which the OpenAPI
/// description names as the API's base path.
#[derive(Debug, Clone)]
pub struct MountedAt(pub String);

/// The client a request comes from: the peer, or, when the peer is one of
/// `server-trusted-proxies`, the address its `X-Forwarded-For` names before any trusted proxy
/// (the last hop's list is read from its end: what a client writes at the start is not trusted).
fn client_address(trusted: &[ipnet::IpNet], peer: IpAddr, headers: &http::HeaderMap) -> IpAddr {
    let is_trusted = |ip: &IpAddr| trusted.iter().any(|net| net.contains(ip));
    if trusted.is_empty() || !is_trusted(&peer) {
        return peer;
    }
    let hops = headers.get_all("x-forwarded-for").iter().filter_map(|v| v.to_str().ok());
    let mut nearest_first: Vec<&str> = hops.flat_map(|v| v.split(',')).collect();
    nearest_first.reverse();
    for hop in nearest_first {
        match hop.trim().parse::<IpAddr>() {
            Ok(ip) if is_trusted(&ip) => continue,
            Ok(ip) => return ip,
            Err(_) => break,
        }
    }
    peer
}

/// The rest of `path` below `prefix` (`/` for the prefix itself), if it is below it.
fn under<'p>(path: &'p str, prefix: &str) -> Option<&'p str> {
    if prefix == "/" {
        return Some(path);
    }
    match path.strip_prefix(prefix)? {
        "" => Some("/"),
        rest if rest.starts_with('/') => Some(rest),
        _ => None,
    }
}

/// `/ready`: 200 once the schema cache is loaded and a pooled connection can be had.
async fn ready(state: &AppState) -> Response<Body> {
    let ready = !state.draining.load(Ordering::Relaxed)
        && state.schema.load().is_some()
        && state.backend.ready().await;
    plain(if ready { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE })
}

/// The admin server's routes (PostgREST's `admin-server-port`): `/live`, `/ready`, `/metrics`.
pub async fn admin(state: &AppState, req: Request<Incoming>) -> Response<Body> {
    match req.uri().path() {
        "/live" => plain(StatusCode::OK),
        "/ready" => ready(state).await,
        "/metrics" => metrics(state),
        _ => plain(StatusCode::NOT_FOUND),
    }
}

/// `GET /rowgate/metrics`: counters in Prometheus text format.
fn metrics(state: &AppState) -> Response<Body> {
    let mut out = String::new();
    out.push_str("# HELP rowgate_cache_enabled Whether the response cache is on.\n# TYPE rowgate_cache_enabled gauge\n");
    out.push_str(&format!("rowgate_cache_enabled {}\n", u8::from(state.cache.is_some())));
    if let Some(cache) = &state.cache {
        cache.render_metrics(&mut out);
    }
    state.rate_limits.metrics(&mut out);
    // PostgREST's metrics, under its names.
    state.backend.render_metrics(&mut out);
    state.schema.render_metrics(&mut out);
    state.auth.render_metrics(&mut out);
    if let Some(rt) = &state.realtime {
        rt.render_metrics(&mut out);
    }
    if let Some(storage) = &state.storage {
        storage.render_metrics(&mut out);
    }
    let mut r = Response::new(Body::from(out));
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"));
    r
}

fn plain(status: StatusCode) -> Response<Body> {
    let mut r = Response::new(Body::default());
    *r.status_mut() = status;
    r
}
