//! The response cache around the pipeline: a GET or HEAD answer is looked up by its key once
//! the caller is known, before the request is even parsed; a read's answer is offered to the
//! cache after the response stage. Answers say which happened (`X-Cache: hit|miss|bypass`).

use std::sync::Arc;

use bytes::Bytes;
use http::request::Parts;
use http::{header, HeaderName, HeaderValue, Response};

use super::AppState;
use crate::auth::Principal;
use crate::backend::Current;
use crate::cache::{Deps, ResponseCache};
use crate::config::Config;
use crate::plan::ReadPlan;
use crate::response::Body;
use crate::schema::SchemaCache;

/// `X-Cache: hit|miss|bypass`, with the response cache on.
const X_CACHE: HeaderName = HeaderName::from_static("x-cache");

/// What a look-up found.
pub enum Lookup {
    /// The cached answer.
    Hit(Response<Body>),
    /// Nothing current: the answer may be stored once computed.
    Miss(Missed),
    /// No look-up (the cache is off, not current, or the method is not GET or HEAD).
    Skipped,
}

/// A request the cache had no current answer for: its key, and the change position taken
/// before its schema snapshot (a reload between the two flushes the cache after this
/// position, so an answer planned on the old snapshot is never stored as current).
pub struct Missed {
    cache: Arc<ResponseCache>,
    key: Bytes,
    start: u64,
    /// The WAL position that covers every change the cache had counted at `start`, where its
    /// feed gives positions: a replica that has replayed it answers as the primary would.
    applied: Option<u64>,
}

/// A read the cache may keep: where, under which key, and what it depends on.
pub struct Cacheable {
    missed: Missed,
    deps: Deps,
}

impl Cacheable {
    /// Where the answer may be read so that it is current when stored.
    pub fn current(&self) -> Current {
        self.missed.applied.map_or(Current::Primary, Current::Replayed)
    }
}

/// Looks the request up in the response cache.
pub async fn lookup(state: &AppState, parts: &Parts, principal: &Principal) -> Lookup {
    let get = matches!(parts.method, http::Method::GET | http::Method::HEAD);
    let Some(cache) = state.cache.as_ref().filter(|_| get && !state.backend.calls_pre_request()) else {
        return Lookup::Skipped;
    };
    state.backend.sync_cache(cache).await;
    let start = cache.changes.position();
    // After `start`: the feed records its position before the changes it covers.
    let applied = cache.changes.applied();
    let key = cache.key(&parts.method, &parts.uri, &parts.headers, &principal.role, &principal.claims);
    match cache.lookup(&key) {
        crate::cache::Lookup::Hit(entry) => {
            let mut r = Response::new(Body::from(entry.body.clone()));
            *r.status_mut() = entry.status;
            *r.headers_mut() = entry.headers.clone();
            Lookup::Hit(r)
        }
        crate::cache::Lookup::Miss => Lookup::Miss(Missed { cache: cache.clone(), key, start, applied }),
        crate::cache::Lookup::Bypass => Lookup::Skipped,
    }
}

/// Whether a read missed in the cache may be stored, and with what.
pub fn cacheable(
    missed: Option<Missed>,
    route: &str,
    plan: &ReadPlan,
    schema: &SchemaCache,
) -> Option<Cacheable> {
    let missed = missed.filter(|m| m.cache.route_enabled(route))?;
    let deps = crate::cache::plan_deps(plan, schema)?;
    Some(Cacheable { missed, deps })
}

/// A read's answer with the route's `Cache-Control`, stored in the response cache when it may
/// be, and marked `X-Cache: miss` (stored) or `bypass` (not).
pub fn remember(
    state: &AppState,
    route: &str,
    cacheable: Option<Cacheable>,
    mut r: Response<Body>,
) -> Response<Body> {
    let success = r.status().is_success();
    // One that SQL set (`response.headers`) stands.
    let set_by_sql = r.headers().contains_key(header::CACHE_CONTROL);
    if let Some(v) = cache_control(&state.config, route).filter(|_| success && !set_by_sql) {
        r.headers_mut().insert(header::CACHE_CONTROL, v.clone());
    }
    match cacheable {
        Some(Cacheable { missed: Missed { cache, key, start, .. }, deps }) if success => {
            let bytes = r.body().bytes().cloned().unwrap_or_default();
            // Stored as a hit will be answered, so a hit costs one header map clone.
            let mut headers = r.headers().clone();
            headers.insert(X_CACHE, HeaderValue::from_static("hit"));
            cache.store(key, deps, start, r.status(), headers, bytes);
            r.headers_mut().insert(X_CACHE, HeaderValue::from_static("miss"));
        }
        _ if state.cache.is_some() => {
            r.headers_mut().insert(X_CACHE, HeaderValue::from_static("bypass"));
        }
        _ => {}
    }
    r
}

/// The configured `Cache-Control` of a route (`cache-control`), or of every route (`*`).
fn cache_control<'c>(config: &'c Config, route: &str) -> Option<&'c HeaderValue> {
    let find = |r: &str| config.cache.control.iter().find(|(name, _)| name == r).map(|(_, v)| v);
    find(route).or_else(|| find("*"))
}
