//! Supabase Storage's API at `/storage/v1`: buckets, objects, signed URLs — what storage-js
//! calls, with Supabase's shapes and errors. Rows live in the database behind
//! [`StorageStore`] (so its row-level security, or the access rules, decide); bytes live in
//! [`Files`] (under `storage-dir`, or in an S3-compatible bucket).
//!
//! `buckets.rs`, `objects.rs`, `list.rs`, `sign.rs` and `render.rs` answer the routes; `upload.rs` reads
//! an upload's body; `signed.rs` makes and checks signed URLs' tokens; `transform.rs` reads what a
//! transform asks for and `image.rs` does it.

mod buckets;
pub mod error;
pub mod files;
pub mod image;
mod list;
mod objects;
mod render;
mod sign;
pub mod signed;
pub mod store;
pub mod time;
pub mod transform;
pub mod upload;

use std::sync::Arc;
use std::time::Duration;

use http::request::Parts;
use http::{header, HeaderValue, Method, Response, StatusCode};
use hyper::body::Incoming;
use serde::de::DeserializeOwned;

use self::error::StorageError;
use self::files::Files;
use self::signed::Signer;
use self::store::{StorageStore, Who};
use crate::response::Body;

/// The storage service of a server.
pub struct Storage {
    store: Arc<dyn StorageStore>,
    files: Files,
    signer: Signer,
    /// `storage-file-size-limit`: the largest object any bucket takes.
    file_size_limit: u64,
    /// How long an upload's body may stall.
    idle: Duration,
    renderer: image::Renderer,
}

/// A request's caller: who it runs as, or why it cannot run as anyone.
pub type Caller = Result<Who, StorageError>;

impl Storage {
    /// The service on `store` and `files`, signing URLs with the HMAC `secret`.
    pub fn new(
        store: Arc<dyn StorageStore>,
        files: Files,
        secret: &[u8],
        file_size_limit: u64,
        idle: Duration,
        transform_cache: u64,
    ) -> Storage {
        let renderer = image::Renderer::new(transform_cache);
        Storage { store, files, signer: Signer::new(secret), file_size_limit, idle, renderer }
    }

