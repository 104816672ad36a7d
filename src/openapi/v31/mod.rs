//! The description as OpenAPI 3.1: a schema per relation in `components.schemas` (as read,
//! as inserted, as updated), request bodies per method, each function's arguments and result,
//! the `Prefer` values each method honours, the bearer token and API key security schemes, and
//! PostgREST's error object. Component names keep to OpenAPI's `[A-Za-z0-9._-]`.

use std::collections::HashMap;

use serde_json::{json, Map, Value};

mod components;

use components::{components, object, used, value_schema};

use super::types::element;
use super::{split_comment, Api, Resource};
use crate::schema::{Function, FunctionResult, Volatility};

/// The `Prefer` values of a read.
const PREFER_READ: &[&str] =
    &["count=exact", "count=planned", "count=estimated", "handling=lenient", "handling=strict"];
/// The `Prefer` values of `POST` on a table.
const PREFER_INSERT: &[&str] = &[
    "return=minimal",
    "return=headers-only",
    "return=representation",
    "resolution=merge-duplicates",
    "resolution=ignore-duplicates",
    "missing=default",
    "count=exact",
    "tx=commit",
    "tx=rollback",
];
/// The `Prefer` values of `PATCH` and `DELETE`.
const PREFER_CHANGE: &[&str] = &[
    "return=minimal",
    "return=headers-only",
    "return=representation",
    "count=exact",
    "handling=lenient",
    "handling=strict",
    "tx=commit",
    "tx=rollback",
];
/// The `Prefer` values of a function call.
const PREFER_CALL: &[&str] =
    &["count=exact", "handling=lenient", "handling=strict", "tx=commit", "tx=rollback"];

/// The whole document.
pub fn document(api: &Api<'_>) -> Value {
    let names = ComponentNames::new(api);
    let (title, description) = api.title();
    let mut info = Map::new();
    info.insert("title".into(), json!(title.unwrap_or("rowgate API")));
    info.insert(
        "description".into(),
        json!(description.unwrap_or(if title.is_some() {
            ""
        } else {
            "The tables, views and functions of the schema"
        })),
    );
    info.insert("version".into(), json!(env!("CARGO_PKG_VERSION")));
    let mut doc = Map::new();
    doc.insert("openapi".into(), json!("3.1.0"));
    doc.insert("info".into(), Value::Object(info));
    doc.insert("servers".into(), json!([{"url": api.server.url}]));
    let paths = Value::Object(paths(api, &names));
    let components = used(components(api, &names), &paths);
    doc.insert("paths".into(), paths);
    doc.insert("components".into(), components);
    let mut security = vec![json!({"bearerAuth": []}), json!({"apiKey": []})];
    if !api.security {
        // Anonymous calls are allowed unless the server asks for a token.
        security.insert(0, json!({}));
    }
    doc.insert("security".into(), Value::Array(security));
    doc.insert(
        "externalDocs".into(),
        json!({"description": "PostgREST's API reference, which rowgate serves", "url": "https://postgrest.org/en/v16/references/api.html"}),
    );
    Value::Object(doc)
}

/// Component names for relations, functions and row filters: their own where OpenAPI allows
/// it, else with every other character replaced by `_` (and a number added when two would
/// collide: `名前` and `住所` are two columns).
struct ComponentNames {
    relations: HashMap<String, String>,
    functions: HashMap<String, String>,
    /// (relation, column) → the column's part of `rowFilter.<relation>.<column>`.
    filters: HashMap<(String, String), String>,
    /// A composite type's name as columns write it (`format_type`) → its component.
    composites: HashMap<String, String>,
}

/// `raw` with every character OpenAPI's component names do not take replaced by `_`, made
/// unique among `taken`.
fn unique(taken: &mut std::collections::HashSet<String>, raw: &str) -> String {
    let base: String = raw
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '-' | '_') { c } else { '_' })
        .collect();
    let mut candidate = base.clone();
    let mut n = 2;
    while !taken.insert(candidate.clone()) {
        candidate = format!("{base}_{n}");
        n += 1;
    }
    candidate
}

