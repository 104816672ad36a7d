//! `/api/collections/{collection}/records`: PocketBase's record requests, each made into the
//! API's own request (built typed, as `backend::Rights` builds its reads), planned and run as
//! the caller like any other — so the rules (SQLite) or row-level security (PostgreSQL) decide
//! what it sees — and its rows shown as PocketBase's records.

use std::sync::Arc;

use bytes::Bytes;
use http::{Response, StatusCode};
use rowgate_request::{
    ApiRequest, CompareOp, Field as Column, Filter as Leaf, LimitOffset, Method, Operation, PreferCount,
    PreferReturn, Preferences, QueryParams, SelectItem, Target,
};
use serde_json::{json, Map, Value};

use super::collection::{date, format_date, Collection, FieldKind};
use super::compile::{self, Joins, Scope};
use super::error::{respond, PbError};
use super::expand::Expand;
use super::fields::Picked;
use super::{filter, validate, Context};
use crate::auth::Principal;
use crate::backend::{Caller, Current, RequestInfo};
use crate::outcome::Done;
use crate::plan::Plan;
use crate::response::Body;

/// PocketBase's page size when none is asked for, and the largest it serves.
const PER_PAGE: u64 = 30;
const MAX_PER_PAGE: u64 = 1000;

/// `GET …/records`: a page of the records the caller may list.
pub async fn list(cx: &Context<'_>, c: &Collection, query: &Query) -> Result<Response<Body>, PbError> {
    let page = query.number("page")?.filter(|p| *p >= 1).unwrap_or(1);
    let per_page = query.number("perPage")?.filter(|p| *p >= 1).unwrap_or(PER_PAGE).min(MAX_PER_PAGE);
    let skip_total = query.get("skipTotal").is_some_and(|v| matches!(v, "1" | "true" | "t"));
    let mut params = QueryParams { select: vec![SelectItem::Star], ..Default::default() };
    let (scope, mut joins) = (cx.scope(), Joins::default());
    if let Some(text) = query.get("filter") {
        if let Some(parsed) = filter::parse(text).map_err(|e| PbError::bad_request(e.0))? {
            let tree = compile::filter(&parsed, c, &scope, &mut joins)?;
            params.logic.push((Vec::new(), tree));
        }
    }
    if let Some(tree) = own_rule(cx, c, LIST, &mut joins)? {
        params.logic.push((Vec::new(), tree));
    }
    if let Some(text) = query.get("sort").filter(|s| !s.trim().is_empty()) {
        params.order.push((Vec::new(), compile::sort(text, c, &scope, &mut joins)?));
    }
    params.select.extend(joins.embeds);
    params.logic.extend(joins.logic);
    // SQL's OFFSET is a signed 64-bit number.
    let offset = (page - 1).saturating_mul(per_page).min(i64::MAX as u64);
    params.ranges.push((Vec::new(), LimitOffset { limit: Some(per_page), offset: Some(offset) }));
    let count = (!skip_total).then_some(PreferCount::Exact);
    let (rows, total) = read(cx, c, params, count).await?;
    let picked = Picked::parse(query.get("fields"))?;
    let mut records: Vec<Map<String, Value>> = rows.into_iter().map(|r| c.record(r)).collect();
    Expand::parse(query.get("expand")).apply(cx, c, &mut records).await?;
    let items: Vec<Value> = records.into_iter().map(|r| Value::Object(picked.apply(r))).collect();
    let (total_items, total_pages) = match total {
        Some(t) => (t as i64, t.div_ceil(per_page) as i64),
        None => (-1, -1),
    };
    Ok(respond(
        StatusCode::OK,
        &json!({"items": items, "page": page, "perPage": per_page, "totalItems": total_items, "totalPages": total_pages}),
    ))
}

/// Where a rule is among a collection's five.
const LIST: usize = 0;
const VIEW: usize = 1;

