//! Turns an HTTP request's method, path, query string and headers into an [`ApiRequest`].
//!
//! Pure parsing, as PostgREST's `ApiRequest` module does it: no database, no schema cache, no
//! I/O. Names are not resolved here (that is the planner's job), so an unknown column is not
//! an error at this stage, but a malformed filter is (PGRST100). Everything here is fuzzed.

mod accept;
mod cursor;
mod error;
mod field;
mod filter;
mod logic;
mod order;
mod path;
mod preferences;
mod query;
mod range;
mod select;
#[cfg(test)]
mod tests;
mod types;

pub use error::RequestError;
pub use types::*;

use filter::ParamFilter;
use range::RangeParam;

/// Deepest nesting of `select` embeds and logic trees; deeper input is a PGRST100 error,
/// so hostile URLs cannot exhaust the stack.
pub const MAX_DEPTH: usize = 64;

/// Parses one request. `path` is the raw (still percent-encoded) path, `query` the raw query
/// string without `?`, `headers` the request headers as (lower-case name, value) pairs.
pub fn parse(
    method: Method,
    path: &str,
    query: &str,
    headers: &[(&str, &str)],
) -> Result<ApiRequest, RequestError> {
    let target = path::parse_path(path)?;
    let header = |name: &str| headers.iter().find(|(n, _)| *n == name).map(|(_, v)| *v);
    let profile = match method {
        Method::Post | Method::Patch | Method::Put | Method::Delete => header("content-profile"),
        Method::Get | Method::Head | Method::Options => header("accept-profile"),
    }
    .map(String::from);
    let rpc_read = matches!(target, Target::Rpc(_)) && matches!(method, Method::Get | Method::Head);
    let query = parse_query(query, rpc_read)?;

    // The Range header only applies to GET (RFC 9110), as in PostgREST's `getRanges`.
    let range_header = match (method, header("range")) {
        (Method::Get, Some(v)) => range::parse_range_header(v)?,
        _ => None,
    };
    let top = query.ranges.iter().find(|(p, _)| p.is_empty()).map(|(_, lo)| *lo);
    range::check_top_level(method, range_header, top)?;

    let preferences =
        preferences::parse_preferences(headers.iter().filter(|(n, _)| *n == "prefer").map(|(_, v)| *v));
    let accept = header("accept").map(accept::parse_accept).unwrap_or_default();
    let content_type = header("content-type")
        .map(|v| v.split(';').next().unwrap_or("").trim().to_ascii_lowercase())
        .filter(|t| !t.is_empty());
    Ok(ApiRequest { method, target, profile, query, preferences, range_header, accept, content_type })
}

/// The last dot-separated word of a key, which decides what a parameter is.
fn last_word(key: &str) -> &str {
    key.rsplit('.').next().unwrap_or(key)
}

/// Parses the query string. Errors come in PostgREST's order: order, logic, columns,
/// select, filters, on_conflict (then limit/offset, which PostgREST checks later).
fn parse_query(raw: &str, rpc_read: bool) -> Result<QueryParams, RequestError> {
    let params = query::split_query(raw);
    // PostgREST looks up reserved single parameters by their first occurrence, even if it has
    // no `=`; all other parameters without `=` are ignored.
    let lookup = |name: &str| params.iter().find(|(k, _)| k == name).and_then(|(_, v)| v.as_deref());
    let valued = || params.iter().filter_map(|(k, v)| v.as_deref().map(|v| (k.as_str(), v)));
    let mut q = QueryParams::default();

    for (k, v) in valued().filter(|(k, _)| last_word(k) == "order") {
        q.order.push(order::request_order(k, v)?);
    }
    for (k, v) in valued().filter(|(k, _)| matches!(last_word(k), "and" | "or")) {
        q.logic.push(logic::request_logic(k, v)?);
    }
    if let Some(v) = lookup("columns") {
        q.columns = Some(columns(v, "columns parameter")?);
    }
    q.select = match lookup("select") {
        Some(v) => select::request_select(v)?,
        None => vec![SelectItem::Star],
    };
    let is_filter = |k: &str| {
        !matches!(last_word(k), "order" | "limit" | "offset" | "and" | "or")
            && !matches!(k, "select" | "columns" | "on_conflict")
    };
    for (k, v) in valued().filter(|(k, _)| is_filter(k)) {
        match filter::request_filter(k, v, rpc_read)? {
            ParamFilter::Filter(path, f) => q.filters.push((path, f)),
            ParamFilter::RpcParam(name, value) => q.rpc_params.push((name, value)),
        }
    }
    if let Some(v) = lookup("on_conflict") {
        q.on_conflict = Some(columns(v, "on_conflict parameter")?);
    }
    for (k, v) in valued() {
        let which = match last_word(k) {
            "limit" => RangeParam::Limit,
            "offset" => RangeParam::Offset,
            _ => continue,
        };
        range::add_range_param(&mut q.ranges, which, k, v)?;
    }
    Ok(q)
}

/// `pColumns`: comma-separated names (spaces around commas allowed), for `columns` and
/// `on_conflict`. Like PostgREST, text after the last name is not checked.
fn columns(value: &str, what: &str) -> Result<Vec<String>, RequestError> {
    let mut c = cursor::Cursor::new(value);
    let mut names = Vec::new();
    loop {
        let name = field::field_name(&mut c).map_err(|e| e.into_request_error(what, value))?;
        names.push(name);
        let before = c.pos;
        c.skip_ws();
        if !c.eat(',') {
            if c.pos != before {
                return Err(c.err("\",\"").into_request_error(what, value));
            }
            return Ok(names);
        }
        c.skip_ws();
    }
}