impl ComponentNames {
    fn new(api: &Api<'_>) -> ComponentNames {
        let mut taken = std::collections::HashSet::new();
        // The error object's name is taken.
        taken.insert("Error".to_owned());
        let relations = api
            .resources
            .iter()
            .map(|r| (r.relation.name.name.clone(), unique(&mut taken, &r.relation.name.name)))
            .collect();
        let functions = api
            .functions
            .iter()
            .map(|f| (f.name.name.clone(), unique(&mut taken, &format!("rpc_{}", f.name.name))))
            .collect();
        let mut filters = HashMap::new();
        for r in &api.resources {
            let mut columns = std::collections::HashSet::new();
            for c in super::filterable(r.relation) {
                let key = unique(&mut columns, &c.name);
                filters.insert((r.relation.name.name.clone(), c.name.clone()), key);
            }
        }
        let composites = api
            .cache
            .named_types
            .iter()
            .filter(|t| !t.attributes.is_empty())
            .map(|t| (t.type_name.clone(), unique(&mut taken, &format!("{}_{}", t.name.schema, t.name.name))))
            .collect();
        ComponentNames { relations, functions, filters, composites }
    }

    /// The component of composite type `pg`, if it is one.
    fn composite(&self, pg: &str) -> Option<&str> {
        self.composites.get(pg).map(String::as_str)
    }

    /// The key of the row filter on `column` of `relation`.
    fn filter(&self, relation: &str, column: &str) -> String {
        let rel = self.relation(relation);
        let col = self.filters.get(&(relation.to_owned(), column.to_owned())).map_or(column, String::as_str);
        format!("rowFilter.{rel}.{col}")
    }

    fn relation<'a>(&'a self, name: &'a str) -> &'a str {
        self.relations.get(name).map_or(name, String::as_str)
    }

    fn function<'a>(&'a self, name: &'a str) -> &'a str {
        self.functions.get(name).map_or(name, String::as_str)
    }
}

fn schema_ref(name: &str) -> Value {
    json!({"$ref": format!("#/components/schemas/{name}")})
}

fn param_ref(name: &str) -> Value {
    json!({"$ref": format!("#/components/parameters/{name}")})
}

fn paths(api: &Api<'_>, names: &ComponentNames) -> Map<String, Value> {
    let mut paths = Map::new();
    paths.insert(
        "/".into(),
        json!({"get": {
            "tags": ["Introspection"],
            "summary": "OpenAPI description (this document)",
            "operationId": "describe",
            "responses": {"200": {"description": "OK", "content": {
                "application/vnd.oai.openapi+json;version=3.1": {"schema": {"type": "object"}},
                "application/openapi+json": {"schema": {"type": "object"}},
            }}, "4XX": {"$ref": "#/components/responses/Error"}},
        }}),
    );
    for resource in &api.resources {
        paths.insert(
            format!("/{}", super::path_segment(&resource.relation.name.name)),
            Value::Object(relation_path(resource, names)),
        );
    }
    for function in &api.functions {
        paths.insert(
            format!("/rpc/{}", super::path_segment(&function.name.name)),
            Value::Object(function_path(function, names)),
        );
    }
    paths
}

/// An operation's tags, summary (the comment's first line, else `what`), description (the
/// rest of the comment) and id.
fn operation(tag: &str, id: String, comment: Option<&str>, what: String) -> Map<String, Value> {
    let mut op = Map::new();
    op.insert("tags".into(), json!([tag]));
    let (summary, description) = split_comment(comment);
    op.insert("summary".into(), json!(summary.unwrap_or(&what)));
    if let Some(d) = description.filter(|d| !d.is_empty()) {
        op.insert("description".into(), json!(d));
    }
    op.insert("operationId".into(), json!(id));
    op
}