/// The list or view rule of `c` as a filter for this caller, where the two differ: the
/// backends' one reading rule lets a caller read what either allows, and PocketBase's door
/// tells them apart.
fn own_rule(
    cx: &Context<'_>,
    c: &Collection,
    action: usize,
    joins: &mut Joins,
) -> Result<Option<rowgate_request::LogicTree>, PbError> {
    let Some(rules) = &c.rules else { return Ok(None) };
    let rule = match &rules[action] {
        Some(rule) if !rule.trim().is_empty() && rules[LIST] != rules[VIEW] && !cx.superuser() => rule,
        _ => return Ok(None),
    };
    let Some(parsed) = filter::parse(rule).map_err(|e| PbError::bad_request(e.0))? else { return Ok(None) };
    // The rule may name `@request.*`, which a caller's own filter may not.
    let scope = Scope { superuser: true, ..cx.scope() };
    compile::filter(&parsed, c, &scope, joins).map(Some)
}

/// `GET …/records/{id}`: one record the caller may view, else 404.
pub async fn view(
    cx: &Context<'_>,
    c: &Collection,
    id: &str,
    query: &Query,
) -> Result<Response<Body>, PbError> {
    if !possible_id(c, id) {
        return Err(PbError::not_found());
    }
    let mut params = QueryParams { select: vec![SelectItem::Star], ..Default::default() };
    params.filters.push((Vec::new(), by_id(id)));
    let mut joins = Joins::default();
    if let Some(tree) = own_rule(cx, c, VIEW, &mut joins)? {
        params.logic.push((Vec::new(), tree));
        params.select.extend(joins.embeds);
        params.logic.extend(joins.logic);
    }
    let (mut rows, _) = read(cx, c, params, None).await?;
    let row = rows.pop().ok_or_else(PbError::not_found)?;
    shown(cx, c, row, query).await
}

/// `POST …/records`: a new record, its id made as PocketBase makes one unless given.
pub async fn create(
    cx: &Context<'_>,
    c: &Collection,
    body: &Bytes,
    query: &Query,
) -> Result<Response<Body>, PbError> {
    const REFUSED: &str = "Failed to create record.";
    let row = row_of(c, &object(body, REFUSED)?, Write::Create, REFUSED)?;
    // PocketBase answers with the new record even where its view rule does not let the caller
    // view it: it is written without a representation (which would need that rule) and read
    // back by the superuser — only the record just written, whose values the caller gave.
    let unviewable = c.rules.as_ref().is_some_and(|r| r[VIEW].is_none()) && !cx.superuser();
    let id = row.get("id").and_then(Value::as_str).map(str::to_owned).filter(|_| unviewable);
    let body = Value::Array(vec![Value::Object(row)]);
    if let Some(id) = id {
        write(cx, c, Method::Post, None, body, REFUSED, false).await?;
        let superuser = Principal {
            role: crate::auth::SERVICE_ROLE.into(),
            claims: "{\"role\":\"service_role\"}".into(),
            anonymous: false,
        };
        return view(&Context { principal: &superuser, ..*cx }, c, &id, query).await;
    }
    let written = write(cx, c, Method::Post, None, body, REFUSED, true).await?;
    let record = written.into_iter().next().ok_or_else(|| PbError::invalid(REFUSED, Map::new()))?;
    shown(cx, c, record, query).await
}

/// `PATCH …/records/{id}`: the fields given, changed in a record the caller may update.
pub async fn update(
    cx: &Context<'_>,
    c: &Collection,
    id: &str,
    body: &Bytes,
    query: &Query,
) -> Result<Response<Body>, PbError> {
    const REFUSED: &str = "Failed to update record.";
    if !possible_id(c, id) {
        return Err(PbError::not_found());
    }
    let row = row_of(c, &object(body, REFUSED)?, Write::Update, REFUSED)?;
    if row.is_empty() {
        return view(cx, c, id, query).await;
    }
    let written = write(cx, c, Method::Patch, Some(id), Value::Object(row), REFUSED, true).await?;
    let record = written.into_iter().next().ok_or_else(PbError::not_found)?;
    shown(cx, c, record, query).await
}

