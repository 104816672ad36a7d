//! The REST API's answer to a backend's [`Outcome`], as PostgREST gives it: the status from the
//! range and the count, `Content-Range`, `Preference-Applied`, `Location`, the ETag,
//! `Content-Type` and `Content-Profile`; then what SQL set in `response.*` over it, and where a
//! write left the primary (read-your-writes).

use http::{header, HeaderValue, Response, StatusCode};

use super::{error_response, etag, location, overrides, Body};
use crate::config::Config;
use crate::error::{code, Error};
use crate::outcome::{out_of_range, Done, Explained, Outcome, Rows, Written};
use crate::plan::{Handler, Media, MutatePlan, Mutation, ReadPlan, ResultShape, Returning};

/// The answer to a read (GET, HEAD, a function's call) whose request had the query string
/// `query`.
pub fn read(
    config: &Config,
    plan: &ReadPlan,
    query: &str,
    outcome: Outcome,
) -> Result<Response<Body>, Error> {
    let profile = super::profile(config, &plan.schema);
    answer(config, outcome, |done| {
        let Done::Read(rows) = done else { unreachable!("a read's outcome is rows or a plan") };
        let mut response = read_rows(plan, rows, profile.as_deref());
        if plan.call.is_none() {
            // Where this representation of the table can be read again, as PostgREST says it.
            let location = content_location(&plan.relation.name.name, query);
            if let Ok(v) = HeaderValue::from_bytes(location.as_bytes()) {
                response.headers_mut().insert(header::CONTENT_LOCATION, v);
            }
        }
        response
    })
}

/// `/<table>?<query>`, the query string in PostgREST's canonical form: its parameters decoded
/// (`+` as a space), sorted by name (the values of one name joined by commas, in order), and
/// encoded again with everything but letters, digits and `-_.~` escaped.
fn content_location(table: &str, query: &str) -> String {
    use percent_encoding::{percent_decode, utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
    if already_canonical(query) {
        return if query.is_empty() { format!("/{table}") } else { format!("/{table}?{query}") };
    }
    const ESCAPED: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'_').remove(b'.').remove(b'~');
    let decode = |text: &str| {
        let text = text.replace('+', " ");
        percent_decode(text.as_bytes()).decode_utf8_lossy().into_owned()
    };
    let mut params: Vec<(String, String)> = query
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| match pair.split_once('=') {
            Some((name, value)) => (decode(name), decode(value)),
            None => (decode(pair), String::new()),
        })
        .collect();
    // Stable: the values of one name keep their order.
    params.sort_by(|a, b| a.0.cmp(&b.0));
    let mut out = format!("/{table}");
    let mut previous: Option<&str> = None;
    for (name, value) in &params {
        if previous == Some(name.as_str()) {
            out.push(',');
        } else {
            out.push(if previous.is_none() { '?' } else { '&' });
            out.extend(utf8_percent_encode(name, ESCAPED));
            out.push('=');
        }
        out.extend(utf8_percent_encode(value, ESCAPED));
        previous = Some(name);
    }
    out
}
/// The answer to a write.
pub fn write(config: &Config, plan: &MutatePlan, outcome: Outcome) -> Result<Response<Body>, Error> {
    let profile = super::profile(config, &plan.schema);
    answer(config, outcome, |done| match done {
        Done::Written(written) => write_done(plan, written, profile.as_deref()),
        Done::Read(_) => unreachable!("a write's outcome is a write or a plan"),
        Done::Explained(_) => unreachable!("answered apart"),
    })
}

/// The response `build` makes of the statements' result (or the plan explained), with what SQL
/// set applied over it (PGRST111/112 when that is invalid, though a write stands) and the write
/// position told.
fn answer(
    config: &Config,
    outcome: Outcome,
    build: impl FnOnce(Done) -> Response<Body>,
) -> Result<Response<Body>, Error> {
    let Outcome { done, set_by_sql, written_at, .. } = outcome;
    let mut response = match done {
        Done::Explained(explained) => explain(explained),
        done => build(done),
    };
    if set_by_sql.headers.is_some() || set_by_sql.status.is_some() {
        response =
            overrides::from_sql(response, set_by_sql.headers.as_deref(), set_by_sql.status.as_deref())?;
    }
    if let Some(lsn) = written_at {
        super::read_your_writes::tell(&mut response, lsn, config.db.replica_max_lag);
    }
    Ok(response)
}

