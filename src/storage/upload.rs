//! An upload's body, as storage-js sends it: a multipart form (`cacheControl`, `metadata`,
//! `contentType`, and one file field) or the raw bytes (`Content-Type`, `Cache-Control`,
//! `x-metadata` as base64 JSON), streamed into a new blob (see [`super::files`]) within the limit.

use std::time::Duration;

use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use http::{header, HeaderMap};
use hyper::body::Incoming;

use super::error::StorageError;
use super::files::{Files, ReceiveError, Received};

/// The largest user metadata accepted (as Supabase's).
const MAX_USER_METADATA: usize = 1024 * 1024;

/// The largest other text field of a multipart upload (`cacheControl`, `contentType`, a field
/// rowgate does not read): each is read into memory, so each is bounded.
const MAX_TEXT_FIELD: usize = 8 * 1024;

/// What a multipart body may hold beyond its file: the text fields at their bounds, 16 of them
/// at most, and the boundaries and part headers around them.
const MULTIPART_OVERHEAD: u64 = (MAX_USER_METADATA + 16 * MAX_TEXT_FIELD + 64 * 1024) as u64;

/// An upload, its bytes received.
#[derive(Debug)]
pub struct Upload {
    /// The bytes.
    pub received: Received,
    /// Their media type.
    pub mime: String,
    /// The `Cache-Control` to send them with.
    pub cache_control: String,
    /// The uploader's metadata, as JSON.
    pub user_metadata: Option<String>,
}

/// The data of `body`'s frames, each within `idle` of the one before (a big upload may take
/// long; a stalled one may not).
pub fn chunks(body: Incoming, idle: Duration) -> impl Stream<Item = Result<Bytes, String>> + Unpin + Send {
    let frames = http_body_util::BodyStream::new(body);
    Box::pin(futures_util::stream::unfold(Box::pin(frames), move |mut frames| async move {
        loop {
            match tokio::time::timeout(idle, frames.next()).await {
                Err(_) => return Some((Err("the body stalled".to_owned()), frames)),
                Ok(None) => return None,
                Ok(Some(Err(e))) => return Some((Err(e.to_string()), frames)),
                Ok(Some(Ok(frame))) => match frame.into_data() {
                    Ok(data) => return Some((Ok(data), frames)),
                    Err(_) => continue, // trailers
                },
            }
        }
    }))
}

/// Receives an upload of at most `limit` bytes whose media type `allowed` accepts.
pub async fn receive(
    files: &Files,
    headers: &HeaderMap,
    body: impl Stream<Item = Result<Bytes, String>> + Unpin + Send + 'static,
    limit: u64,
    allowed: impl Fn(&str) -> bool,
) -> Result<Upload, StorageError> {
    let content_type = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
    let declared = headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if is_multipart(content_type) {
        // A form without its boundary cannot be read: not a file of that media type either.
        let boundary = multer::parse_boundary(content_type)
            .map_err(|_| StorageError::invalid_request("The form could not be read: it names no boundary"))?;
        if declared.is_some_and(|n| n > limit.saturating_add(MULTIPART_OVERHEAD)) {
            return Err(StorageError::too_large());
        }
        return multipart(files, body, boundary, limit, allowed).await;
    }
    if declared.is_some_and(|n| n > limit) {
        return Err(StorageError::too_large());
    }
    let mime = match content_type.trim() {
        "" => "application/octet-stream".to_owned(),
        t => t.to_owned(),
    };
    if !valid_mime(&mime) || !allowed(&mime) {
        return Err(StorageError::mime_not_allowed(&mime));
    }
    let cache_control = headers
        .get(header::CACHE_CONTROL)
        .and_then(|v| v.to_str().ok())
        .map_or_else(|| "no-cache".to_owned(), str::to_owned);
    let user_metadata = match headers.get("x-metadata").and_then(|v| v.to_str().ok()) {
        Some(encoded) => Some(metadata_json(&base64_decode(encoded)?)?),
        None => None,
    };
    let received = files.receive(body.boxed(), limit).await.map_err(receive_error)?;
    Ok(Upload { received, mime, cache_control, user_metadata })
}

fn is_multipart(content_type: &str) -> bool {
    content_type.trim_start().to_ascii_lowercase().starts_with("multipart/form-data")
}