/// `DELETE …/records/{id}`: 204, or 404 for a record the caller may not delete.
pub async fn delete(cx: &Context<'_>, c: &Collection, id: &str) -> Result<Response<Body>, PbError> {
    if !possible_id(c, id) {
        return Err(PbError::not_found());
    }
    let deleted =
        write(cx, c, Method::Delete, Some(id), Value::Null, "Failed to delete record.", true).await?;
    if deleted.is_empty() {
        return Err(PbError::not_found());
    }
    let mut r = Response::new(Body::default());
    *r.status_mut() = StatusCode::NO_CONTENT;
    Ok(r)
}

/// What a write makes of a record.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Write {
    Create,
    Update,
}

/// The row a create or an update writes: the fields `given`, converted as PocketBase converts
/// them; `created` (on create) and `updated` set as autodate fields are; a new record's text id
/// made; a required field missing (on create) or blank refused with `validation_required`.
fn row_of(
    c: &Collection,
    given: &Map<String, Value>,
    write: Write,
    refused: &'static str,
) -> Result<Map<String, Value>, PbError> {
    let now = format_date(chrono::Utc::now().naive_utc());
    let create = write == Write::Create;
    let mut row = Map::new();
    let mut errors = Map::new();
    for field in &c.fields {
        // An autodate field is set when the write is one it is set on, never as given.
        let stamped = field.autodate.map(|(on_create, on_update)| if create { on_create } else { on_update });
        let value = match (field.name.as_str(), given.get(&field.name)) {
            _ if stamped.is_some() => stamped.filter(|set| *set).map(|_| Value::String(now.clone())),
            // No relation is null, which the foreign key takes (PocketBase writes "").
            (_, Some(Value::String(s))) if field.relation.is_some() && s.is_empty() => Some(Value::Null),
            ("id", None) if create && field.kind == FieldKind::Text => Some(Value::String(new_id())),
            ("id", _) if !create => None,
            (_, Some(v)) => Some(cast(field.kind, v)),
            (_, None) => None,
        };
        let missing = match &value {
            None => create,
            Some(v) => blank(v),
        };
        if field.required && missing {
            errors.insert(field.name.clone(), PbError::field("validation_required", "Cannot be blank."));
        } else if let (Some((kind, options)), Some(v)) = (&field.defined, &value) {
            if let Some(e) = validate::check(kind, options, v).filter(|_| !blank(v)) {
                errors.insert(field.name.clone(), e);
            }
        }
        if let Some(v) = value {
            row.insert(field.name.clone(), v);
        }
    }
    match errors.is_empty() {
        true => Ok(row),
        false => Err(PbError::invalid(refused, errors)),
    }
}

/// One record's answer: the row as a record, expanded and picked as the query asks.
async fn shown(
    cx: &Context<'_>,
    c: &Collection,
    row: Map<String, Value>,
    query: &Query,
) -> Result<Response<Body>, PbError> {
    let picked = Picked::parse(query.get("fields"))?;
    let mut records = [c.record(row)];
    Expand::parse(query.get("expand")).apply(cx, c, &mut records).await?;
    let [record] = records;
    Ok(respond(StatusCode::OK, &Value::Object(picked.apply(record))))
}

/// The query string's parameters.
pub struct Query(Vec<(String, String)>);

impl Query {
    /// Parses `query`.
    pub fn parse(query: Option<&str>) -> Query {
        Query(form_urlencoded::parse(query.unwrap_or("").as_bytes()).into_owned().collect())
    }

    /// The first value of `name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    /// An integer parameter; one that is not an integer is a bad request.
    fn number(&self, name: &str) -> Result<Option<u64>, PbError> {
        match self.get(name).map(str::trim).filter(|v| !v.is_empty()) {
            None => Ok(None),
            Some(v) => match v.parse::<i64>() {
                Ok(n) => Ok(Some(n.max(0) as u64)),
                Err(_) => Err(PbError::bad_request(format!("{name} is not an integer"))),
            },
        }
    }
}