/// The answer to a read of `rows.page` rows (of `rows.total`, when counted).
fn read_rows(plan: &ReadPlan, rows: Rows, profile: Option<&str>) -> Response<Body> {
    let Rows { page: n, total, body } = rows;
    let lower = plan.window.offset;
    if let Some(t) = total.filter(|_| out_of_range(plan, total)) {
        // PostgREST keeps Content-Range and Preference-Applied on this error.
        let mut response = error_response(&Error::Api {
            code: code::INVALID_RANGE,
            message: "Requested range not satisfiable".into(),
            details: Some(format!("An offset of {lower} was requested, but there are only {t} rows.").into()),
            hint: None,
        });
        if plan.head {
            *response.body_mut() = Body::default();
        }
        let headers = response.headers_mut();
        if let Ok(v) = HeaderValue::from_str(&format!("*/{t}")) {
            headers.insert(header::CONTENT_RANGE, v);
        }
        preference_applied(headers, &plan.applied);
        return response;
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
    // A strong validator of what a GET answers, for If-None-Match (POST /rpc answers are not
    // representations of a resource).
    let etag = (!plan.head && plan.transaction.is_none() && status.is_success()).then(|| etag(&body));
    let mut response = Response::new(Body::from(body));
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
    preference_applied(headers, &plan.applied);
    if let Some(p) = profile.filter(|_| has_body).and_then(|p| HeaderValue::from_str(p).ok()) {
        headers.insert("content-profile", p);
    }
    response
}

/// The answer to a write: status, Content-Range, Location and the representation, if asked for.
fn write_done(plan: &MutatePlan, written: Written, profile: Option<&str>) -> Response<Body> {
    let Written { affected, inserted, page, key, body } = written;
    let put = plan.is_put();
    let representation = matches!(plan.returning, Returning::Representation(_));
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
    let location = match (&plan.returning, key) {
        (Returning::Location(pk), Some(values)) => {
            let values: Vec<Option<&str>> = values.iter().map(Option::as_deref).collect();
            Some(location(&plan.relation.name.name, pk, &values))
        }
        _ => None,
    };
    let has_body = body.is_some();
    let mut response = Response::new(body.map_or_else(Body::default, Body::from));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    if let Some(v) = location.and_then(|l| HeaderValue::from_str(&l).ok()) {
        headers.insert(header::LOCATION, v);
    }
    if let Some(v) = content_range.and_then(|v| HeaderValue::from_str(&v).ok()) {
        headers.insert(header::CONTENT_RANGE, v);
    }
    preference_applied(headers, &plan.applied);
    if has_body {
        if let Some(v) = content_type(plan.media, plan.handler.as_ref()) {
            headers.insert(header::CONTENT_TYPE, v);
        }
        if let Some(p) = profile.and_then(|p| HeaderValue::from_str(p).ok()) {
            headers.insert("content-profile", p);
        }
    }
    response
}

/// The answer to `Accept: application/vnd.pgrst.plan`: the database's plan, in the media type
/// asked for.
fn explain(explained: Explained) -> Response<Body> {
    let mut response = Response::new(Body::from(explained.text));
    if let Ok(v) = HeaderValue::from_str(&explained.content_type) {
        response.headers_mut().insert(header::CONTENT_TYPE, v);
    }
    response
}

/// The `Content-Type` of a body in `media`, or of the media type handler that made it.
fn content_type(media: Media, handler: Option<&Handler>) -> Option<HeaderValue> {
    match handler {
        Some(handler) => HeaderValue::from_str(&handler.content_type).ok(),
        None => Some(HeaderValue::from_static(media.content_type())),
    }
}

/// `Preference-Applied`: the preferences the plan honoured.
fn preference_applied(headers: &mut http::HeaderMap, applied: &[String]) {
    if !applied.is_empty() {
        if let Ok(v) = HeaderValue::from_str(&applied.join(", ")) {
            headers.insert("preference-applied", v);
        }
    }
}

fn total_text(total: Option<u64>) -> String {
    total.map_or_else(|| "*".to_owned(), |t| t.to_string())
}

/// Whether `query` is its own canonical form, as most are: nothing to decode or escape, every
/// parameter with a value, the names in order and none twice.
fn already_canonical(query: &str) -> bool {
    let plain = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~' | b'=' | b'&');
    if !query.bytes().all(plain) {
        return false;
    }
    let mut previous: Option<&str> = None;
    for pair in query.split('&') {
        let Some((name, _)) = pair.split_once('=') else { return false };
        if previous.is_some_and(|p| p >= name) {
            return false;
        }
        previous = Some(name);
    }
    true
}

#[cfg(test)]
mod tests {
    use super::content_location;

    #[test]
    fn a_read_is_located_by_its_query_string_in_canonical_form() {
        assert_eq!(content_location("no_pk", "b=eq.1&a=eq.1"), "/no_pk?a=eq.1&b=eq.1");
        assert_eq!(content_location("simple_pk", ""), "/simple_pk");
        assert_eq!(content_location("t", "a=eq.1&b=eq.2"), "/t?a=eq.1&b=eq.2");
        assert_eq!(content_location("t", "a=1&a=2"), "/t?a=1,2");
        assert_eq!(content_location("t", "a=1&&b=2"), "/t?a=1&b=2");
        assert_eq!(content_location("t", "a=1&c=3&b=2&d"), "/t?a=1&b=2&c=3&d=");
        assert_eq!(content_location("t", "or=(a.eq.1,b.eq.2)&a=3&a=1"), "/t?a=3,1&or=%28a.eq.1%2Cb.eq.2%29");
        assert_eq!(content_location("t", "name=eq.J%C3%BCrgen+M"), "/t?name=eq.J%C3%BCrgen%20M");
    }
}