async fn multipart(
    files: &Files,
    body: impl Stream<Item = Result<Bytes, String>> + Unpin + Send + 'static,
    boundary: String,
    limit: u64,
    allowed: impl Fn(&str) -> bool,
) -> Result<Upload, StorageError> {
    // The whole body too, for a body of unknown length: the file's own limit is checked as it
    // is received, each text field's as it is read.
    let constraints = multer::Constraints::new()
        .size_limit(multer::SizeLimit::new().whole_stream(limit.saturating_add(MULTIPART_OVERHEAD)));
    let mut form = multer::Multipart::with_constraints(body, boundary, constraints);
    let (mut cache_control, mut content_type, mut user_metadata) = (None, None, None);
    let mut upload: Option<(Received, String)> = None;
    let mut fields = 0;
    while let Some(field) = form.next_field().await.map_err(form_error)? {
        fields += 1;
        if fields > 16 {
            return Err(StorageError::invalid_request("Too many form fields"));
        }
        let name = field.name().unwrap_or_default().to_owned();
        if field.file_name().is_some() || name.is_empty() || name == "file" {
            if upload.is_some() {
                return Err(StorageError::invalid_request("Only one file may be uploaded at a time"));
            }
            let mime = content_type
                .clone()
                .or_else(|| field.content_type().map(ToString::to_string))
                .unwrap_or_else(|| "application/octet-stream".to_owned());
            if !valid_mime(&mime) || !allowed(&mime) {
                return Err(StorageError::mime_not_allowed(&mime));
            }
            let data = field.map(|c| c.map_err(|e| e.to_string()));
            let received = files.receive(data.boxed(), limit).await.map_err(receive_error)?;
            upload = Some((received, mime));
            continue;
        }
        let bound = match name.as_str() {
            "metadata" | "userMetadata" => MAX_USER_METADATA,
            _ => MAX_TEXT_FIELD,
        };
        let text = text_field(field, bound).await?;
        match name.as_str() {
            "cacheControl" => cache_control = Some(format!("max-age={}", text.trim())),
            "contentType" => content_type = Some(text.trim().to_owned()),
            "metadata" | "userMetadata" => user_metadata = Some(metadata_json(text.as_bytes())?),
            _ => {}
        }
    }
    let Some((received, mime)) = upload else {
        return Err(StorageError::invalid_request("No content provided"));
    };
    Ok(Upload {
        received,
        mime,
        cache_control: cache_control.unwrap_or_else(|| "no-cache".into()),
        user_metadata,
    })
}

/// A text field's value, refused (413) as soon as it passes `bound` bytes, before the rest is read.
async fn text_field(mut field: multer::Field<'_>, bound: usize) -> Result<String, StorageError> {
    let mut bytes = Vec::new();
    while let Some(chunk) = field.chunk().await.map_err(form_error)? {
        if bytes.len() + chunk.len() > bound {
            return Err(StorageError::too_large());
        }
        bytes.extend_from_slice(&chunk);
    }
    String::from_utf8(bytes).map_err(|_| StorageError::invalid_request("A form field is not UTF-8"))
}

fn form_error(e: multer::Error) -> StorageError {
    match e {
        multer::Error::FieldSizeExceeded { .. } | multer::Error::StreamSizeExceeded { .. } => {
            StorageError::too_large()
        }
        other => StorageError::invalid_request(format!("The form could not be read: {other}")),
    }
}

fn receive_error(e: ReceiveError) -> StorageError {
    match e {
        ReceiveError::TooLarge => StorageError::too_large(),
        ReceiveError::Body(reason) => {
            StorageError::invalid_request(format!("The body could not be read: {reason}"))
        }
        ReceiveError::Io(e) => StorageError::bytes_unwritable(&e),
    }
}

fn base64_decode(text: &str) -> Result<Vec<u8>, StorageError> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD
        .decode(text.trim())
        .map_err(|_| StorageError::invalid_request("x-metadata is not base64"))
}

/// User metadata: a JSON object of at most [`MAX_USER_METADATA`] bytes, as compact JSON.
fn metadata_json(bytes: &[u8]) -> Result<String, StorageError> {
    if bytes.len() > MAX_USER_METADATA {
        return Err(StorageError::too_large());
    }
    match serde_json::from_slice::<serde_json::Value>(bytes) {
        Ok(v @ serde_json::Value::Object(_)) => Ok(v.to_string()),
        _ => Err(StorageError::invalid_request("metadata must be a JSON object")),
    }
}

/// Whether `mime` is a media type as HTTP writes one: `type/subtype` of token characters,
/// then parameters of visible characters (no control character, nothing past ASCII).
pub fn valid_mime(mime: &str) -> bool {
    let token = |s: &str| {
        !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
    };
    let (essence, params) = mime.split_once(';').unwrap_or((mime, ""));
    let Some((kind, sub)) = essence.trim().split_once('/') else { return false };
    token(kind)
        && token(sub)
        && params.bytes().all(|b| b == b'\t' || (b' '..=b'~').contains(&b))
        && mime.len() <= 255
}

/// Whether a bucket's `allowed_mime_types` accept `mime` (`image/*` any image; parameters such
/// as `charset` are not compared).
pub fn mime_allowed(allowed: Option<&[String]>, mime: &str) -> bool {
    let Some(allowed) = allowed.filter(|a| !a.is_empty()) else { return true };
    let essence = mime.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    allowed.iter().any(|a| {
        let a = a.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
        a == "*"
            || a == "*/*"
            || a == essence
            || a.strip_suffix("/*").is_some_and(|t| essence.split('/').next() == Some(t))
    })
}

#[cfg(test)]
mod tests {
    use super::mime_allowed;

    #[test]
    fn media_types_match_by_essence_or_wildcard() {
        let allowed = ["image/*".to_owned(), "text/plain".to_owned()];
        assert!(mime_allowed(Some(&allowed), "image/png"));
        assert!(mime_allowed(Some(&allowed), "text/plain;charset=UTF-8"));
        assert!(!mime_allowed(Some(&allowed), "application/json"));
        assert!(!mime_allowed(Some(&allowed), "imagex/png"));
        assert!(mime_allowed(None, "anything/at-all"));
    }

    #[test]
    fn media_types_are_http_s() {
        use super::valid_mime;
        assert!(valid_mime("image/png"));
        assert!(valid_mime("text/plain; charset=\"utf-8\""));
        assert!(valid_mime("application/vnd.api+json"));
        for bad in
            ["", "image", "image/", "/png", "text/plain\u{1}", "te xt/plain", "image/png; x=\u{7f}", "text/é"]
        {
            assert!(!valid_mime(bad), "{bad:?}");
        }
    }
}