/// Whether `id` could be a record's id: no record has one that is not a number in a number
/// column, or one with a NUL (which PostgreSQL's text cannot hold) — 404, as PocketBase answers
/// any id it has no record of, not the database's refusal of the value.
fn possible_id(c: &Collection, id: &str) -> bool {
    match c.field("id").map(|f| f.kind) {
        _ if id.contains('\0') => false,
        Some(FieldKind::Number) => id.parse::<f64>().is_ok_and(f64::is_finite),
        _ => true,
    }
}

fn by_id(id: &str) -> Leaf {
    Leaf {
        field: Column { name: "id".into(), json_path: Vec::new() },
        negated: false,
        operation: Operation::Compare { op: CompareOp::Eq, quantifier: None, value: id.to_owned() },
    }
}

/// A read of `c` as the caller: its rows and, when counted, how many match in all.
pub(super) async fn read(
    cx: &Context<'_>,
    c: &Collection,
    query: QueryParams,
    count: Option<PreferCount>,
) -> Result<(Vec<Map<String, Value>>, Option<u64>), PbError> {
    let preferences = Preferences { count, timezone: cx.timezone(), ..Default::default() };
    let request = request(c, Method::Get, query, preferences);
    let Plan::Read(plan) =
        Plan::build(&request, &Bytes::new(), cx.schema, cx.config).map_err(PbError::planned)?
    else {
        return Err(PbError::bad_request("a read planned as something else"));
    };
    let outcome =
        cx.backend.read(&plan, &cx.caller("GET")).await.map_err(|e| PbError::from_backend(e, None))?;
    match outcome.done {
        Done::Read(rows) => Ok((rows_of(&rows.body)?, rows.total)),
        _ => Err(PbError::bad_request("a read answered as something else")),
    }
}

/// A write to `c` as the caller (of the record `id`, for an update or a delete): the rows
/// written, as they are now.
async fn write(
    cx: &Context<'_>,
    c: &Collection,
    method: Method,
    id: Option<&str>,
    body: Value,
    refused: &'static str,
    representation: bool,
) -> Result<Vec<Map<String, Value>>, PbError> {
    let mut query = QueryParams { select: vec![SelectItem::Star], ..Default::default() };
    if let Some(id) = id {
        query.filters.push((Vec::new(), by_id(id)));
    }
    let preferences = Preferences {
        return_: Some(if representation { PreferReturn::Representation } else { PreferReturn::Minimal }),
        timezone: cx.timezone(),
        ..Default::default()
    };
    let mut request = request(c, method, query, preferences);
    let body = match body {
        Value::Null => Bytes::new(),
        b => {
            request.content_type = Some("application/json".into());
            Bytes::from(b.to_string())
        }
    };
    let plan = match Plan::build(&request, &body, cx.schema, cx.config).map_err(PbError::planned)? {
        Plan::Mutate(plan) => Arc::new(plan),
        _ => return Err(PbError::bad_request("a write planned as something else")),
    };
    let method = match method {
        Method::Post => "POST",
        Method::Patch => "PATCH",
        _ => "DELETE",
    };
    let outcome = cx
        .backend
        .write(plan, &cx.caller(method))
        .await
        .map_err(|e| PbError::from_backend(e, Some(refused)))?;
    match outcome.done {
        Done::Written(w) => rows_of(w.body.as_deref().unwrap_or(b"[]")),
        _ => Err(PbError::bad_request("a write answered as something else")),
    }
}

fn request(c: &Collection, method: Method, query: QueryParams, preferences: Preferences) -> ApiRequest {
    ApiRequest {
        method,
        target: Target::Relation(c.name().to_owned()),
        profile: Some(c.relation.name.schema.clone()),
        query,
        preferences,
        range_header: None,
        accept: Vec::new(),
        content_type: None,
    }
}

fn rows_of(body: &[u8]) -> Result<Vec<Map<String, Value>>, PbError> {
    if body.is_empty() {
        return Ok(Vec::new());
    }
    serde_json::from_slice(body)
        .map_err(|e| PbError::bad_request(format!("rows that are not JSON objects: {e}")))
}

