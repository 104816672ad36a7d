//! HTTP responses, whatever the backend: the REST API's answer to a backend's outcome
//! ([`rest`]), 304s, byte ranges, and the one place an [`Error`] becomes a response.

mod body;
pub mod overrides;
pub mod read_your_writes;
pub mod rest;

pub use body::Body;

use http::{header, HeaderName, HeaderValue, Response, StatusCode};

use crate::error::Error;

/// The one place where an [`Error`] becomes an HTTP response (its status and body come from
/// [`Error::to_response`]).
pub fn error_response(error: &Error) -> Response<Body> {
    error_response_as(error, false)
}

/// [`error_response`], with only `code` and `message` when `minimal`
/// (`client-error-verbosity`).
pub fn error_response_as(error: &Error, minimal: bool) -> Response<Body> {
    let e = error.to_response_as(minimal);
    if e.status.is_server_error() {
        tracing::error!(status = e.status.as_u16(), error = %error, "request failed");
    }
    let mut r = Response::new(Body::from(e.body));
    *r.status_mut() = e.status;
    let headers = r.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json; charset=utf-8"));
    if let Some(secs) = e.retry_after {
        headers.insert(header::RETRY_AFTER, HeaderValue::from(secs));
    }
    if let Some(v) = e.www_authenticate.and_then(|v| HeaderValue::from_str(&v).ok()) {
        headers.insert(header::WWW_AUTHENTICATE, v);
    }
    // PostgREST 13's header (RFC 9209), named as PostgREST names itself: proxies and clients
    // that read it look for that name.
    if let Ok(v) = HeaderValue::from_str(&format!("PostgREST; error={}", e.code)) {
        headers.insert(HeaderName::from_static("proxy-status"), v);
    }
    // A raised error's own headers and reason phrase (`RAISE SQLSTATE 'PGRST'`); one that is
    // no valid header is left out rather than failing the error.
    for (name, value) in &e.headers {
        if let (Ok(name), Ok(value)) =
            (HeaderName::try_from(name.as_str()), HeaderValue::try_from(value.as_str()))
        {
            headers.insert(name, value);
        }
    }
    if let Some(reason) = e.reason.and_then(|text| hyper::ext::ReasonPhrase::try_from(text).ok()) {
        r.extensions_mut().insert(reason);
    }
    r
}

/// `Content-Profile` of an answer in `schema`: named when more than one schema is exposed.
pub fn profile(config: &crate::config::Config, schema: &str) -> Option<String> {
    (config.db.schemas.len() > 1).then(|| schema.to_owned())
}

/// Conditional GET: 304 without a body when the client's copy is current (RFC 9110 §13.1.2).
pub fn not_modified(request: &http::HeaderMap, response: Response<Body>) -> Response<Body> {
    let (Some(inm), Some(etag)) = (request.get(header::IF_NONE_MATCH), response.headers().get(header::ETAG))
    else {
        return response;
    };
    if let (Ok(inm), Ok(e)) = (inm.to_str(), etag.to_str()) {
        if none_match(inm, e) {
            let mut r = Response::new(Body::default());
            *r.status_mut() = StatusCode::NOT_MODIFIED;
            for name in [header::ETAG, header::CACHE_CONTROL] {
                if let Some(v) = response.headers().get(&name) {
                    r.headers_mut().insert(name, v.clone());
                }
            }
            return r;
        }
    }
    response
}

/// A strong entity tag of a body: a 64-bit SipHash and the length. Equal bodies get equal
/// tags from every rowgate built with the same Rust standard library.
pub fn etag(body: &[u8]) -> String {
    use std::hash::Hasher;
    let mut h = std::hash::DefaultHasher::new();
    h.write(body);
    format!("\"{:016x}-{:x}\"", h.finish(), body.len())
}

/// Whether an `If-None-Match` value matches `etag` (the weak comparison RFC 9110 prescribes
/// for it: a `W/` prefix does not matter).
pub fn none_match(if_none_match: &str, etag: &str) -> bool {
    if_none_match.split(',').map(str::trim).any(|t| t == "*" || t.trim_start_matches("W/") == etag)
}

/// `/table?pk=eq.value`: where the inserted row can be read, as PostgREST's `Location`.
pub fn location(table: &str, pk: &[String], values: &[Option<&str>]) -> String {
    use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
    // What a query string encodes: everything but RFC 3986's unreserved characters.
    const RESERVED: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~');
    let mut out = format!("/{}?", utf8_percent_encode(table, RESERVED));
    for (i, column) in pk.iter().enumerate() {
        if i > 0 {
            out.push('&');
        }
        let value = values.get(i).copied().flatten();
        out.push_str(&utf8_percent_encode(column, RESERVED).to_string());
        out.push_str("=eq.");
        out.push_str(&utf8_percent_encode(value.unwrap_or(""), RESERVED).to_string());
    }
    out
}

/// A Unix time as PostgreSQL's JSON form of a `timestamptz` in UTC.
pub fn utc_timestamp(secs: f64) -> String {
    const EPOCH_2000: f64 = 946_684_800.0;
    let micros = ((secs - EPOCH_2000) * 1e6).round() as i64;
    let mut out = Vec::new();
    crate::format::datetime::write_timestamp(&mut out, &micros.to_be_bytes());
    let text = String::from_utf8_lossy(&out);
    format!("{}+00:00", text.trim_matches('"'))
}

/// A single byte range of a `len`-byte file: `None` when the header is not one (the whole
/// file is sent), `Some(None)` when it is unsatisfiable.
pub fn byte_range(header: &str, len: u64) -> Option<Option<(u64, u64)>> {
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
}
