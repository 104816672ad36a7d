//! The HTTP front: the route table (`/live`, `/ready`, `/rowgate/...`, the services beside the
//! API under their prefixes, the API under `api-prefix` and `/rest/v1`, static files under
//! `static-prefix`) and what every request shares ([`AppState`]). The API's pipeline is
//! `api.rs`; the services are registered in `services.rs`; the server loop every listener runs
//! is `server_loop.rs`.

mod access_log;
mod api;
mod cached;
mod context;
mod cors;
mod docs;
mod identify;
mod linger;
pub mod probe;
mod rate_limit;
mod server_loop;
mod services;
mod static_files;
mod target;

pub use cors::Cors;
pub use rate_limit::RateLimiter;
pub use server_loop::{bind, listen, serve_static, serve_with, Limits};
pub use services::{
    AuthService, DashboardService, FunctionsService, PocketBaseService, RealtimeService, Service,
    StorageService,
};
pub use static_files::StaticFiles;

use std::future::Future;
use std::net::IpAddr;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt;
use http::{header, HeaderValue, Request, Response, StatusCode};
use hyper::body::Incoming;
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
    /// The files of `static-dir`.
    pub static_files: Option<StaticFiles>,
    /// `rate-limit-*`.
    pub rate_limits: RateLimiter,
    /// The services beside the API that are on (Supabase's Auth, Storage, Realtime), each
    /// under its prefix.
    pub services: Vec<Box<dyn Service>>,
    /// The dashboard at `/_/`, when `dashboard-enabled`: its sessions are a credential every
    /// service accepts.
    pub dashboard: Option<Arc<crate::dashboard::Dashboard>>,
    /// The Edge Functions, when `functions-dir` names them (also among the services).
    pub functions: Option<Arc<crate::functions::Functions>>,
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
    // The dashboard's Activity page keeps requests only while it is watched.
    let watched = state.dashboard.as_ref().filter(|d| d.recent.watched());
    if tracing::enabled!(tracing::Level::INFO) || watched.is_some() {
        let started = std::time::Instant::now();
        let (method, uri) = (req.method().clone(), access_log::uri(req.uri()));
        let caller = watched.map(|_| caller_label(state, req.headers()));
        let response = dispatch(state, req, client).await;
        let (status, elapsed) = (response.status().as_u16(), started.elapsed());
        tracing::info!(%method, %uri, status, ?elapsed, "request");
        if let (Some(d), Some(caller)) = (watched, caller) {
            d.recent.record(method.as_str(), uri, status, elapsed, client, caller);
        }
        return response;
    }
    dispatch(state, req, client).await
}

/// Who a request says it is, for the dashboard's list of requests: the dashboard's session, a
/// token's role (verified; tokens are cached once verified), an API key, or a visitor.
fn caller_label(state: &AppState, headers: &http::HeaderMap) -> String {
    if headers.contains_key(crate::dashboard::session::CSRF_HEADER) {
        return "dashboard".into();
    }
    let authorization = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok());
    if authorization.and_then(crate::auth::bearer_token).is_some_and(|t| !t.is_empty()) {
        return match state.auth.authenticate(authorization) {
            Ok(p) => p.role.to_string(),
            Err(_) => "an invalid token".into(),
        };
    }
    if identify::api_key(state, headers).is_some() {
        return "an API key".into();
    }
    state.config.db.anon_role.clone().unwrap_or_else(|| "a visitor".into())
}

async fn dispatch(state: &AppState, req: Request<Incoming>, client: IpAddr) -> Response<Body> {
    // The dashboard answers its own page only: no other origin is let in by CORS.
    if state.dashboard.is_some() && under(req.uri().path(), crate::dashboard::PREFIX).is_some() {
        return endpoint(state, req, client).await;
    }
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
    let client = client_address(&state.config.server.trusted_proxies, peer, req.headers());
    match uri.path() {
        "/live" => return plain(StatusCode::OK),
        "/ready" => return ready(state).await,
        path => {
            if let Err(e) = state.rate_limits.admit_client(client) {
                return match services::find(&state.services, path) {
                    Some((service, _)) => service.refused(&e),
                    None => error_response(&e),
                };
            }
        }
    }
    if let Some(e) = state.dashboard.as_ref().and_then(|d| d.refuses(client, req.headers())) {
        return error_response(&e);
    }
    if uri.path() == crate::dashboard::PREFIX && state.dashboard.is_some() {
        let mut r = plain(StatusCode::MOVED_PERMANENTLY);
        r.headers_mut().insert(header::LOCATION, HeaderValue::from_static("/_/"));
        return r;
    }
    if let Some((service, rest)) = services::find(&state.services, uri.path()) {
        return service.serve(state, req, rest, client).await;
    }
    match uri.path() {
        "/rowgate/metrics" if matches!(*req.method(), http::Method::GET | http::Method::HEAD) => {
            metrics(state)
        }
        path if state.config.openapi.docs_enabled
            && (path == docs::PATH || path.starts_with(&format!("{}/", docs::PATH))) =>
        {
            let root = format!("{}/", state.config.api_prefix.trim_end_matches('/'));
            docs::serve(path, req.method(), req.headers(), &root)
        }
        "/rowgate/apikey" if matches!(*req.method(), http::Method::GET | http::Method::HEAD) => {
            identify::describe_api_key(state, req.headers()).await.unwrap_or_else(|e| error_response(&e))
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
                    .server
                    .trace_header
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
    crate::error::disk::render_metrics(&mut out);
    crate::webhooks::render_metrics(&mut out);
    crate::cron::render_metrics(&mut out);
    // PostgREST's metrics, under its names.
    state.backend.render_metrics(&mut out);
    state.schema.render_metrics(&mut out);
    state.auth.render_metrics(&mut out);
    for service in &state.services {
        service.render_metrics(&mut out);
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