    /// Sweeps, every hour, stored files no row names (an upload a crash cut short) once they are
    /// a day old.
    pub fn spawn_sweeper(self: &Arc<Self>) {
        let storage = Arc::clone(self);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(3600));
            loop {
                tick.tick().await;
                let store = storage.store.clone();
                let swept = storage
                    .files
                    .sweep(Duration::from_secs(24 * 3600), |batch| {
                        let store = store.clone();
                        async move { store.versions_in_use(batch).await.ok() }
                    })
                    .await;
                match swept {
                    Ok(0) => {}
                    Ok(n) => tracing::info!(files = n, "storage: files of interrupted uploads removed"),
                    Err(e) => tracing::warn!(error = %e, "storage: the sweep of storage-dir failed"),
                }
            }
        });
    }

    /// Storage's counters, in Prometheus text.
    pub fn render_metrics(&self, out: &mut String) {
        self.renderer.render_metrics(out);
    }

    /// Answers a request under `/storage/v1` (`path` is what follows it) from `client`.
    pub async fn handle(
        &self,
        parts: Parts,
        body: Incoming,
        path: &str,
        caller: Caller,
        client: std::net::IpAddr,
    ) -> Response<Body> {
        let method = parts.method.clone();
        match self.route(&parts, body, path, caller, client).await {
            Ok(r) => r,
            Err(e) if method == Method::HEAD => {
                // HEAD answers carry no body: the status must say it (storage-js's `exists`
                // reads 400 and 404 as "no such object").
                let mut r = Response::new(Body::default());
                *r.status_mut() = e.http;
                r
            }
            Err(e) => e.to_response(),
        }
    }

    async fn route(
        &self,
        parts: &Parts,
        body: Incoming,
        path: &str,
        caller: Caller,
        client: std::net::IpAddr,
    ) -> Result<Response<Body>, StorageError> {
        let segments: Vec<&str> = path.trim_start_matches('/').splitn(4, '/').collect();
        let m = &parts.method;
        let no_route = || StorageError::no_route(m, &format!("/{}", path.trim_start_matches('/')));
        match (m, segments.as_slice()) {
            (&Method::GET, ["bucket"] | ["bucket", ""]) => self.list_buckets(parts, caller?).await,
            (&Method::POST, ["bucket"] | ["bucket", ""]) => {
                self.create_bucket(caller?, json(body, self.idle).await?).await
            }
            (&Method::GET, ["bucket", id]) => self.get_bucket(caller?, id).await,
            (&Method::PUT, ["bucket", id]) => {
                self.update_bucket(caller?, id, json(body, self.idle).await?).await
            }
            (&Method::DELETE, ["bucket", id]) => self.delete_bucket(caller?, id).await,
            (&Method::POST, ["bucket", id, "empty"]) => self.empty_bucket(caller?, id).await,
            (&Method::POST, ["object", "list", bucket]) => {
                self.list(caller?, bucket, json(body, self.idle).await?).await
            }
            (&Method::POST, ["object", "list-v2", bucket]) => {
                self.list_v2(caller?, bucket, json(body, self.idle).await?).await
            }
            (&Method::POST, ["object", "move"]) => {
                self.move_object(caller?, json(body, self.idle).await?).await
            }
            (&Method::POST, ["object", "copy"]) => {
                self.copy_object(caller?, &parts.headers, json(body, self.idle).await?).await
            }
            (&Method::POST, ["object", "sign", bucket]) => {
                self.sign_many(caller?, bucket, json(body, self.idle).await?).await
            }
            (&Method::POST, ["object", "sign", bucket, key]) => {
                self.sign(caller?, bucket, &decode(key)?, json(body, self.idle).await?).await
            }
            (&Method::GET | &Method::HEAD, ["object", "sign", bucket, key]) => {
                self.signed_download(parts, bucket, &decode(key)?).await
            }
            (&Method::POST, ["object", "upload", "sign", rest]) => {
                let (bucket, key) = bucket_and_key(rest)?;
                self.sign_upload(caller?, &parts.headers, &bucket, &key).await
            }
            (&Method::PUT, ["object", "upload", "sign", rest]) => {
                let (bucket, key) = bucket_and_key(rest)?;
                self.signed_upload(parts, body, &bucket, &key).await
            }
            (&Method::GET, ["object", "info", "authenticated" | "public", ..])
            | (&Method::GET, ["object", "info", ..]) => {
                let (public, rest) = scoped(&segments[2..]);
                let (bucket, key) = bucket_and_key(&rest)?;
                self.info(caller, public, &bucket, &key).await
            }
            (&Method::GET | &Method::HEAD, ["object", ..]) => {
                let (public, rest) = scoped(&segments[1..]);
                let (bucket, key) = bucket_and_key(&rest)?;
                self.download(parts, caller, public, &bucket, &key).await
            }
            (&Method::POST | &Method::PUT, ["object", _, _, ..]) => {
                let (bucket, key) = bucket_and_key(&segments[1..].join("/"))?;
                let upsert = *m == Method::PUT || upsert_asked(&parts.headers);
                self.upload(caller?, &parts.headers, body, &bucket, &key, upsert).await
            }
            (&Method::DELETE, ["object", bucket]) => {
                self.delete_many(caller?, bucket, json(body, self.idle).await?).await
            }
            (&Method::DELETE, ["object", _, ..]) => {
                let (bucket, key) = bucket_and_key(&segments[1..].join("/"))?;
                self.delete_one(caller?, &bucket, &key).await
            }
            (&Method::GET | &Method::HEAD, ["render", "image", scope, rest]) => {
                self.render(parts, caller, client, scope, rest).await
            }
            _ => Err(no_route()),
        }
    }
}

