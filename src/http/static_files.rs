//! Static files (`static-dir`), as PocketBase's `pb_public`: GET and HEAD of the files under a
//! directory, `index.html` for a directory, a Content-Type by extension, a strong ETag from
//! the file's size and modification time with `If-None-Match` → 304, and single byte ranges
//! (`Range: bytes=...` → 206, 416 when unsatisfiable). A file's size and modification time are
//! looked up at most once a second per file, and small files are kept in memory while those
//! stay the same: a file changed on disk is served as changed within a second.
//!
//! Never served, whatever the directory holds: dotfiles (`.well-known` aside), anything a
//! symbolic link leads to outside the directory, the SQLite database with its log and journal,
//! the access rules file and the configuration file (`--static-dir .` is safe).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use bytes::Bytes;
use http::{header, HeaderMap, HeaderValue, Method, Response, StatusCode};

use crate::config::{Config, SqliteTarget};
use crate::response::Body;

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
    path: PathBuf,
    len: u64,
    modified: u128,
    etag: HeaderValue,
    content_type: &'static str,
    contents: Option<Bytes>,
    checked: std::time::Instant,
}

/// The files served lately, by their path under the directory, and their contents' size.
#[derive(Default)]
struct Files {
    by_path: HashMap<String, File>,
    bytes: u64,
}

/// Files remembered at most: past it the cache starts over.
const CACHED_ENTRIES: usize = 10_000;

/// The files of `static-dir`, served under `static-prefix`.
pub struct StaticFiles {
    /// The directory, canonical: a file is served only if its own canonical path is under it,
    /// so no symbolic link leads out of it.
    dir: PathBuf,
    /// What the directory may hold but is never served: the SQLite database with its log and
    /// journal files, the access rules file, the configuration file.
    hidden: Vec<PathBuf>,
    /// Directories it may hold but never serves from: storage's `storage-dir`, whose files are
    /// objects only storage may answer for (under their rights, for as long as a URL is signed).
    hidden_dirs: Vec<PathBuf>,
    files: Mutex<Files>,
}

impl StaticFiles {
    /// The files of `config`'s `static-dir`, if it has one.
    pub fn new(config: &Config) -> Option<StaticFiles> {
        let dir = std::fs::canonicalize(config.static_dir.as_ref()?).ok()?;
        let mut hidden = Vec::new();
        if let Some(SqliteTarget::File(db)) = &config.db.sqlite {
            for suffix in ["", "-wal", "-shm", "-journal"] {
                let mut name = db.file_name().unwrap_or_default().to_owned();
                name.push(suffix);
                hidden.push(db.with_file_name(name));
            }
        }
        hidden.extend(config.db.rules.iter().chain(&config.config_file).cloned());
        // Named by where they are, whether they exist yet or not (a log file comes and goes).
        let hidden = hidden.iter().filter_map(|p| absolute(p)).collect();
        let hidden_dirs = match config.storage.enabled {
            true => absolute(&config.storage.dir).into_iter().collect(),
            false => Vec::new(),
        };
        Some(StaticFiles { dir, hidden, hidden_dirs, files: Mutex::new(Files::default()) })
    }

    /// Answers `method` on `rel` (the request path after the static prefix, still
    /// percent-encoded).
    pub async fn serve(&self, rel: &str, method: &Method, headers: &HeaderMap) -> Response<Body> {
        if !matches!(*method, Method::GET | Method::HEAD) {
            let mut r = status(StatusCode::METHOD_NOT_ALLOWED);
            r.headers_mut().insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
            return r;
        }
        let Some(key) = normalize(rel) else { return status(StatusCode::NOT_FOUND) };
        let fresh = {
            let files = self.files.lock().unwrap_or_else(|e| e.into_inner());
            files.by_path.get(&key).filter(|f| f.checked.elapsed() < REVALIDATE).cloned()
        };
        let file = match fresh {
            Some(f) => f,
            None => match self.look_up(&key).await {
                Some(f) => f,
                None => return status(StatusCode::NOT_FOUND),
            },
        };
        respond(&file, method, headers).await
    }

