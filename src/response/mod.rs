//! A result → the HTTP response, whatever the backend: the status PostgREST derives from the
//! range and the count, `Content-Range`, `Preference-Applied`, `Location`, ETags and 304s,
//! the singular, range and max-affected errors — around a body the backend renders. And the
//! one place an [`Error`] becomes a response.

mod body;
pub mod csv;
pub mod datetime;
pub mod overrides;

pub use body::Body;

/// Marks a response read from a replica, which may lag the primary: the response cache does
/// not store it as the current answer.
#[derive(Debug, Clone, Copy)]
pub struct MayLag;

use http::{header, HeaderName, HeaderValue, Response, StatusCode};

use crate::error::{code, Error};
use crate::plan::{Media, MutatePlan, Mutation, ReadPlan, ResultShape, Returning};

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
    (config.db_schemas.len() > 1).then(|| schema.to_owned())
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

/// The response to a read of `n` rows (of `total`, when counted), whatever the backend, with
/// the body `render` makes: status, Content-Range, ETag, the range and singular errors.
pub fn finish(
    plan: &ReadPlan,
    n: u64,
    total: Option<u64>,
    profile: Option<&str>,
    render: impl FnOnce() -> Result<Vec<u8>, Error>,
) -> Result<Response<Body>, Error> {
    let lower = plan.window.offset;
    if let Some(max) = plan.transaction.and_then(|t| t.max_affected) {
        if n > max {
            // A function's rows count as a write's do (PostgREST's PGRST124).
            return Err(Error::max_affected(n));
        }
    }
    if let Some(t) = total {
        if lower > t {
            // PostgREST keeps Content-Range and Preference-Applied on this error.
            let mut response = error_response(&Error::Api {
                code: code::INVALID_RANGE,
                message: "Requested range not satisfiable".into(),
                details: Some(
                    format!("An offset of {lower} was requested, but there are only {t} rows.").into(),
                ),
                hint: None,
            });
            if plan.head {
                *response.body_mut() = Body::default();
            }
            let headers = response.headers_mut();
            if let Ok(v) = HeaderValue::from_str(&format!("*/{t}")) {
                headers.insert(header::CONTENT_RANGE, v);
            }
            preference_applied(headers, plan);
            return Ok(response);
        }
    }
    let status = match total {
        _ if plan.result == ResultShape::Void => StatusCode::NO_CONTENT,
        Some(t) if n < t => StatusCode::PARTIAL_CONTENT,
        _ => StatusCode::OK,
    };
    let content_range = match (total, n) {
        (Some(0), _) | (_, 0) => format!("*/{}", total_text(total)),
        _ => format!("{lower}-{}/{}", lower + n - 1, total_text(total)),
    };

    let body = render()?;

    if plan.head && plan.media == (Media::Single { strip_nulls: false }) && n != 1 {
        // HEAD reports what GET would: a singular request for other than one row is a 406.
        return Err(singular(n));
    }

    // A strong validator of what a GET answers, for If-None-Match (POST /rpc answers are not
    // representations of a resource).
    let etag = (!plan.head && plan.transaction.is_none() && status.is_success()).then(|| etag(&body));
    let mut response = Response::new(if plan.head { Body::default() } else { Body::from(body) });
    *response.status_mut() = status;
    let headers = response.headers_mut();
    if let Some(v) = etag.and_then(|e| HeaderValue::from_str(&e).ok()) {
        headers.insert(header::ETAG, v);
    }
    let has_body = plan.result != ResultShape::Void;
    if let Some(v) =
        content_type(plan.media, plan.handler.as_ref()).filter(|_| has_body || plan.handler.is_some())
    {
        headers.insert(header::CONTENT_TYPE, v);
    }
    if let Ok(v) = HeaderValue::from_str(&content_range) {
        headers.insert(header::CONTENT_RANGE, v);
    }
    preference_applied(headers, plan);
    if let Some(p) = profile.filter(|_| has_body).and_then(|p| HeaderValue::from_str(p).ok()) {
        headers.insert("content-profile", p);
    }
    Ok(response)
}

/// The `Content-Type` of a body in `media`, or of the media type handler that made it.
fn content_type(media: Media, handler: Option<&crate::plan::Handler>) -> Option<HeaderValue> {
    match handler {
        Some(handler) => HeaderValue::from_str(&handler.content_type).ok(),
        None => Some(HeaderValue::from_static(media.content_type())),
    }
}

