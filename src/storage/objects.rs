//! `/object` routes: upload, download (authenticated and public), info, move, copy,
//! delete; and the headers an object is sent with.

use std::sync::Arc;

use http::request::Parts;
use http::{header, HeaderMap, HeaderValue, Response, StatusCode};
use hyper::body::Incoming;
use serde::Deserialize;
use serde_json::{json, Value};

use super::error::StorageError;
use super::store::{ObjectRow, PutObject, Who};
use super::upload::{self, mime_allowed, Upload};
use super::{answer, message, valid_bucket, valid_key, Caller, Storage};
use crate::response::Body;

/// `POST /object/move` and `/object/copy`'s body.
#[derive(Debug, Deserialize)]
pub struct MoveBody {
    #[serde(rename = "bucketId")]
    bucket_id: Option<String>,
    #[serde(rename = "sourceKey")]
    source_key: Option<String>,
    #[serde(rename = "destinationKey")]
    destination_key: Option<String>,
    #[serde(default, rename = "destinationBucket")]
    destination_bucket: Option<String>,
}

/// `DELETE /object/:bucket`'s body.
#[derive(Debug, Deserialize)]
pub struct DeleteBody {
    prefixes: Option<Vec<String>>,
}

/// A bucket and a key.
type Place = (String, String);

/// An object's JSON, as delete and copy answer with it.
fn object_json(o: &ObjectRow) -> Value {
    json!({
        "name": o.name,
        "bucket_id": o.bucket_id,
        "owner": o.owner.clone().unwrap_or_default(),
        "owner_id": o.owner_id,
        "version": o.version,
        "id": o.id,
        "updated_at": o.updated_at,
        "created_at": o.created_at,
        "last_accessed_at": o.last_accessed_at,
        "metadata": o.metadata.as_deref().and_then(|m| serde_json::from_str::<Value>(m).ok()),
        "user_metadata": o.user_metadata.as_deref().and_then(|m| serde_json::from_str::<Value>(m).ok()),
    })
}

pub(super) fn meta(o: &ObjectRow) -> Value {
    o.metadata.as_deref().and_then(|m| serde_json::from_str(m).ok()).unwrap_or(Value::Null)
}

impl Storage {
    /// The bucket as the server sees it: its limits apply to every upload.
    pub(super) async fn bucket_settings(
        &self,
        bucket: &str,
    ) -> Result<Arc<super::store::Bucket>, StorageError> {
        self.store.bucket(None, bucket.to_owned()).await?.ok_or_else(StorageError::no_such_bucket)
    }

    /// Receives an upload for `bucket` within its limits.
    pub(super) async fn receive(
        &self,
        bucket: &super::store::Bucket,
        headers: &HeaderMap,
        body: Incoming,
    ) -> Result<Upload, StorageError> {
        let limit = bucket
            .file_size_limit
            .map_or(self.file_size_limit, |l| (l.max(0) as u64).min(self.file_size_limit));
        let allowed = bucket.allowed_mime_types.clone();
        let chunks = upload::chunks(body, self.idle);
        upload::receive(&self.files, headers, chunks, limit, move |m| mime_allowed(allowed.as_deref(), m))
            .await
    }

    /// Whether `who` may write `bucket/key` (replacing an object of that name if `upsert`),
    /// found by making the write and rolling it back: before an upload's bytes are taken, an
    /// upload URL is signed or bytes are copied, so a refused caller costs no disk.
    pub(super) async fn may_put(
        &self,
        who: &Who,
        bucket: &str,
        key: &str,
        upsert: bool,
    ) -> Result<(), StorageError> {
        let trial = PutObject {
            id: crate::uuid_v4(),
            bucket_id: bucket.to_owned(),
            name: key.to_owned(),
            owner_id: who.sub.clone(),
            metadata: "{}".to_owned(),
            user_metadata: None,
            version: String::new(),
            upsert,
            trial: true,
        };
        self.store.put_object(Some(who.clone()), trial).await.map(drop)
    }