/// `authenticated/...` and `public/...` prefixes: whether the route is public, and the rest.
fn scoped(segments: &[&str]) -> (bool, String) {
    match segments.first() {
        Some(&"public") => (true, segments[1..].join("/")),
        Some(&"authenticated") => (false, segments[1..].join("/")),
        _ => (false, segments.join("/")),
    }
}

/// `bucket/key...`: the bucket, checked, and the key, decoded and checked.
fn bucket_and_key(rest: &str) -> Result<(String, String), StorageError> {
    let (bucket, key) = rest.split_once('/').ok_or_else(|| StorageError::invalid_key(""))?;
    valid_bucket(bucket)?;
    Ok((bucket.to_owned(), decode(key)?))
}

/// A key from the URL: percent-decoded, and one of Supabase's (its characters; no `.` or `..`
/// segment, no empty one at the start).
fn decode(raw: &str) -> Result<String, StorageError> {
    let key = percent_encoding::percent_decode_str(raw)
        .decode_utf8()
        .map_err(|_| StorageError::invalid_key(raw))?
        .into_owned();
    valid_key(&key)?;
    Ok(key)
}

/// Supabase's object keys: `[A-Za-z0-9_/!.*'() &$=@;:+,?-]`, not empty; rowgate also refuses
/// `.` and `..` segments and a leading `/`, which the file backend of Supabase refuses too.
pub fn valid_key(key: &str) -> Result<(), StorageError> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || "_/!.*'() &$=@;:+,?-".contains(c);
    let dots = key.split('/').any(|s| s == "." || s == "..");
    if key.is_empty() || !key.chars().all(allowed) || dots || key.starts_with('/') || key.len() > 1024 {
        return Err(StorageError::invalid_key(key));
    }
    Ok(())
}

/// Supabase's bucket names: 1–100 of `[A-Za-z0-9_!.*'() &$=@;:+,?-]`, no surrounding space.
pub fn valid_bucket(name: &str) -> Result<(), StorageError> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || "_!.*'() &$=@;:+,?-".contains(c);
    if name.is_empty() || name.len() > 100 || !name.chars().all(allowed) || name.trim() != name {
        return Err(StorageError::invalid_bucket_name());
    }
    Ok(())
}

/// A JSON body of at most 1 MiB.
async fn json<T: DeserializeOwned>(body: Incoming, idle: Duration) -> Result<T, StorageError> {
    use futures_util::StreamExt;
    let mut chunks = upload::chunks(body, idle);
    let mut bytes = Vec::new();
    while let Some(chunk) = chunks.next().await {
        let chunk =
            chunk.map_err(|e| StorageError::invalid_request(format!("The body could not be read: {e}")))?;
        if bytes.len() + chunk.len() > 1024 * 1024 {
            return Err(StorageError::too_large());
        }
        bytes.extend_from_slice(&chunk);
    }
    let bytes = if bytes.iter().all(u8::is_ascii_whitespace) { b"{}".to_vec() } else { bytes };
    serde_json::from_slice(&bytes).map_err(|e| StorageError::invalid_request(format!("body {e}")))
}

/// Whether a request says `x-upsert: true`: replace an object that exists.
fn upsert_asked(headers: &http::HeaderMap) -> bool {
    headers.get("x-upsert").and_then(|v| v.to_str().ok()) == Some("true")
}

/// The query parameter `name` of a request, decoded, if it has one.
fn query_param(parts: &Parts, name: &str) -> Option<String> {
    form_urlencoded::parse(parts.uri.query().unwrap_or("").as_bytes())
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.into_owned())
}

/// A JSON answer.
fn answer(status: StatusCode, value: &serde_json::Value) -> Response<Body> {
    let mut r = Response::new(Body::from(value.to_string()));
    *r.status_mut() = status;
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json; charset=utf-8"));
    r
}

/// `{"message": ...}`.
fn message(text: &str) -> Response<Body> {
    answer(StatusCode::OK, &serde_json::json!({ "message": text }))
}