/// 406 PGRST116: a singular response (`vnd.pgrst.object+json`) for other than one row.
pub fn singular(rows: u64) -> Error {
    Error::Api {
        code: code::SINGULAR,
        message: "Cannot coerce the result to a single JSON object".into(),
        details: Some(format!("The result contains {rows} rows").into()),
        hint: None,
    }
}

/// What a write did, whatever the backend.
#[derive(Debug, Default)]
pub struct WriteOutcome {
    /// Rows written.
    pub affected: u64,
    /// Of which inserted (an upsert may update instead).
    pub inserted: u64,
    /// Rows in the representation, if one was asked for.
    pub page: u64,
    /// `Location` of the inserted row.
    pub location: Option<String>,
}

/// The response to a write: status, Content-Range, Location, the PUT, max-affected and
/// singular errors, and the representation `render` makes when one was asked for.
pub fn finish_write(
    plan: &MutatePlan,
    outcome: WriteOutcome,
    profile: Option<&str>,
    render: impl FnOnce() -> Result<Vec<u8>, Error>,
) -> Result<Response<Body>, Error> {
    let WriteOutcome { affected, inserted, page, location } = outcome;
    let put = plan.is_put();
    if put && affected != 1 {
        return Err(crate::plan::put_mismatch());
    }
    if let Some(max) = plan.max_affected {
        if affected > max {
            return Err(Error::max_affected(affected));
        }
    }
    let representation = matches!(plan.returning, Returning::Representation(_));
    if matches!(plan.media, Media::Single { .. }) {
        let n = if representation { page } else { affected };
        if n != 1 {
            return Err(singular(n));
        }
    }
    // A merging upsert that inserted nothing (all updates, or an empty array) is 200, as in
    // PostgREST.
    let only_updated = plan.tracks_inserts() && inserted == 0;
    let status = match &plan.mutation {
        Mutation::Insert { .. } if put && !representation => StatusCode::NO_CONTENT,
        Mutation::Insert { .. } if only_updated => StatusCode::OK,
        Mutation::Insert { .. } => StatusCode::CREATED,
        _ if representation => StatusCode::OK,
        _ => StatusCode::NO_CONTENT,
    };
    let total = if plan.count { affected.to_string() } else { "*".to_owned() };
    let content_range = match &plan.mutation {
        _ if put => None,
        Mutation::Update { .. } | Mutation::UpdateByKey { .. } => {
            let n = if representation { page } else { affected };
            Some(if n == 0 { format!("*/{total}") } else { format!("0-{}/{total}", n - 1) })
        }
        _ => Some(format!("*/{total}")),
    };
    let body = if representation { Some(render()?) } else { None };

    let mut response = Response::new(body.as_ref().map_or_else(Body::default, |b| Body::from(b.clone())));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    if let Some(v) = location.and_then(|l| HeaderValue::from_str(&l).ok()) {
        headers.insert(header::LOCATION, v);
    }
    if let Some(v) = content_range.and_then(|v| HeaderValue::from_str(&v).ok()) {
        headers.insert(header::CONTENT_RANGE, v);
    }
    applied_header(headers, &plan.applied);
    if body.is_some() {
        if let Some(v) = content_type(plan.media, plan.handler.as_ref()) {
            headers.insert(header::CONTENT_TYPE, v);
        }
        if let Some(p) = profile.and_then(|p| HeaderValue::from_str(p).ok()) {
            headers.insert("content-profile", p);
        }
    }
    Ok(response)
}

/// A strong entity tag of a body: a 64-bit SipHash and the length. Equal bodies get equal
/// tags from every rowgate built with the same Rust standard library.
fn etag(body: &[u8]) -> String {
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

/// `Preference-Applied`: the preferences the plan honoured.
fn preference_applied(headers: &mut http::HeaderMap, plan: &ReadPlan) {
    applied_header(headers, &plan.applied);
}

fn applied_header(headers: &mut http::HeaderMap, applied: &[String]) {
    if !applied.is_empty() {
        if let Ok(v) = HeaderValue::from_str(&applied.join(", ")) {
            headers.insert("preference-applied", v);
        }
    }
}

/// A Unix time as PostgreSQL's JSON form of a `timestamptz` in UTC.
pub fn utc_timestamp(secs: f64) -> String {
    const EPOCH_2000: f64 = 946_684_800.0;
    let micros = ((secs - EPOCH_2000) * 1e6).round() as i64;
    let mut out = Vec::new();
    datetime::write_timestamp(&mut out, &micros.to_be_bytes());
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

fn total_text(total: Option<u64>) -> String {
    total.map_or_else(|| "*".to_owned(), |t| t.to_string())
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