/// The body as a JSON object (an empty body is an empty one).
pub(super) fn object(body: &Bytes, refused: &'static str) -> Result<Map<String, Value>, PbError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Map::new());
    }
    match serde_json::from_slice(body) {
        Ok(Value::Object(o)) => Ok(o),
        _ => Err(PbError::invalid(refused, Map::new())),
    }
}

/// A value as a field of `kind` takes it, converted as PocketBase converts it.
fn cast(kind: FieldKind, v: &Value) -> Value {
    match (kind, v) {
        (FieldKind::Json, v) => v.clone(),
        (FieldKind::Text, Value::String(_)) => v.clone(),
        (FieldKind::Text, Value::Null) => Value::String(String::new()),
        (FieldKind::Text, v) => Value::String(v.to_string()),
        (FieldKind::Number, Value::Number(_)) => v.clone(),
        (FieldKind::Number, Value::String(s)) => s.trim().parse::<f64>().map_or(json!(0), |n| json!(n)),
        (FieldKind::Number, Value::Bool(b)) => json!(u8::from(*b)),
        (FieldKind::Number, _) => json!(0),
        (FieldKind::Bool, Value::Bool(_)) => v.clone(),
        (FieldKind::Bool, Value::String(s)) => {
            Value::Bool(matches!(s.trim(), "true" | "1" | "t" | "T" | "TRUE"))
        }
        (FieldKind::Bool, Value::Number(n)) => Value::Bool(n.as_f64().is_some_and(|n| n != 0.0)),
        (FieldKind::Bool, _) => Value::Bool(false),
        (FieldKind::Date, Value::String(s)) if s.trim().is_empty() => Value::String(String::new()),
        (FieldKind::Date, Value::String(s)) => Value::String(date(s.trim())),
        (FieldKind::Date, _) => Value::String(String::new()),
    }
}

/// A value a required field does not take: PocketBase's zero values.
fn blank(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::Bool(b) => !b,
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
    }
}

/// 15 characters of `[a-z0-9]`, as PocketBase's record ids.
fn new_id() -> String {
    random_text(b"abcdefghijklmnopqrstuvwxyz0123456789", 15)
}

/// `len` characters of `alphabet` (ASCII, at most 256), each as likely as the others.
pub(super) fn random_text(alphabet: &[u8], len: usize) -> String {
    // Below the largest multiple of the alphabet's size a byte falls on each character alike.
    let fair = 256 - 256 % alphabet.len();
    let mut text = String::with_capacity(len);
    while text.len() < len {
        let bytes = crate::random_bytes::<64>();
        text.extend(
            bytes
                .iter()
                .filter(|b| usize::from(**b) < fair)
                .map(|b| alphabet[usize::from(*b) % alphabet.len()] as char),
        );
        text.truncate(len);
    }
    text
}

impl Context<'_> {
    fn scope(&self) -> Scope<'_> {
        Scope { cache: self.schema, superuser: self.superuser(), claims: &self.principal.claims, rule: None }
    }

    /// UTC, so PostgreSQL's timestamps come out as PocketBase writes them (SQLite has no zones).
    fn timezone(&self) -> Option<String> {
        self.schema.time_zones.then(|| "UTC".to_owned())
    }

    fn caller(&self, method: &'static str) -> Caller<'_> {
        Caller {
            principal: self.principal,
            request: RequestInfo { method, path: self.path, headers: &[] },
            schema: self.schema,
            current: Current::Lagging,
            written_at: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_pocketbase_ids() {
        let id = new_id();
        assert_eq!(id.len(), 15);
        assert!(id.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()));
        assert_ne!(id, new_id());
    }

    #[test]
    fn values_are_converted_as_pocketbase_converts_them() {
        assert_eq!(cast(FieldKind::Number, &json!("x")), json!(0));
        assert_eq!(cast(FieldKind::Number, &json!("2.5")), json!(2.5));
        assert_eq!(cast(FieldKind::Bool, &json!("true")), json!(true));
        assert_eq!(cast(FieldKind::Text, &json!(3)), json!("3"));
        assert_eq!(cast(FieldKind::Date, &json!("2024-01-02")), json!("2024-01-02 00:00:00.000Z"));
    }
}