    /// Keeps an upload's bytes as a new version and writes its row (as `who`, or as the server);
    /// the bytes it replaced go once the row is committed, the new ones if it is not.
    pub(super) async fn store_upload(
        &self,
        who: Option<Who>,
        owner_id: Option<String>,
        bucket: &str,
        key: &str,
        upload: Upload,
        upsert: bool,
    ) -> Result<String, StorageError> {
        let version = upload.received.version.clone();
        let size = upload.received.size;
        let metadata = json!({
            "eTag": format!("\"{}\"", version.replace('-', "")),
            "size": size,
            "mimetype": upload.mime,
            "cacheControl": upload.cache_control,
            "lastModified": super::time::iso(std::time::SystemTime::now()),
            "contentLength": size,
            "httpStatusCode": 200,
        });
        upload.received.keep().await.map_err(|e| StorageError::bytes_unwritable(&e))?;
        let put = PutObject {
            id: crate::uuid_v4(),
            bucket_id: bucket.to_owned(),
            name: key.to_owned(),
            owner_id,
            metadata: metadata.to_string(),
            user_metadata: upload.user_metadata,
            version: version.clone(),
            upsert,
            trial: false,
        };
        match self.store.put_object(who, put).await {
            Ok(put) => {
                self.files.remove(put.replaced).await;
                Ok(put.id)
            }
            Err(e) => {
                self.files.remove([version]).await;
                Err(e)
            }
        }
    }

    pub(super) async fn upload(
        &self,
        who: Who,
        headers: &HeaderMap,
        body: Incoming,
        bucket: &str,
        key: &str,
        upsert: bool,
    ) -> Result<Response<Body>, StorageError> {
        let settings = self.bucket_settings(bucket).await?;
        self.may_put(&who, bucket, key, upsert).await?;
        let upload = self.receive(&settings, headers, body).await?;
        let owner = who.sub.clone();
        let id = self.store_upload(Some(who), owner, bucket, key, upload, upsert).await?;
        Ok(answer(StatusCode::OK, &json!({ "Id": id, "Key": format!("{bucket}/{key}") })))
    }

    /// The object a download or info request names: as the caller for an authenticated
    /// route of a private bucket; as the server for a public bucket.
    pub(super) async fn readable(
        &self,
        caller: Caller,
        public: bool,
        bucket: &str,
        key: &str,
    ) -> Result<Arc<ObjectRow>, StorageError> {
        let settings = self.store.bucket(None, bucket.to_owned()).await?;
        let found = match settings {
            Some(b) if b.public && (public || caller.is_err()) => {
                self.store.object(None, bucket.to_owned(), key.to_owned()).await?
            }
            _ if public => return Err(StorageError::no_such_bucket()),
            None => return Err(StorageError::no_such_bucket()),
            Some(_) => self.store.object(Some(caller?), bucket.to_owned(), key.to_owned()).await?,
        };
        found.ok_or_else(StorageError::no_such_key)
    }

    pub(super) async fn download(
        &self,
        parts: &Parts,
        caller: Caller,
        public: bool,
        bucket: &str,
        key: &str,
    ) -> Result<Response<Body>, StorageError> {
        let object = self.readable(caller, public, bucket, key).await?;
        self.send(parts, &object, None).await
    }

    /// An object's bytes with its headers: 304 for a current copy, 206 for a range.
    pub(super) async fn send(
        &self,
        parts: &Parts,
        object: &ObjectRow,
        expires: Option<u64>,
    ) -> Result<Response<Body>, StorageError> {
        let m = meta(object);
        let version = object.version.as_deref().ok_or_else(StorageError::bytes_missing)?;
        let blob = self.files.blob(version).await.map_err(StorageError::bytes_unreadable)?;
        let len = blob.size();
        let etag = m["eTag"].as_str().unwrap_or_default().to_owned();
        let mime = m["mimetype"].as_str().unwrap_or("application/octet-stream");
        let mut r = Response::new(Body::default());
        r.headers_mut().insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
        if describe(&mut r, parts, Stamp::from_meta(&m), mime, &etag, expires) {
            return Ok(r);
        }
        let range = parts.headers.get(header::RANGE).and_then(|v| v.to_str().ok());
        let (start, count) = match range.and_then(|v| crate::response::byte_range(v, len)) {
            Some(Some((first, last))) => {
                *r.status_mut() = StatusCode::PARTIAL_CONTENT;
                r.headers_mut().insert(header::CONTENT_RANGE, value(&format!("bytes {first}-{last}/{len}")));
                (first, last - first + 1)
            }
            Some(None) => return Err(StorageError::invalid_range()),
            None => (0, len),
        };
        if parts.method == http::Method::HEAD {
            r.headers_mut().insert(header::CONTENT_LENGTH, value(&count.to_string()));
            return Ok(r);
        }
        *r.body_mut() =
            self.files.body(version, blob, start, count).await.map_err(StorageError::bytes_unreadable)?;
        Ok(r)
    }

