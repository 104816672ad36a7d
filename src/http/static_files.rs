//! Static files (`static-dir`), as PocketBase's `pb_public`: GET and HEAD of the files under a
//! directory, `index.html` for a directory, a Content-Type by extension, a strong ETag from
//! the file's size and modification time with `If-None-Match` → 304, and single byte ranges
//! (`Range: bytes=...` → 206, 416 when unsatisfiable). A file's size and modification time are
//! looked up at most once a second per path, and small files are kept in memory while those
//! stay the same: a file changed on disk is served as changed within a second.

use std::path::{Path, PathBuf};

use bytes::Bytes;
use http::{header, HeaderMap, HeaderValue, Method, Response, StatusCode};

use super::Body;

/// How long a file's size and modification time are trusted before they are looked at
/// again: a file changed on disk is served as changed within this time.
const REVALIDATE: std::time::Duration = std::time::Duration::from_secs(1);

/// Files up to this size are kept in memory.
const CACHED_FILE: u64 = 256 * 1024;

/// The memory the cached files may take; past it the cache starts over.
const CACHE_BYTES: u64 = 64 * 1024 * 1024;

/// A file as served: what its headers say, and its contents when small.
#[derive(Clone)]
struct File {
    dir: PathBuf,
    path: PathBuf,
    len: u64,
    modified: u128,
    etag: HeaderValue,
    content_type: &'static str,
    contents: Option<Bytes>,
    checked: std::time::Instant,
}

/// Files served lately, by request path (under their directory), and their contents' size.
#[derive(Default)]
struct Files {
    by_path: std::collections::HashMap<String, File>,
    bytes: u64,
}

fn files() -> &'static std::sync::Mutex<Files> {
    static FILES: std::sync::OnceLock<std::sync::Mutex<Files>> = std::sync::OnceLock::new();
    FILES.get_or_init(Default::default)
}

/// Answers `method` on `rel` (the request path after the static prefix, still
/// percent-encoded) from `dir`.
pub async fn serve(dir: &Path, rel: &str, method: &Method, headers: &HeaderMap) -> Response<Body> {
    if !matches!(*method, Method::GET | Method::HEAD) {
        let mut r = status(StatusCode::METHOD_NOT_ALLOWED);
        r.headers_mut().insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
        return r;
    }
    let fresh = {
        let files = files().lock().unwrap_or_else(|e| e.into_inner());
        files.by_path.get(rel).filter(|f| f.dir == dir && f.checked.elapsed() < REVALIDATE).cloned()
    };
    let file = match fresh {
        Some(f) => f,
        None => match look_up(dir, rel).await {
            Some(f) => f,
            None => return status(StatusCode::NOT_FOUND),
        },
    };
    let etag = file.etag.to_str().unwrap_or_default();
    let matches = |v: &HeaderValue| {
        v.to_str().is_ok_and(|list| {
            list.split(',').any(|t| t.trim() == "*" || t.trim().trim_start_matches("W/") == etag)
        })
    };
    let len = file.len;
    let mut base = Response::new(Body::default());
    base.headers_mut().insert(header::ETAG, file.etag.clone());
    base.headers_mut().insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    if headers.get(header::IF_NONE_MATCH).is_some_and(matches) {
        *base.status_mut() = StatusCode::NOT_MODIFIED;
        return base;
    }
    base.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(file.content_type));
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
        match &file.contents {
            Some(b) => Some(b.clone()),
            None => match tokio::fs::read(&file.path).await {
                Ok(b) => Some(Bytes::from(b)),
                Err(_) => return status(StatusCode::NOT_FOUND),
            },
        }
    };
    match range {
        Some(Some((first, last))) => {
            *base.status_mut() = StatusCode::PARTIAL_CONTENT;
            let cr = format!("bytes {first}-{last}/{len}");
            base.headers_mut().insert(header::CONTENT_RANGE, HeaderValue::from_str(&cr).expect("digits"));
            if let Some(b) = body {
                let slice = if (last as usize) < b.len() {
                    b.slice(first as usize..=last as usize)
                } else {
                    Bytes::new()
                };
                *base.body_mut() = Body::from(slice);
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
                *base.body_mut() = Body::from(b);
            }
        }
    }
    base
}

/// Finds the file `rel` names (a directory's `index.html`) and remembers it, with its contents
/// when small (read again only when its size or modification time changed).
async fn look_up(dir: &Path, rel: &str) -> Option<File> {
    let mut path = resolve(dir, rel)?;
    // A stat is a cached inode lookup: done in place, not on the blocking pool.
    let mut meta = std::fs::metadata(&path).ok()?;
    if meta.is_dir() {
        path.push("index.html");
        meta = std::fs::metadata(&path).ok()?;
    }
    if !meta.is_file() {
        return None;
    }
    let modified = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos());
    let len = meta.len();
    let known = {
        let files = files().lock().unwrap_or_else(|e| e.into_inner());
        files
            .by_path
            .get(rel)
            .filter(|f| f.dir == dir && f.path == path && (f.len, f.modified) == (len, modified))
            .cloned()
    };
    let contents = match known.and_then(|f| f.contents) {
        Some(c) => Some(c),
        None if len <= CACHED_FILE => {
            let bytes = Bytes::from(tokio::fs::read(&path).await.ok()?);
            (bytes.len() as u64 == len).then_some(bytes)
        }
        None => None,
    };
    let file = File {
        dir: dir.to_owned(),
        etag: HeaderValue::from_str(&format!("\"{len:x}-{modified:x}\"")).expect("hex and quotes"),
        content_type: content_type(&path),
        path,
        len,
        modified,
        contents,
        checked: std::time::Instant::now(),
    };
    let cached = file.contents.as_ref().map_or(0, |c| c.len() as u64);
    let mut files = files().lock().unwrap_or_else(|e| e.into_inner());
    if files.bytes + cached > CACHE_BYTES {
        *files = Files::default();
    }
    if let Some(old) = files.by_path.insert(rel.to_owned(), file.clone()) {
        files.bytes -= old.contents.map_or(0, |c| c.len() as u64);
    }
    files.bytes += cached;
    Some(file)
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