/// A `Prefer` header taking any of `values`, comma-separated.
fn prefer(values: &[&str]) -> Value {
    json!({
        "name": "Prefer",
        "in": "header",
        "description": "Preferences, comma-separated",
        "required": false,
        "style": "simple",
        "explode": false,
        "schema": {"type": "array", "items": {"type": "string", "enum": values}},
    })
}

/// The answer with rows: an array of them, one object (`vnd.pgrst.object+json`) or CSV.
fn rows_content(item: Value) -> Value {
    json!({
        "application/json": {"schema": {"type": "array", "items": item}},
        "application/vnd.pgrst.object+json": {"schema": item},
        "text/csv": {"schema": {"type": "string"}},
    })
}

fn error_responses(responses: &mut Map<String, Value>) {
    responses.insert("4XX".into(), json!({"$ref": "#/components/responses/Error"}));
    responses.insert("5XX".into(), json!({"$ref": "#/components/responses/Error"}));
}

fn relation_path(resource: &Resource<'_>, names: &ComponentNames) -> Map<String, Value> {
    let relation = resource.relation;
    let raw = &relation.name.name;
    let key = names.relation(raw);
    let filters: Vec<Value> =
        super::filterable(relation).map(|c| param_ref(&names.filter(raw, &c.name))).collect();
    let comment = relation.comment.as_deref();
    let row = schema_ref(key);
    let mut item = Map::new();
    let m = resource.methods;
    if m.read {
        let mut op = operation(raw, format!("get_{key}"), comment, format!("Read rows of {raw}"));
        let mut params = filters.clone();
        params.extend(["select", "order", "limit", "offset", "range"].map(param_ref));
        params.push(prefer(PREFER_READ));
        op.insert("parameters".into(), Value::Array(params));
        let mut responses = Map::new();
        responses.insert("200".into(), json!({"description": "OK", "content": rows_content(row.clone())}));
        responses.insert(
            "206".into(),
            json!({"description": "Partial Content", "content": rows_content(row.clone())}),
        );
        error_responses(&mut responses);
        op.insert("responses".into(), Value::Object(responses));
        item.insert("get".into(), Value::Object(op));
    }
    let written = |op: &mut Map<String, Value>, success: &str, what: &str| {
        let mut responses = Map::new();
        responses.insert(
            success.into(),
            json!({"description": format!("{what}; the rows with return=representation"), "content": rows_content(row.clone())}),
        );
        responses.insert("204".into(), json!({"description": format!("{what}; return=minimal")}));
        error_responses(&mut responses);
        op.insert("responses".into(), Value::Object(responses));
    };
    if m.insert {
        let mut op = operation(raw, format!("post_{key}"), comment, format!("Insert rows into {raw}"));
        op.insert(
            "parameters".into(),
            json!([
                param_ref("select"),
                param_ref("columns"),
                param_ref("on_conflict"),
                prefer(PREFER_INSERT)
            ]),
        );
        let one = schema_ref(&format!("{key}.insert"));
        op.insert(
            "requestBody".into(),
            json!({"required": true, "content": {
                "application/json": {"schema": {"oneOf": [one, {"type": "array", "items": one}]}},
                "text/csv": {"schema": {"type": "string"}},
                "application/x-www-form-urlencoded": {"schema": one},
            }}),
        );
        written(&mut op, "201", "Created");
        item.insert("post".into(), Value::Object(op));
    }
    if m.update {
        let mut op = operation(raw, format!("patch_{key}"), comment, format!("Update rows of {raw}"));
        let mut params = filters.clone();
        params.extend([param_ref("select"), param_ref("limit"), param_ref("order"), prefer(PREFER_CHANGE)]);
        op.insert("parameters".into(), Value::Array(params));
        let body = schema_ref(&format!("{key}.update"));
        op.insert(
            "requestBody".into(),
            json!({"required": true, "content": {
                "application/json": {"schema": body},
                "application/x-www-form-urlencoded": {"schema": body},
            }}),
        );
        written(&mut op, "200", "Updated");
        item.insert("patch".into(), Value::Object(op));
    }
    if m.delete {
        let mut op = operation(raw, format!("delete_{key}"), comment, format!("Delete rows of {raw}"));
        let mut params = filters;
        params.extend([param_ref("select"), param_ref("limit"), param_ref("order"), prefer(PREFER_CHANGE)]);
        op.insert("parameters".into(), Value::Array(params));
        written(&mut op, "200", "Deleted");
        item.insert("delete".into(), Value::Object(op));
    }
    item
}