    pub(super) async fn info(
        &self,
        caller: Caller,
        public: bool,
        bucket: &str,
        key: &str,
    ) -> Result<Response<Body>, StorageError> {
        let o = self.readable(caller, public, bucket, key).await?;
        let m = meta(&o);
        Ok(answer(
            StatusCode::OK,
            &json!({
                "id": o.id,
                "name": o.name,
                "version": o.version,
                "bucket_id": o.bucket_id,
                "size": m["size"],
                "content_type": m["mimetype"],
                "cache_control": m["cacheControl"],
                "etag": m["eTag"],
                "metadata": o.user_metadata.as_deref().and_then(|u| serde_json::from_str::<Value>(u).ok()).unwrap_or(json!({})),
                "last_modified": o.updated_at,
                "created_at": o.created_at,
            }),
        ))
    }

    /// The source and destination of a move or copy, checked.
    fn endpoints(body: MoveBody) -> Result<(Place, Place), StorageError> {
        let missing =
            |f: &str| StorageError::invalid_request(format!("body must have required property '{f}'"));
        let bucket = body.bucket_id.ok_or_else(|| missing("bucketId"))?;
        let source = body.source_key.ok_or_else(|| missing("sourceKey"))?;
        let destination = body.destination_key.ok_or_else(|| missing("destinationKey"))?;
        let to_bucket = body.destination_bucket.unwrap_or_else(|| bucket.clone());
        valid_bucket(&bucket)?;
        valid_bucket(&to_bucket)?;
        valid_key(&source)?;
        valid_key(&destination)?;
        Ok(((bucket, source), (to_bucket, destination)))
    }

    pub(super) async fn move_object(&self, who: Who, body: MoveBody) -> Result<Response<Body>, StorageError> {
        let (from, to) = Self::endpoints(body)?;
        if from.0 != to.0 {
            // Into another bucket: within its limits, as an upload there would be.
            let target = self.bucket_settings(&to.0).await?;
            let source = self.store.object(Some(who.clone()), from.0.clone(), from.1.clone()).await?;
            let source = source.ok_or_else(StorageError::no_such_key)?;
            fits(&target, &meta(&source))?;
        }
        match self.store.move_object(who, from, to).await {
            Ok(true) => Ok(message("Successfully moved")),
            Ok(false) => Err(StorageError::no_such_key()),
            Err(e) if e.code == "ResourceAlreadyExists" => Err(StorageError::resource_exists()),
            Err(e) => Err(e),
        }
    }

