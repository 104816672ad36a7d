//! Static files (`static-dir`), as PocketBase's `pb_public`: GET and HEAD of the files under a
//! directory, `index.html` for a directory, a Content-Type by extension, a strong ETag from
//! the file's size and modification time with `If-None-Match` → 304, and single byte ranges
//! (`Range: bytes=...` → 206, 416 when unsatisfiable).

use std::path::{Path, PathBuf};

use bytes::Bytes;
use http::{header, HeaderMap, HeaderValue, Method, Response, StatusCode};

use super::Body;

/// Answers `method` on `rel` (the request path after the static prefix, still
/// percent-encoded) from `dir`.
pub async fn serve(dir: &Path, rel: &str, method: &Method, headers: &HeaderMap) -> Response<Body> {
    if !matches!(*method, Method::GET | Method::HEAD) {
        let mut r = status(StatusCode::METHOD_NOT_ALLOWED);
        r.headers_mut().insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
        return r;
    }
    let Some(mut path) = resolve(dir, rel) else { return status(StatusCode::NOT_FOUND) };
    let mut meta = match tokio::fs::metadata(&path).await {
        Ok(m) => m,
        Err(_) => return status(StatusCode::NOT_FOUND),
    };
    if meta.is_dir() {
        path.push("index.html");
        meta = match tokio::fs::metadata(&path).await {
            Ok(m) if m.is_file() => m,
            _ => return status(StatusCode::NOT_FOUND),
        };
    }
    if !meta.is_file() {
        return status(StatusCode::NOT_FOUND);
    }
    let modified = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos());
    let len = meta.len();
    let etag = format!("\"{len:x}-{modified:x}\"");
    let matches = |v: &HeaderValue| {
        v.to_str().is_ok_and(|list| {
            list.split(',').any(|t| t.trim() == "*" || t.trim().trim_start_matches("W/") == etag)
        })
    };
    let mut base = Response::new(Body::default());
    base.headers_mut().insert(header::ETAG, HeaderValue::from_str(&etag).expect("hex and quotes"));
    base.headers_mut().insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    if headers.get(header::IF_NONE_MATCH).is_some_and(matches) {
        *base.status_mut() = StatusCode::NOT_MODIFIED;
        return base;
    }
    base.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type(&path)));
    // A range applies unless If-Range names another version.
    let range = headers
        .get(header::RANGE)
        .filter(|_| *method == Method::GET)
        .filter(|_| headers.get(header::IF_RANGE).is_none_or(|v| v.to_str().is_ok_and(|t| t == etag)))
        .and_then(|v| v.to_str().ok())
        .and_then(|v| byte_range(v, len));
    let body = if *method == Method::HEAD {
        None
    } else {
        match tokio::fs::read(&path).await {
            Ok(b) => Some(b),
            Err(_) => return status(StatusCode::NOT_FOUND),
        }
    };
    match range {
        Some(Some((first, last))) => {
            *base.status_mut() = StatusCode::PARTIAL_CONTENT;
            let cr = format!("bytes {first}-{last}/{len}");
            base.headers_mut().insert(header::CONTENT_RANGE, HeaderValue::from_str(&cr).expect("digits"));
            if let Some(b) = body {
                let slice = b.get(first as usize..=last as usize).map(<[u8]>::to_vec).unwrap_or_default();
                *base.body_mut() = Body::from(Bytes::from(slice));
            }
        }
        Some(None) => {
            let mut r = status(StatusCode::RANGE_NOT_SATISFIABLE);
            let cr = format!("bytes */{len}");
            r.headers_mut().insert(header::CONTENT_RANGE, HeaderValue::from_str(&cr).expect("digits"));
            return r;
        }
        None => {
            if let Some(b) = body {
                *base.body_mut() = Body::from(Bytes::from(b));
            }
        }
    }
    base
}

/// The file `rel` names under `dir`, or `None` if it tries to leave it.
fn resolve(dir: &Path, rel: &str) -> Option<PathBuf> {
    let decoded = percent_encoding::percent_decode_str(rel).decode_utf8().ok()?;
    let mut path = dir.to_path_buf();
    for segment in decoded.split('/').filter(|s| !s.is_empty()) {
        if segment == "." || segment == ".." || segment.contains(['\\', '\0']) {
            return None;
        }
        path.push(segment);
    }
    Some(path)
}

/// A single byte range of a `len`-byte file: `None` when the header is not one (the whole
/// file is sent), `Some(None)` when it is unsatisfiable.
fn byte_range(header: &str, len: u64) -> Option<Option<(u64, u64)>> {
    let spec = header.trim().strip_prefix("bytes=")?;
    if spec.contains(',') {
        return None; // several ranges: the whole file is a valid answer
    }
    let (start, end) = spec.split_once('-')?;
    let (start, end) = (start.trim(), end.trim());
    let range = match (start.is_empty(), end.is_empty()) {
        (true, true) => return None,
        // The last n bytes.
        (true, false) => {
            let n: u64 = end.parse().ok()?;
            (n > 0 && len > 0).then(|| (len.saturating_sub(n), len - 1))
        }
        (false, _) => {
            let first: u64 = start.parse().ok()?;
            let last: u64 = if end.is_empty() { u64::MAX } else { end.parse().ok()? };
            (first < len && first <= last).then(|| (first, last.min(len - 1)))
        }
    };
    Some(range)
}

fn status(code: StatusCode) -> Response<Body> {
    let mut r = Response::new(Body::default());
    *r.status_mut() = code;
    r
}

/// The media type of a file by its extension.
fn content_type(path: &Path) -> &'static str {
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or_default().to_ascii_lowercase();
    match ext.as_str() {
        "html" | "htm" => "text/html; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "json" | "map" => "application/json",
        "txt" => "text/plain; charset=utf-8",
        "csv" => "text/csv; charset=utf-8",
        "xml" => "application/xml",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "avif" => "image/avif",
        "ico" => "image/x-icon",
        "wasm" => "application/wasm",
        "pdf" => "application/pdf",
        "woff" => "font/woff",
        "woff2" => "font/woff2",
        "ttf" => "font/ttf",
        "mp4" => "video/mp4",
        "webm" => "video/webm",
        "mp3" => "audio/mpeg",
        _ => "application/octet-stream",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_ranges() {
        assert_eq!(byte_range("bytes=0-3", 10), Some(Some((0, 3))));
        assert_eq!(byte_range("bytes=5-", 10), Some(Some((5, 9))));
        assert_eq!(byte_range("bytes=-4", 10), Some(Some((6, 9))));
        assert_eq!(byte_range("bytes=8-20", 10), Some(Some((8, 9))));
        assert_eq!(byte_range("bytes=10-", 10), Some(None));
        assert_eq!(byte_range("bytes=0-1,3-4", 10), None);
        assert_eq!(byte_range("items=0-1", 10), None);
    }

    #[test]
    fn paths_never_leave_the_directory() {
        let dir = Path::new("/srv/www");
        assert_eq!(resolve(dir, "/a/b.txt"), Some(PathBuf::from("/srv/www/a/b.txt")));
        assert_eq!(resolve(dir, "/a/../../etc/passwd"), None);
        assert_eq!(resolve(dir, "/%2e%2e/etc/passwd"), None);
        assert_eq!(resolve(dir, "/a%5c..%5cb"), None);
    }
}
