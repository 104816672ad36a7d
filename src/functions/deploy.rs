//! Deploying functions over HTTP, for the service role (and the dashboard's administrators):
//! below `/functions/v1/_admin/functions`, `GET` lists them, `PUT <name>` writes a function's
//! entry point (the request's body), `PUT <name>/<path>` another file of it (`_shared/<path>`
//! a shared one), `DELETE <name>` removes it. A file is written whole or not at all (a
//! temporary file renamed over it), and the next invocation runs what was written.

use std::path::{Path, PathBuf};

use http::{Method, Response, StatusCode};
use http_body_util::BodyExt;
use hyper::body::Incoming;

use super::{answer, Functions};
use crate::response::Body;

/// The largest file a deploy writes.
pub const MAX_FILE_BYTES: usize = 10 << 20;

/// Whether `name` may name a function: letters, digits, `-` and `_`, not first `_` (Supabase's
/// `_shared`) — the names a URL's first segment and a directory agree on.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('_')
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// A relative path inside a function's directory: plain segments only.
fn valid_path(path: &str) -> bool {
    let segments: Vec<&str> = path.split('/').collect();
    segments.len() <= 8
        && segments.iter().all(|s| {
            !s.is_empty()
                && !s.starts_with('.')
                && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        })
}

/// Answers a request below `/_admin` (the caller already admitted as the service role).
pub async fn handle(functions: &Functions, method: &Method, rest: &str, body: Incoming) -> Response<Body> {
    let Some(dir) = functions.dir().map(Path::to_owned) else {
        return answer(StatusCode::NOT_FOUND, "NOT_FOUND", "No functions-dir is configured");
    };
    let rest = rest.trim_start_matches('/').strip_prefix("_admin/functions").unwrap_or("\u{0}");
    let rest = rest.trim_start_matches('/');
    if rest == "\u{0}" {
        return answer(StatusCode::NOT_FOUND, "NOT_FOUND", "Not found");
    }
    let (name, file) = match rest.split_once('/') {
        Some((name, file)) => (name, Some(file)),
        None => (rest, None),
    };
    match (method, name, file) {
        (&Method::GET, "", None) => json(StatusCode::OK, serde_json::Value::Array(functions.list())),
        (&Method::PUT, name, file) if valid_name(name) || (name == "_shared" && file.is_some()) => {
            let target = match file {
                Some(f) if valid_path(f) => dir.join(name).join(f),
                Some(_) => {
                    return answer(
                        StatusCode::BAD_REQUEST,
                        "INVALID_PATH",
                        "A file's path is plain segments of letters, digits, '-', '_' and '.'",
                    )
                }
                None => entry_of(&dir.join(name)),
            };
            let bytes = match read_limited(body).await {
                Ok(b) => b,
                Err(response) => return response,
            };
            if let Err(e) = write_whole(&target, &bytes) {
                tracing::error!(path = %target.display(), error = %e, "a function's file could not be written");
                return answer(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "WRITE_FAILED",
                    "The file could not be written",
                );
            }
            tracing::info!(function = name, path = %target.display(), bytes = bytes.len(), "an Edge Function's file was deployed");
            json(
                StatusCode::CREATED,
                serde_json::json!({"slug": name, "path": target.strip_prefix(&dir).unwrap_or(&target)}),
            )
        }
        (&Method::DELETE, name, None) if valid_name(name) => {
            let here = dir.join(name);
            if !here.is_dir() {
                return super::not_found();
            }
            functions.forget(name).await;
            match std::fs::remove_dir_all(&here) {
                Ok(()) => json(StatusCode::OK, serde_json::json!({"slug": name, "deleted": true})),
                Err(e) => {
                    tracing::error!(function = name, error = %e, "a function could not be removed");
                    answer(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        "WRITE_FAILED",
                        "The function could not be removed",
                    )
                }
            }
        }
        (&Method::PUT | &Method::DELETE, _, _) => answer(
            StatusCode::BAD_REQUEST,
            "INVALID_NAME",
            "A function's name is letters, digits, '-' and '_', not first '_'",
        ),
        _ => answer(
            StatusCode::METHOD_NOT_ALLOWED,
            "METHOD_NOT_ALLOWED",
            "GET the list, PUT a file, DELETE a function",
        ),
    }
}

/// The entry point a PUT of a function's directory writes: the one there is, else `index.ts`.
fn entry_of(here: &Path) -> PathBuf {
    super::ENTRIES.iter().map(|e| here.join(e)).find(|p| p.is_file()).unwrap_or_else(|| here.join("index.ts"))
}

async fn read_limited(body: Incoming) -> Result<bytes::Bytes, Response<Body>> {
    let too_large =
        || answer(StatusCode::PAYLOAD_TOO_LARGE, "PAYLOAD_TOO_LARGE", "A deployed file is at most 10 MiB");
    match http_body_util::Limited::new(body, MAX_FILE_BYTES).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => Err(too_large()),
        Err(_) => Err(answer(StatusCode::BAD_REQUEST, "INVALID_BODY", "The body could not be read")),
    }
}

fn write_whole(target: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let parent = target.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent)?;
    let mut file = tempfile::NamedTempFile::new_in(parent)?;
    std::io::Write::write_all(&mut file, bytes)?;
    file.persist(target).map_err(|e| e.error)?;
    Ok(())
}

fn json(status: StatusCode, value: serde_json::Value) -> Response<Body> {
    let mut response = Response::new(Body::from(value.to_string()));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("application/json"));
    response
}