    pub(super) async fn copy_object(
        &self,
        who: Who,
        headers: &HeaderMap,
        body: MoveBody,
    ) -> Result<Response<Body>, StorageError> {
        let (from, to) = Self::endpoints(body)?;
        let upsert = super::upsert_asked(headers);
        let source = self.store.object(Some(who.clone()), from.0.clone(), from.1.clone()).await?;
        let source = source.ok_or_else(StorageError::no_such_key)?;
        let target = self.bucket_settings(&to.0).await?;
        let m = meta(&source);
        fits(&target, &m)?;
        self.may_put(&who, &to.0, &to.1, upsert).await?;
        let old_version = source.version.as_deref().ok_or_else(StorageError::bytes_missing)?;
        let version = crate::uuid_v4();
        self.files.duplicate(old_version, &version).await.map_err(StorageError::bytes_unreadable)?;
        let mut metadata = m.clone();
        metadata["eTag"] = json!(format!("\"{}\"", version.replace('-', "")));
        metadata["lastModified"] = json!(super::time::iso(std::time::SystemTime::now()));
        let put = PutObject {
            id: crate::uuid_v4(),
            bucket_id: to.0.clone(),
            name: to.1.clone(),
            owner_id: who.sub.clone(),
            metadata: metadata.to_string(),
            user_metadata: source.user_metadata.clone(),
            version: version.clone(),
            upsert,
            trial: false,
        };
        match self.store.put_object(Some(who), put).await {
            Ok(put) => {
                self.files.remove(put.replaced).await;
                Ok(answer(StatusCode::OK, &json!({ "Id": put.id, "Key": format!("{}/{}", to.0, to.1) })))
            }
            Err(e) => {
                self.files.remove([version]).await;
                Err(e)
            }
        }
    }

    pub(super) async fn delete_one(
        &self,
        who: Who,
        bucket: &str,
        key: &str,
    ) -> Result<Response<Body>, StorageError> {
        // One answer for an object that is not there and one the caller may not delete (or
        // see): which of the two it is, is not the caller's to learn.
        let deleted = self.store.delete_objects(who, bucket.to_owned(), vec![key.to_owned()]).await?;
        if deleted.is_empty() {
            return Err(StorageError::no_such_key());
        }
        self.files.remove(deleted.into_iter().filter_map(|o| o.version)).await;
        Ok(message("Successfully deleted"))
    }

    pub(super) async fn delete_many(
        &self,
        who: Who,
        bucket: &str,
        body: DeleteBody,
    ) -> Result<Response<Body>, StorageError> {
        valid_bucket(bucket)?;
        let names = body
            .prefixes
            .filter(|p| !p.is_empty())
            .ok_or_else(|| StorageError::invalid_request("body/prefixes must NOT have fewer than 1 items"))?;
        if names.len() > 1000 {
            return Err(StorageError::invalid_request(
                "Bulk object requests are limited to 1000 objects per request.",
            ));
        }
        let deleted = self.store.delete_objects(who, bucket.to_owned(), names).await?;
        let body = Value::Array(deleted.iter().map(object_json).collect());
        self.files.remove(deleted.into_iter().filter_map(|o| o.version)).await;
        Ok(answer(StatusCode::OK, &body))
    }
}

/// Whether an object of metadata `m` may be in `bucket`: its media type and size within the
/// bucket's limits.
fn fits(bucket: &super::store::Bucket, m: &Value) -> Result<(), StorageError> {
    let mime = m["mimetype"].as_str().unwrap_or("application/octet-stream");
    if !mime_allowed(bucket.allowed_mime_types.as_deref(), mime) {
        return Err(StorageError::mime_not_allowed(mime));
    }
    let size = m["size"].as_u64().unwrap_or(0);
    if bucket.file_size_limit.is_some_and(|l| size > l.max(0) as u64) {
        return Err(StorageError::too_large());
    }
    Ok(())
}

/// What the headers of an object's answer take from its metadata.
#[derive(Debug, Default, Deserialize)]
pub(super) struct Stamp<'a> {
    #[serde(rename = "lastModified", borrow, default)]
    pub last_modified: Option<std::borrow::Cow<'a, str>>,
    #[serde(rename = "cacheControl", borrow, default)]
    pub cache_control: Option<std::borrow::Cow<'a, str>>,
}