fn function_path(function: &Function, names: &ComponentNames) -> Map<String, Value> {
    let raw = &function.name.name;
    let key = names.function(raw);
    let tag = format!("(rpc) {raw}");
    let comment = function.comment.as_deref();
    let result = result_schema(function, names);
    let mut responses = Map::new();
    match &result {
        Some(schema) => {
            let mut content = Map::new();
            content.insert("application/json".into(), json!({"schema": schema}));
            if function.returns_set {
                content.insert("text/csv".into(), json!({"schema": {"type": "string"}}));
            }
            responses.insert("200".into(), json!({"description": "OK", "content": content}));
        }
        None => {
            responses.insert("204".into(), json!({"description": "No Content"}));
        }
    }
    error_responses(&mut responses);
    let mut item = Map::new();
    if function.volatility != Volatility::Volatile {
        let mut op = operation(&tag, format!("get_{key}"), comment, format!("Call {raw}"));
        let mut params: Vec<Value> = function
            .args
            .iter()
            .filter(|a| !a.name.is_empty())
            .map(|a| {
                let mut schema = value_schema(&a.type_name, &[], false, names);
                if a.variadic {
                    schema = json!({"type": "array", "items": value_schema(element(&a.type_name), &[], false, names)});
                }
                let mut p = json!({"name": a.name, "in": "query", "required": !a.has_default && !a.variadic, "schema": schema});
                if a.variadic {
                    p["style"] = json!("form");
                    p["explode"] = json!(true);
                }
                p
            })
            .collect();
        params.push(prefer(PREFER_CALL));
        op.insert("parameters".into(), Value::Array(params));
        op.insert("responses".into(), Value::Object(responses.clone()));
        item.insert("get".into(), Value::Object(op));
    }
    let mut op = operation(&tag, format!("post_{key}"), comment, format!("Call {raw}"));
    op.insert("parameters".into(), json!([prefer(PREFER_CALL)]));
    let body = match raw_body(function) {
        // A single unnamed argument takes the whole body, of its own media type.
        Some(media) => {
            json!({media: {"schema": if media == "application/json" { json!({}) } else { json!({"type": "string"}) }}})
        }
        None => json!({"application/json": {"schema": schema_ref(&format!("{key}.args"))}}),
    };
    op.insert("requestBody".into(), json!({"required": true, "content": body}));
    op.insert("responses".into(), Value::Object(responses));
    item.insert("post".into(), Value::Object(op));
    item
}

/// The media type of the whole body a function's single unnamed argument takes, if it has one.
pub(super) fn raw_body(function: &Function) -> Option<&'static str> {
    match function.args.as_slice() {
        [arg] if arg.name.is_empty() => Some(match arg.type_name.as_str() {
            "bytea" => "application/octet-stream",
            "text" => "text/plain",
            "xml" => "text/xml",
            _ => "application/json",
        }),
        _ => None,
    }
}

/// What a function returns, as a schema (`None` for `void`).
fn result_schema(function: &Function, names: &ComponentNames) -> Option<Value> {
    let one = match &function.returns {
        FunctionResult::Void => return None,
        // A row of a relation described here (another schema's is no component of this one).
        FunctionResult::Composite(q)
            if q.schema == function.name.schema && names.relations.contains_key(&q.name) =>
        {
            schema_ref(names.relation(&q.name))
        }
        FunctionResult::Composite(_) => json!({"type": "object"}),
        FunctionResult::Columns(columns) => object(columns, false, names),
        FunctionResult::Scalar(_) => value_schema(&function.return_type, &[], true, names),
    };
    Some(if function.returns_set { json!({"type": "array", "items": one}) } else { one })
}