    /// Finds the file `key` names (a directory's `index.html`) and remembers it, with its
    /// contents when small (read again only when its size or modification time changed).
    async fn look_up(&self, key: &str) -> Option<File> {
        let mut path = self.dir.join(key);
        // A stat is a cached inode lookup: done in place, not on the blocking pool.
        let mut meta = std::fs::metadata(&path).ok()?;
        if meta.is_dir() {
            path.push("index.html");
            meta = std::fs::metadata(&path).ok()?;
        }
        if !meta.is_file() || !self.may_serve(&path) {
            return None;
        }
        let modified = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos());
        let len = meta.len();
        let known = {
            let files = self.files.lock().unwrap_or_else(|e| e.into_inner());
            files
                .by_path
                .get(key)
                .filter(|f| f.path == path && (f.len, f.modified) == (len, modified))
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
            etag: HeaderValue::from_str(&format!("\"{len:x}-{modified:x}\"")).expect("hex and quotes"),
            content_type: content_type(&path),
            path,
            len,
            modified,
            contents,
            checked: std::time::Instant::now(),
        };
        let cached = file.contents.as_ref().map_or(0, |c| c.len() as u64);
        let mut files = self.files.lock().unwrap_or_else(|e| e.into_inner());
        if files.bytes + cached > CACHE_BYTES || files.by_path.len() >= CACHED_ENTRIES {
            *files = Files::default();
        }
        if let Some(old) = files.by_path.insert(key.to_owned(), file.clone()) {
            files.bytes -= old.contents.map_or(0, |c| c.len() as u64);
        }
        files.bytes += cached;
        Some(file)
    }

    /// Whether the file at `path` may be served: it is inside the directory once symbolic links
    /// are followed, none of the hidden files, in none of the hidden directories, and no
    /// configuration file of rowgate's or PostgREST's (by its usual name), wherever it is.
    fn may_serve(&self, path: &Path) -> bool {
        std::fs::canonicalize(path).is_ok_and(|real| {
            let configuration = real
                .file_name()
                .is_some_and(|n| CONFIGURATION_NAMES.iter().any(|c| n.eq_ignore_ascii_case(c)));
            real.starts_with(&self.dir)
                && !self.hidden.contains(&real)
                && !self.hidden_dirs.iter().any(|d| real.starts_with(d))
                && !configuration
        })
    }
}

/// A file's answer to `method` with the request's `headers`: 304 for a current copy, 206 for a
/// range, the whole file otherwise.
async fn respond(file: &File, method: &Method, headers: &HeaderMap) -> Response<Body> {
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
        .and_then(|v| crate::response::byte_range(v, len));
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

/// The path `rel` names under the directory, decoded and with empty segments dropped (so
/// `//app.js` and `%61pp.js` are `app.js`); `None` if it tries to leave the directory or names
/// a dotfile (`.well-known` aside, where the web keeps its conventions).
fn normalize(rel: &str) -> Option<String> {
    let decoded = percent_encoding::percent_decode_str(rel).decode_utf8().ok()?;
    let mut key = String::with_capacity(decoded.len());
    for (i, segment) in decoded.split('/').filter(|s| !s.is_empty()).enumerate() {
        let dotfile = segment.starts_with('.') && !(i == 0 && segment == ".well-known");
        if dotfile || segment.contains(['\\', '\0']) {
            return None;
        }
        if !key.is_empty() {
            key.push('/');
        }
        key.push_str(segment);
    }
    Some(key)
}

/// The usual names of configuration files, which hold secrets (`jwt-secret`, `db-uri`): never
/// served, even when not the one this server read.
const CONFIGURATION_NAMES: [&str; 2] = ["rowgate.toml", "postgrest.conf"];

/// `path` made absolute with its directory's symbolic links resolved (the file itself may not
/// exist yet).
fn absolute(path: &Path) -> Option<PathBuf> {
    let name = path.file_name()?;
    let parent = match path.parent().filter(|p| !p.as_os_str().is_empty()) {
        Some(p) => p.to_owned(),
        None => PathBuf::from("."),
    };
    Some(std::fs::canonicalize(parent).ok()?.join(name))
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
    fn paths_are_named_one_way_and_never_leave_the_directory() {
        for same in ["/app.js", "//app.js", "///app.js", "/%61pp.js", "/./app.js"] {
            let expected = if same.contains("/./") { None } else { Some("app.js".to_owned()) };
            assert_eq!(normalize(same), expected, "{same}");
        }
        assert_eq!(normalize("/a//b.txt"), Some("a/b.txt".to_owned()));
        assert_eq!(normalize("/a/../../etc/passwd"), None);
        assert_eq!(normalize("/%2e%2e/etc/passwd"), None);
        assert_eq!(normalize("/a%5c..%5cb"), None);
        assert_eq!(normalize("/.env"), None);
        assert_eq!(normalize("/assets/.git/config"), None);
        assert_eq!(normalize("/.well-known/security.txt"), Some(".well-known/security.txt".to_owned()));
        assert_eq!(normalize("/"), Some(String::new()));
    }
}