impl<'a> Stamp<'a> {
    /// The stamp in an object's metadata (none if it cannot be read).
    pub(super) fn of(o: &'a ObjectRow) -> Stamp<'a> {
        o.metadata.as_deref().and_then(|m| serde_json::from_str(m).ok()).unwrap_or_default()
    }

    /// The stamp in metadata already read (as [`meta`] gives it), not read again.
    fn from_meta(m: &'a Value) -> Stamp<'a> {
        let field = |k: &str| m[k].as_str().map(std::borrow::Cow::Borrowed);
        Stamp { last_modified: field("lastModified"), cache_control: field("cacheControl") }
    }
}

/// Sets the headers an object's bytes (or a rendering of them) are sent with: its type, tag,
/// date, caching (`Expires` through a signed URL), and `Content-Disposition` for `?download=`.
/// True when the client's copy is current: the answer is then a bodiless 304.
pub(super) fn describe(
    r: &mut Response<Body>,
    parts: &Parts,
    stamp: Stamp<'_>,
    mime: &str,
    etag: &str,
    expires: Option<u64>,
) -> bool {
    let h = r.headers_mut();
    // What someone uploaded must never run as this origin's script: a page is sent as text, a
    // type that is no valid media type as bytes, the browser may not guess another, and only a
    // type no browser runs anything of is shown inline — any other is a download, and in a
    // sandbox with nothing to load should one be opened anyway.
    let html = mime.get(..9).is_some_and(|m| m.eq_ignore_ascii_case("text/html"));
    let mime = match (html, super::upload::valid_mime(mime)) {
        (true, _) => "text/plain",
        (false, true) => mime,
        (false, false) => "application/octet-stream",
    };
    h.insert(header::CONTENT_TYPE, value(mime));
    h.insert("x-content-type-options", HeaderValue::from_static("nosniff"));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("default-src 'none'; style-src 'unsafe-inline'; sandbox"),
    );
    if !inert(mime) {
        h.insert(header::CONTENT_DISPOSITION, HeaderValue::from_static("attachment"));
    }
    h.insert("x-robots-tag", HeaderValue::from_static("none"));
    if !etag.is_empty() {
        h.insert(header::ETAG, value(etag));
    }
    if let Some(at) = stamp.last_modified.as_deref().and_then(super::time::parse_iso) {
        h.insert(header::LAST_MODIFIED, value(&httpdate::fmt_http_date(at)));
    }
    match expires {
        Some(exp) => {
            let at = std::time::UNIX_EPOCH + std::time::Duration::from_secs(exp);
            h.insert(header::EXPIRES, value(&httpdate::fmt_http_date(at)));
        }
        None => {
            if let Some(cc) = stamp.cache_control.as_deref() {
                h.insert(header::CACHE_CONTROL, value(cc));
            }
        }
    }
    if let Some(name) = super::query_param(parts, "download") {
        let disposition = match name.is_empty() {
            true => "attachment;".to_owned(),
            false => {
                let encoded = percent_encoding::utf8_percent_encode(&name, URI_COMPONENT);
                format!("attachment; filename={encoded}; filename*=UTF-8''{encoded}")
            }
        };
        h.insert(header::CONTENT_DISPOSITION, value(&disposition));
    }
    let not_modified =
        parts.headers.get(header::IF_NONE_MATCH).and_then(|v| v.to_str().ok()).is_some_and(|v| {
            v.split(',').any(|t| t.trim() == "*" || t.trim().trim_start_matches("W/") == etag)
        });
    if not_modified && !etag.is_empty() {
        *r.status_mut() = StatusCode::NOT_MODIFIED;
        return true;
    }
    false
}

/// What JavaScript's `encodeURIComponent` escapes (Supabase encodes a download's name with it):
/// everything but letters, digits and `-_.!~*'()`.
const URI_COMPONENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'!')
    .remove(b'~')
    .remove(b'*')
    .remove(b'\'')
    .remove(b'(')
    .remove(b')');

/// Whether a browser shows `mime` without running anything of it: images but SVG, sound,
/// video, fonts, plain text, CSV and JSON. Anything else (SVG, XHTML, XML, PDF, scripts) may
/// carry script and is sent as a download.
fn inert(mime: &str) -> bool {
    let essence = mime.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    let (kind, sub) = essence.split_once('/').unwrap_or((&essence, ""));
    match kind {
        "image" => !sub.contains("svg") && !sub.contains("xml"),
        "audio" | "video" | "font" => true,
        "text" => matches!(sub, "plain" | "csv"),
        "application" => matches!(sub, "json" | "octet-stream"),
        _ => false,
    }
}

pub(super) fn value(text: &str) -> HeaderValue {
    HeaderValue::from_str(text).unwrap_or(HeaderValue::from_static(""))
}
